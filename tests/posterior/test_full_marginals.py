"""The full-GP marginals against a dense numpy (K⁻¹ + Λ̄)⁻¹ = K(I + Λ̄K)⁻¹: the three paths
of ``_variances_sqrt`` (the short form (1 − [B⁻¹]_nn)/λ_n, and the product form it
falls back to where some λ_n is zero, as at initialisation, or too small for the short
form: for those columns when they are few, else for all), the signed W½ form for site
precisions of either sign (and its factor and inverse,
``dense_linalg.signed_cholesky_and_inverse``), the prior-Cholesky form for 2×2 site
blocks; the triangular-aware products and solves of ``dense_linalg`` against dense
numpy ones."""
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.posterior import full
from bnlab.linalg.dense import (lower_gram, lower_solve, lower_solve_lower, lower_times,
                                      lower_triangular_inverse,
                                      signed_cholesky_and_inverse, symmetric_cholesky,
                                      times_lower)
from bnlab.sites import Sites


def test_symmetric_cholesky_is_numpys_factor_and_nan_when_not_positive_definite():
    """``symmetric_cholesky`` (LAPACK on Mᵀ, not symmetrised) against numpy's factor of
    a symmetric M; a matrix with a negative pivot gives NaN on the whole diagonal, which
    the marginals' PSD flag reads (``full._factored``)."""
    rng = np.random.default_rng(4)
    A = rng.standard_normal((150, 150))
    M = A @ A.T / 150 + np.eye(150)
    M = 0.5 * (M + M.T)
    np.testing.assert_allclose(np.asarray(symmetric_cholesky(jnp.asarray(M))),
                               np.linalg.cholesky(M), rtol=1e-12, atol=1e-13)
    M[100, 100] = -1.0
    L = symmetric_cholesky(jnp.asarray(M))
    assert np.all(np.isnan(np.diag(np.asarray(L))))
    assert not bool(full._factored(L))


@pytest.mark.parametrize("n", [301, 700])        # leaf limits of 72 and 128 rows
def test_recursive_triangular_inverse_is_the_inverse(n):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n))
    L = np.linalg.cholesky(A @ A.T + n * np.eye(n))
    inv = np.asarray(lower_triangular_inverse(jnp.asarray(L)))
    np.testing.assert_allclose(inv, np.linalg.inv(L), rtol=0, atol=1e-12)
    assert np.all(np.triu(inv, 1) == 0)


