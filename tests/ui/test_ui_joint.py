"""bnlab.posterior.joint.joint_covariance against the dense inverse (K⁻¹ + Λ̄)⁻¹."""
import numpy as np
import pytest

import bnlab
from bnlab.posterior.full import marginals, prepare
from bnlab.posterior.joint import joint_covariance
from bnlab.sites import Sites


def _dense(model, params, X, prec):
    K = np.asarray(model.prior_covariance(params, X, X))
    N, D = prec.shape[:2]
    L = np.zeros((N * D, N * D))
    for n in range(N):
        L[n * D:(n + 1) * D, n * D:(n + 1) * D] = prec[n]
    return np.linalg.inv(np.linalg.inv(K) + L)


@pytest.mark.parametrize("lik, signs", [(bnlab.likelihoods.Bernoulli(), 1.0),
                                        (bnlab.likelihoods.StudentT(), -1.0),
                                        (bnlab.likelihoods.Heteroscedastic(), 1.0)])
def test_joint_covariance_matches_dense_inverse(lik, signs):
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 12))[:, None]
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.3, variance=0.8), lik)
    params = model.init_params()
    N, D = 12, model.num_latents
    A = rng.normal(size=(N, D, D)) * 0.3
    prec = np.einsum("nab,ncb->nac", A, A) + 0.5 * np.eye(D)
    prec[2] *= signs * 0.2            # one negative site precision (EP on Student-t)
    sites = Sites(rng.normal(size=(N, D)), prec)
    C = _dense(model, params, X, prec)
    prior = prepare(model, params, X)
    for i, j in [(0, 5), (2, 11), (7, 7)]:
        idx = np.r_[np.arange(D) + i * D, np.arange(D) + j * D]
        got = np.asarray(joint_covariance(prior, sites, i, j))
        np.testing.assert_allclose(got, C[np.ix_(idx, idx)], rtol=1e-6, atol=1e-9)


def test_joint_covariance_rejects_bad_index():
    X = np.linspace(0, 1, 4)[:, None]
    model = bnlab.GP(bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian())
    prior = prepare(model, model.init_params(), X)
    sites = Sites(np.zeros((4, 1)), np.ones((4, 1, 1)))
    with pytest.raises(ValueError, match="outside the 4 training inputs"):
        joint_covariance(prior, sites, 0, 4)


def test_joint_covariance_agrees_with_the_marginals():
    """One latent, a third of the sites negative: the ellipse's variances are the
    band's (the same signed W½ factorisation), to round-off."""
    rng = np.random.default_rng(1)
    N = 150
    X = np.sort(rng.uniform(-5, 5, N))[:, None]
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.5, variance=2.0),
                     bnlab.likelihoods.StudentT())
    params = model.init_params()
    lam = rng.uniform(0.05, 2.0, N)
    lam[::3] = -rng.uniform(0.001, 0.03, N // 3)
    sites = Sites(rng.normal(size=(N, 1)), lam[:, None, None])
    prior = prepare(model, params, X)
    var = np.asarray(marginals(prior, sites).cov[:, 0, 0])
    K = np.asarray(prior.K)
    C = np.linalg.solve((np.eye(N) + np.diag(lam) @ K).T, K.T).T     # (K⁻¹ + Λ̄)⁻¹, no K⁻¹
    for i, j in [(0, 5), (3, 120), (7, 7)]:
        got = np.asarray(joint_covariance(prior, sites, i, j))
        np.testing.assert_allclose(np.diag(got), var[[i, j]], rtol=1e-12)
        np.testing.assert_allclose(got, C[np.ix_([i, j], [i, j])], rtol=1e-9, atol=1e-12)
