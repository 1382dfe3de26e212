"""The Markov-GP global update (bnlab.posterior.markov) against a dense reference written
here in numpy (C = K(I + Λ̄K)⁻¹, m = Cν̄, log_norm = ½ν̄ᵀm − ½ log|I + KΛ̄|; no jitter,
valid for singular K and indefinite Λ̄) and against the full GP: unsorted inputs with
duplicates, negative site precisions, non-PD posteriors, prediction, bad input."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.posterior import full, markov
from bnlab.sites import Sites

M12, M32, M52 = (bnlab.kernels.Matern12(0.8, 1.3), bnlab.kernels.Matern32(0.6, 0.9),
                 bnlab.kernels.Matern52(1.1, 1.7))
CASES = {"m12": ([M12], bnlab.likelihoods.Bernoulli()),
         "m32": ([M32], bnlab.likelihoods.Bernoulli()),
         "m52": ([M52], bnlab.likelihoods.Bernoulli()),
         "m32+m12": ([M32, M12], bnlab.likelihoods.Heteroscedastic()),
         "m12+m52": ([M12, M52], bnlab.likelihoods.Product())}


def dense_posterior(K, nat1, prec):
    N, D = nat1.shape
    Lam = np.zeros((N * D, N * D))
    for n in range(N):
        Lam[n * D:(n + 1) * D, n * D:(n + 1) * D] = prec[n]
    C = K @ np.linalg.inv(np.eye(N * D) + Lam @ K)
    C = 0.5 * (C + C.T)
    m = C @ nat1.reshape(-1)
    log_norm = 0.5 * nat1.reshape(-1) @ m - 0.5 * np.linalg.slogdet(np.eye(N * D) + K @ Lam)[1]
    blocks = np.stack([C[n * D:(n + 1) * D, n * D:(n + 1) * D] for n in range(N)])
    return m.reshape(N, D), blocks, log_norm


def unsorted_inputs(rng, N=25):
    X = rng.uniform(-2, 4, (N, 1))
    X[7] = X[3]                      # a duplicate input (Δ = 0)
    X[11] = X[3]
    return X


def random_sites(rng, N, D, negative):
    """Random sites; with ``negative`` a third of the site precisions are indefinite."""
    B = rng.normal(size=(N, D, D))
    prec = 0.7 * B @ np.swapaxes(B, 1, 2) + 0.05 * np.eye(D)
    if negative:
        prec[::3] -= 0.35 * np.eye(D)
    return rng.normal(size=(N, D)), prec


def run_markov_batch(kernels, lik, X, nat1, prec, parallel):
    """Markov marginals for a batch of site sets (leading axis), one compilation."""
    model = bnlab.MarkovGP(kernels, lik, parallel=parallel)
    prior = markov.prepare(model, model.init_params(), jnp.asarray(X))
    return jax.jit(jax.vmap(lambda s: markov.marginals(prior, s)))(
        Sites(jnp.asarray(nat1), jnp.asarray(prec)))


def run_markov(kernels, lik, X, nat1, prec, parallel, Xs=None):
    model = bnlab.MarkovGP(kernels, lik, parallel=parallel)
    params = model.init_params()

    @jax.jit
    def go(params, X, sites):
        prior = markov.prepare(model, params, X)
        marg = markov.marginals(prior, sites)
        pred = markov.predict(model, params, X, prior, sites, marg, Xs) if Xs is not None else None
        return marg, pred

    return go(params, jnp.asarray(X), Sites(jnp.asarray(nat1), jnp.asarray(prec)))


@pytest.mark.parametrize("case", ["m12", "m52", "m32+m12"])
def test_marginals_and_log_norm_match_dense(case):
    """Unsorted inputs with duplicates; PSD sites and sites with negative precisions
    (the posterior stays PD), both scans."""
    kernels, lik = CASES[case]
    rng = np.random.default_rng(3)
    X = unsorted_inputs(rng)
    D = len(kernels)
    site_sets = [random_sites(rng, X.shape[0], D, negative) for negative in (False, True)]
    gp = bnlab.GP(kernels, lik)
    K = np.asarray(gp.prior_covariance(gp.init_params(), jnp.asarray(X), jnp.asarray(X)))
    expected = [dense_posterior(K, *sites) for sites in site_sets]
    assert all(np.all(np.linalg.eigvalsh(C) > 0) for _, C, _ in expected)
    assert np.any(site_sets[1][1] < 0)
    nat1, prec = (np.stack(a) for a in zip(*site_sets))
    for parallel in (False, True):
        marg = run_markov_batch(kernels, lik, X, nat1, prec, parallel)
        for i, (m, C, log_norm) in enumerate(expected):
            assert bool(marg.psd[i])
            np.testing.assert_allclose(np.asarray(marg.mean[i]), m, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(np.asarray(marg.cov[i]), C, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(float(marg.log_norm[i]), log_norm, rtol=1e-10, atol=1e-9)
        np.testing.assert_array_equal(np.asarray(marg.cond_var), 0.0)


def test_psd_flag_is_the_joint_posterior():
    """Two strongly correlated inputs (k = 0.99): a negative site at one input makes the
    *filtering* distribution there improper, yet a strong site at the other can keep the
    joint posterior PD — the PSD flag must describe the joint, not the filter."""
    X = np.array([[1.0], [0.0]])                   # unsorted on purpose
    kernels = [bnlab.kernels.Matern12(100.0, 1.0)]
    gp = bnlab.GP(kernels, bnlab.likelihoods.Bernoulli())
    K = np.asarray(gp.prior_covariance(gp.init_params(), jnp.asarray(X), jnp.asarray(X)))
    cases = [((100.0, -2.0), True), ((0.5, -2.0), False), ((-0.8, -0.5), False),
             ((-0.3, 0.2), True), ((-2.0, 100.0), True)]
    prec = np.array([c for c, _ in cases])[:, :, None, None]
    nat1 = np.broadcast_to(np.array([[-0.2], [0.3]]), (len(cases), 2, 1))
    for i, (_, pd) in enumerate(cases):
        assert np.all(np.linalg.eigvalsh(np.linalg.inv(K) + np.diag(prec[i, :, 0, 0])) > 0) == pd
    for parallel in (False, True):
        marg = run_markov_batch(kernels, bnlab.likelihoods.Bernoulli(), X, nat1, prec, parallel)
        for i, (_, pd) in enumerate(cases):
            assert bool(marg.psd[i]) == pd
            if pd:
                m, C, log_norm = dense_posterior(K, nat1[i], prec[i])
                np.testing.assert_allclose(np.asarray(marg.mean[i]), m, rtol=1e-9, atol=1e-12)
                np.testing.assert_allclose(np.asarray(marg.cov[i]), C, rtol=1e-9, atol=1e-12)
                np.testing.assert_allclose(float(marg.log_norm[i]), log_norm, rtol=1e-10)


def test_full_gp_agrees_on_psd_for_random_indefinite_sites():
    """Many random indefinite sites: the Markov PSD flag equals the full GP's."""
    rng = np.random.default_rng(5)
    kernels, lik = CASES["m32"]
    X = rng.uniform(0, 3, (12, 1))
    gp, mg = bnlab.GP(kernels, lik), bnlab.MarkovGP(kernels, lik)
    params = gp.init_params()
    fprior = full.prepare(gp, params, jnp.asarray(X))
    mprior = markov.prepare(mg, params, jnp.asarray(X))
    both = jax.jit(jax.vmap(lambda s: (full.marginals(fprior, s).psd, markov.marginals(mprior, s).psd)))
    prec = rng.normal(0.0, 1.0, (200, 12, 1, 1)) * rng.uniform(0.1, 3.0, (200, 1, 1, 1))
    f_psd, m_psd = both(Sites(jnp.zeros((200, 12, 1)), jnp.asarray(prec)))
    assert 20 < int(f_psd.sum()) < 180
    np.testing.assert_array_equal(np.asarray(m_psd), np.asarray(f_psd))