def test_once_traces_one_triangular_solve_for_the_same_inverse_and_solves():
    """Inside ``dense.once()`` (a run's first and last marginals) the inverse and the
    solves are one triangular solve each, no products, and still numpy's answers; the
    engine's loop keeps the recursion (products), also in a thread beside a ``once``."""
    import threading

    import jax
    from bnlab.linalg import dense
    n = 301
    rng = np.random.default_rng(1)
    A = rng.standard_normal((n, n))
    L = jnp.asarray(np.linalg.cholesky(A @ A.T + n * np.eye(n)))
    R = jnp.asarray(np.tril(rng.standard_normal((n, n))))

    def names(jaxpr):                  # primitives, those of nested jits included
        out = []
        for e in jaxpr.eqns:
            out.append(e.primitive.name)
            inner = e.params.get("jaxpr")
            if inner is not None:
                out += names(getattr(inner, "jaxpr", inner))
        return out

    def primitives(fn, *args):         # a fresh function: no trace reused from a cache
        return names(jax.make_jaxpr(lambda *a: fn(*a))(*args).jaxpr)

    seen = {}

    def outside():                     # another thread while this one is inside once()
        seen["other"] = primitives(lower_triangular_inverse, L)

    with dense.once():
        thread = threading.Thread(target=outside)
        thread.start()
        thread.join()
        once_inverse = primitives(lower_triangular_inverse, L)
        once_solve = primitives(lower_solve_lower, L, R)
        inv = np.asarray(lower_triangular_inverse(L))
        X = np.asarray(lower_solve_lower(L, R))
    assert "dot_general" not in once_inverse + once_solve
    assert once_inverse.count("triangular_solve") == once_solve.count("triangular_solve") == 1
    assert seen["other"].count("dot_general") > 10           # the recursion, unrolled
    assert primitives(lower_triangular_inverse, L).count("dot_general") > 10
    np.testing.assert_allclose(inv, np.linalg.inv(np.asarray(L)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(X, np.linalg.solve(np.asarray(L), np.asarray(R)), rtol=0,
                               atol=1e-13)


@pytest.mark.parametrize("n, block", [(301, 1), (300, 2), (129, 1)])
def test_triangular_products_equal_the_dense_products(n, block):
    rng = np.random.default_rng(n)
    A, L = rng.standard_normal((n + 3, n)), np.tril(rng.standard_normal((n, n)))
    for leaf in (32, 128):
        np.testing.assert_allclose(np.asarray(times_lower(jnp.asarray(A), jnp.asarray(L), leaf)),
                                   A @ L, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(lower_times(jnp.asarray(L), jnp.asarray(A.T), leaf)),
                                   L @ A.T, rtol=0, atol=1e-12)
    blocks = rng.standard_normal((n // block, block, block))
    Lam = np.zeros((n, n))
    for i, b in enumerate(blocks + blocks.transpose(0, 2, 1)):
        Lam[i * block:(i + 1) * block, i * block:(i + 1) * block] = b
    gram = np.asarray(lower_gram(jnp.asarray(L), jnp.asarray(Lam @ L), block))
    np.testing.assert_allclose(gram, L.T @ Lam @ L, rtol=0, atol=1e-11)


@pytest.mark.parametrize("n", [31, 301, 700])
def test_recursive_triangular_solves_equal_numpy_solves(n):
    """700 > 600 takes the large-factor leaves (``inverse_leaf``)."""
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    L = np.linalg.cholesky(A @ A.T + n * np.eye(n))
    R, Z = np.tril(rng.standard_normal((n, n))), rng.standard_normal((n, 5))
    X = np.asarray(lower_solve_lower(jnp.asarray(L), jnp.asarray(R)))
    np.testing.assert_allclose(X, np.linalg.solve(L, R), rtol=0, atol=1e-13)
    assert np.all(np.triu(X, 1) == 0)
    np.testing.assert_allclose(np.asarray(lower_solve(jnp.asarray(L), jnp.asarray(Z))),
                               np.linalg.solve(L, Z), rtol=0, atol=1e-13)


def _dense_posterior(K, Lam):
    """(K⁻¹ + Λ̄)⁻¹ = K(I + Λ̄K)⁻¹: no K⁻¹, valid for any sign of Λ̄."""
    return np.linalg.solve((np.eye(len(K)) + Lam @ K).T, K.T).T


@pytest.mark.parametrize("n, positives", [(300, 0), (300, 137), (300, 300), (129, 64),
                                          (200, 100), (700, 300)])
def test_signed_cholesky_factors_a_matrix_of_known_inertia(n, positives):
    """M = Σ + GKG with positives first, as the full-GP marginals build it: the sign
    changes inside a leaf (137 of 300, 64 of 129, 300 of 700) or at a split (100 of
    200); 700 > 600 takes the large-matrix leaves (``signed_leaf``). The inverse comes
    with the factor."""
    rng = np.random.default_rng(n + positives)
    A = rng.standard_normal((n, n))
    K = A @ A.T / n + 0.1 * np.eye(n)
    sign = np.where(np.arange(n) < positives, 1.0, -1.0)
    g = np.sqrt(np.where(sign > 0, rng.uniform(0.1, 2.0, n), rng.uniform(0.0, 0.05, n)))
    M = np.diag(sign) + g[:, None] * K * g
    assert np.sum(np.linalg.eigvalsh(M) > 0) == positives    # the inertia of Σ
    L, L_inv = map(np.asarray, signed_cholesky_and_inverse(jnp.asarray(M), jnp.asarray(sign)))
    assert np.all(np.triu(L, 1) == 0) and np.all(np.triu(L_inv, 1) == 0)
    np.testing.assert_allclose(L @ np.diag(sign) @ L.T, M, rtol=0, atol=1e-12)
    np.testing.assert_allclose(L_inv, np.linalg.inv(L), rtol=0, atol=1e-12)
    wrong = np.where(np.arange(n) < positives + 1, 1.0, -1.0)     # one sign too many
    if positives < n:
        factors = signed_cholesky_and_inverse(jnp.asarray(M), jnp.asarray(wrong))
        assert not any(np.all(np.isfinite(np.asarray(F))) for F in factors)


def _probit_problem(n, seed):
    """(model, params, X, prior, rng) on n sorted 1-D inputs; rng continues after X."""
    rng = np.random.default_rng(seed)
    X = jnp.asarray(np.sort(rng.uniform(-5, 5, n))[:, None])
    model = bnlab.GP(bnlab.kernels.Matern52(1.5, 2.0), bnlab.likelihoods.Bernoulli("probit"))
    params = model.init_params()
    return model, params, X, full.prepare(model, params, X), rng


def test_signed_form_means_and_predictions():
    """The mean-only path and prediction at new inputs with a third of the sites
    negative: C** = k** − K*ᵀΛ̄(I + KΛ̄)⁻¹K* (= k** − K*ᵀ(K + Λ̄⁻¹)⁻¹K*, no K⁻¹)."""
    n = 200
    model, params, X, prior, rng = _probit_problem(n, 4)
    Xs = jnp.asarray(np.linspace(-6, 6, 37)[:, None])
    lam = rng.uniform(0.05, 2.0, n)
    lam[::3] = -rng.uniform(0.001, 0.03, len(lam[::3]))
    nu = rng.standard_normal(n)
    sites = Sites(jnp.asarray(nu[:, None]), jnp.asarray(lam[:, None, None]))
    K = np.asarray(prior.K)
    C = _dense_posterior(K, np.diag(lam))
    mean_only = full.marginals_mean_only(prior, sites)
    np.testing.assert_allclose(np.asarray(mean_only.mean[:, 0]), C @ nu, rtol=1e-8, atol=1e-10)
    assert bool(mean_only.psd)
    marg = full.marginals(prior, sites)
    assert float(mean_only.log_norm) == pytest.approx(float(marg.log_norm), rel=1e-12)
    _, cov = full.predict(model, params, X, prior, sites, marg, Xs)
    Ks = np.asarray(model.prior_covariance(params, X, Xs))
    kss = np.asarray(model.prior_variance(params, Xs))[:, 0, 0]
    Lam = np.diag(lam)
    dense = kss - np.einsum("ij,ij->j", Ks, Lam @ np.linalg.solve(np.eye(n) + K @ Lam, Ks))
    np.testing.assert_allclose(np.asarray(cov[:, 0, 0]), dense, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("negative_every, zero_every", [(9, None), (2, None), (3, 40), (3, 5)])
def test_signed_form_for_site_precisions_of_either_sign(negative_every, zero_every):
    """Every 9th or every other site negative; with zero sites, few (patched columns)
    or many (every variance by the product form)."""
    n = 300
    *_, prior, rng = _probit_problem(n, 2)
    lam = rng.uniform(0.05, 2.0, n)
    lam[::negative_every] = -rng.uniform(0.001, 0.03, len(lam[::negative_every]))
    if zero_every:
        lam[1::zero_every] = 0.0
    nu = rng.standard_normal(n)
    marg = full.marginals(prior, Sites(jnp.asarray(nu[:, None]), jnp.asarray(lam[:, None, None])))
    K = np.asarray(prior.K)               # no jitter: the signed form never factors K
    C = _dense_posterior(K, np.diag(lam))
    assert bool(marg.psd)
    np.testing.assert_allclose(np.asarray(marg.cov[:, 0, 0]), np.diag(C), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(marg.mean[:, 0]), C @ nu, rtol=1e-8, atol=1e-10)
    sign, logdet = np.linalg.slogdet(np.eye(n) + K @ np.diag(lam))
    assert float(marg.log_norm) == pytest.approx(0.5 * nu @ C @ nu - 0.5 * logdet, rel=1e-10)
    lam[::9] = -50.0                      # K⁻¹ + Λ̄ indefinite: flagged, not a crash
    bad = full.marginals(prior, Sites(jnp.asarray(nu[:, None]), jnp.asarray(lam[:, None, None])))
    assert not bool(bad.psd)


def test_prior_cholesky_form_with_two_latents():
    rng = np.random.default_rng(3)
    N, D = 150, 2
    A = rng.standard_normal((N * D, N * D))
    K = A @ A.T / (N * D) + 0.5 * np.eye(N * D)
    prior = full.FullPrior(jnp.asarray(K), jnp.linalg.cholesky(jnp.asarray(K)), D)
    G = rng.standard_normal((N, D, D))
    prec = np.einsum("nab,ncb->nac", G, G) * 0.3 - 0.05 * np.eye(D)   # some negative
    nu = rng.standard_normal((N, D))
    marg = full.marginals(prior, Sites(jnp.asarray(nu), jnp.asarray(prec)))
    Lam = np.zeros((N * D, N * D))
    for i in range(N):
        Lam[i * D:(i + 1) * D, i * D:(i + 1) * D] = prec[i]
    C = _dense_posterior(K, Lam)
    blocks = np.stack([C[i * D:(i + 1) * D, i * D:(i + 1) * D] for i in range(N)])
    np.testing.assert_allclose(np.asarray(marg.cov), blocks, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(marg.mean).reshape(-1), C @ nu.reshape(-1),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("smallest_site, every", [(1.0, 7), (1e-9, 7), (0.0, 7), (1e-9, 40),
                                                  (0.0, 40)])
def test_variances_equal_the_dense_posterior_covariance(smallest_site, every):
    """Every 7th site small: 43 > ``full.PATCHED_COLUMNS`` columns, all variances by the
    product form; every 40th: 8, those columns patched, the rest by the short form."""
    n = 300
    *_, prior, rng = _probit_problem(n, 1)
    lam = rng.uniform(0.05, 2.0, n)
    lam[::every] = smallest_site
    sites = Sites(jnp.asarray(rng.standard_normal((n, 1))), jnp.asarray(lam[:, None, None]))
    marg = full.marginals(prior, sites)
    K = np.asarray(prior.K)
    # C = K − K S (I + SKS)⁻¹ S K, S = diag(√λ): no K⁻¹, exact also where λ_n = 0
    s = np.sqrt(lam)
    C = K - (K * s) @ np.linalg.solve(np.eye(n) + s[:, None] * K * s, s[:, None] * K)
    np.testing.assert_allclose(np.asarray(marg.cov[:, 0, 0]), np.diag(C), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(marg.mean[:, 0]), C @ np.asarray(sites.nat1[:, 0]),
                               rtol=1e-8, atol=1e-10)
