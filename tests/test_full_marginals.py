"""The full-GP marginal variances against a dense numpy inverse of K⁻¹ + Λ̄, on both
paths of ``_variances_sqrt``: the short form (1 − [B⁻¹]_nn)/λ_n and the solve it falls
back to when some λ_n is zero (as at initialisation) or too small for the short form."""
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.models import full
from bnlab.models.dense_linalg import lower_triangular_inverse
from bnlab.sites import Sites


def test_recursive_triangular_inverse_is_the_inverse():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((301, 301))
    L = np.linalg.cholesky(A @ A.T + 301 * np.eye(301))
    inv = np.asarray(lower_triangular_inverse(jnp.asarray(L)))
    np.testing.assert_allclose(inv, np.linalg.inv(L), rtol=0, atol=1e-12)
    assert np.all(np.triu(inv, 1) == 0)


@pytest.mark.parametrize("smallest_site", [1.0, 1e-9, 0.0])
def test_variances_equal_the_dense_posterior_covariance(smallest_site):
    rng = np.random.default_rng(1)
    n = 300
    X = np.sort(rng.uniform(-5, 5, n))[:, None]
    model = bnlab.GP(bnlab.kernels.Matern52(1.5, 2.0), bnlab.likelihoods.Bernoulli("probit"))
    params = model.init_params()
    prior = full.prepare(model, params, jnp.asarray(X))
    lam = rng.uniform(0.05, 2.0, n)
    lam[::7] = smallest_site
    sites = Sites(jnp.asarray(rng.standard_normal((n, 1))), jnp.asarray(lam[:, None, None]))
    marg = full.marginals(prior, sites)
    K = np.asarray(prior.K)
    # C = K − K S (I + SKS)⁻¹ S K, S = diag(√λ): no K⁻¹, exact also where λ_n = 0
    s = np.sqrt(lam)
    C = K - (K * s) @ np.linalg.solve(np.eye(n) + s[:, None] * K * s, s[:, None] * K)
    np.testing.assert_allclose(np.asarray(marg.cov[:, 0, 0]), np.diag(C), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(marg.mean[:, 0]), C @ np.asarray(sites.nat1[:, 0]),
                               rtol=1e-8, atol=1e-10)