@pytest.mark.parametrize("case", ["m32", pytest.param("m12+m52", marks=pytest.mark.slow)])
def test_prediction_at_unsorted_test_inputs(case):
    kernels, lik = CASES[case]
    rng = np.random.default_rng(11)
    X = unsorted_inputs(rng)
    D = len(kernels)
    nat1, prec = random_sites(rng, X.shape[0], D, negative=False)
    Xs = np.concatenate([rng.uniform(-4, 6, (9, 1)), X[[3, 0]]])    # includes training inputs
    gp = bnlab.GP(kernels, lik)
    params = gp.init_params()
    sites = Sites(jnp.asarray(nat1), jnp.asarray(prec))
    fprior = full.prepare(gp, params, jnp.asarray(X))
    fmarg = full.marginals(fprior, sites)
    f_mean, f_cov = full.predict(gp, params, jnp.asarray(X), fprior, sites, fmarg, jnp.asarray(Xs))
    for parallel in (False, True):
        _, (mean, cov) = run_markov(kernels, lik, X, nat1, prec, parallel, jnp.asarray(Xs))
        np.testing.assert_allclose(np.asarray(mean), np.asarray(f_mean), atol=1e-8)
        np.testing.assert_allclose(np.asarray(cov), np.asarray(f_cov), atol=1e-8)


def test_infer_predict_matches_full_gp():
    ds = bnlab.datasets.load("classification_1d", n=40, seed=1)
    kernel, lik = bnlab.kernels.Matern32(0.7, 1.5), bnlab.likelihoods.Bernoulli()
    Xs = ds.X_test[::-1]
    ref = bnlab.infer(bnlab.GP(kernel, lik), ds.X, ds.y, method="ep", max_iters=8, tol=1e-14)
    res = bnlab.infer(bnlab.MarkovGP(kernel, lik), ds.X, ds.y, method="ep", max_iters=8, tol=1e-14)
    np.testing.assert_allclose(res.log_marginal, ref.log_marginal, rtol=1e-9)
    for a, b in zip(res.predict(Xs), ref.predict(Xs)):
        np.testing.assert_allclose(a, b, atol=1e-8)
    np.testing.assert_allclose(res.log_predictive(Xs, ds.y_test[::-1]),
                               ref.log_predictive(Xs, ds.y_test[::-1]), rtol=1e-9)


@pytest.mark.parametrize("kernel", [bnlab.kernels.RBF(), bnlab.kernels.Periodic()],
                         ids=lambda k: k.name)
def test_non_markovian_kernel_raises(kernel):
    with pytest.raises(ValueError, match="state-space form"):
        bnlab.MarkovGP(kernel, bnlab.likelihoods.Bernoulli())
    with pytest.raises(ValueError, match="state-space form"):
        bnlab.MarkovGP([M32, kernel], bnlab.likelihoods.Heteroscedastic())


def test_multi_column_inputs_raise():
    with pytest.raises(ValueError, match="one lengthscale"):
        bnlab.MarkovGP(bnlab.kernels.Matern32(lengthscale=[1.0, 2.0]), bnlab.likelihoods.Bernoulli())
    model = bnlab.MarkovGP(M32, bnlab.likelihoods.Bernoulli())
    X = np.random.default_rng(0).normal(size=(10, 2))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    with pytest.raises(ValueError, match="one-dimensional inputs"):
        bnlab.infer(model, X, y, method="vi", max_iters=2)
    res = bnlab.infer(model, X[:, :1], y, method="vi", max_iters=2)
    with pytest.raises(ValueError, match="one-dimensional inputs"):
        res.predict(X)


def test_structure_key_separates_scans():
    a = bnlab.MarkovGP(M32, bnlab.likelihoods.Bernoulli())
    b = bnlab.MarkovGP(M32, bnlab.likelihoods.Bernoulli(), parallel=True)
    assert a.structure == "markov" and a.structure_key() != b.structure_key()
