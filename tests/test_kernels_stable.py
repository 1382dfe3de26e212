"""Kernels exact at any offset and lengthscale: inputs shifted by 1e6–1e8 (raw
timestamps) and lengthscales down to 1e-8, against exact references — numpy on the
centred inputs, the textbook EP of ``tests/reference.py``, and the Markov GP, whose
Kalman filter only ever sees the differences x_{n+1} − x_n.

Shifted inputs are compared with the same inputs as represented after the shift,
(X + s) − s (an exact subtraction), so the reference solves the very same problem."""
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bnlab
from reference import matern52, textbook_ep_probit

SHIFTS = [1e6, 1e7, 1e8]


def _represented(X, shift):
    """X + shift and the same points brought back to the origin exactly."""
    shifted = X + shift
    return shifted, shifted - shift


def _numpy_kernel(name, X1, X2, lengthscale, variance, period=1.0):
    diff = X1[:, None, :] - X2[None, :, :]
    r = np.sqrt(np.sum((diff / lengthscale) ** 2, -1))
    if name == "matern12":
        return variance * np.exp(-r)
    if name == "matern32":
        return variance * (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
    if name == "matern52":
        s = np.sqrt(5) * r
        return variance * (1 + s + s**2 / 3) * np.exp(-s)
    if name == "rbf":
        return variance * np.exp(-0.5 * r**2)
    s = np.sin(np.pi * diff / period) / lengthscale
    return variance * np.exp(-2 * np.sum(s**2, -1))


def _gaussian_log_z(K, y, noise):
    """log N(y | 0, K + σ²I) by numpy's Cholesky."""
    L = np.linalg.cholesky(K + noise * np.eye(len(y)))
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.sum(np.log(np.diag(L))) - 0.5 * len(y) * np.log(2 * np.pi)


@pytest.mark.parametrize("name", sorted(bnlab.kernels.KERNELS))
@pytest.mark.parametrize("shift", SHIFTS)
def test_kernel_matrix_at_large_offsets_matches_numpy_on_centred_inputs(name, shift):
    rng = np.random.default_rng(0)
    X, Xs = rng.uniform(-3, 3, (40, 2)), rng.uniform(-3, 3, (7, 2))
    (X_sh, X_c), (Xs_sh, Xs_c) = _represented(X, shift), _represented(Xs, shift)
    ell = np.array([0.7, 1.9])
    kernel = bnlab.kernels.KERNELS[name](lengthscale=ell, variance=2.0)
    p = kernel.init_params()
    for A, B, Ac, Bc in ((X_sh, X_sh, X_c, X_c), (X_sh, Xs_sh, X_c, Xs_c)):
        K = np.asarray(kernel(p, jnp.asarray(A), jnp.asarray(B)))
        np.testing.assert_allclose(K, _numpy_kernel(name, Ac, Bc, ell, 2.0), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(bnlab.kernels.KERNELS))
@pytest.mark.parametrize("lengthscale", [1e-4, 1e-6, 1e-8])
def test_kernel_matrix_at_tiny_lengthscales_has_exact_diagonal_and_neighbours(name, lengthscale):
    """k(x, x) = σ² and a neighbour at distance ℓ/2 gets k(ℓ/2) whatever ℓ."""
    X = np.array([[0.0], [1.0], [2.5], [2.5 + lengthscale / 2], [-3.0]])
    kernel = bnlab.kernels.KERNELS[name](lengthscale=lengthscale, variance=1.5)
    K = np.asarray(kernel(kernel.init_params(), jnp.asarray(X), jnp.asarray(X)))
    np.testing.assert_allclose(K, _numpy_kernel(name, X, X, lengthscale, 1.5), rtol=1e-7, atol=1e-300)
    np.testing.assert_array_equal(np.diag(K), 1.5)


@pytest.mark.parametrize("shift", SHIFTS)
def test_gaussian_log_z_at_large_offsets_matches_numpy_and_markov(shift):
    ds = bnlab.datasets.load("regression_1d")
    X_sh, X_c = _represented(ds.X, shift)
    lik = bnlab.likelihoods.Gaussian(0.1)
    kernel = bnlab.kernels.Matern52(lengthscale=1.0, variance=1.0)
    exact = _gaussian_log_z(matern52(X_c, X_c, 1.0, 1.0), ds.y, 0.1)
    full = bnlab.infer(bnlab.GP(kernel, lik), X_sh, ds.y, method="vi")
    markov = bnlab.infer(bnlab.MarkovGP(kernel, lik), X_sh, ds.y, method="vi")
    assert full.converged
    assert full.log_marginal == pytest.approx(exact, rel=1e-9)
    assert markov.log_marginal == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("lengthscale", [1e-2, 1e-5, 1e-8])
def test_gaussian_log_z_at_tiny_lengthscales_matches_numpy_and_markov(lengthscale):
    """At ℓ = 1e-8 on regression_1d the prior is white noise: log N(y | 0, (σ_f² + σ²)I)."""
    ds = bnlab.datasets.load("regression_1d")
    lik = bnlab.likelihoods.Gaussian(0.1)
    kernel = bnlab.kernels.Matern52(lengthscale=lengthscale, variance=1.0)
    exact = _gaussian_log_z(matern52(ds.X, ds.X, lengthscale, 1.0), ds.y, 0.1)
    full = bnlab.infer(bnlab.GP(kernel, lik), ds.X, ds.y, method="vi")
    markov = bnlab.infer(bnlab.MarkovGP(kernel, lik), ds.X, ds.y, method="vi")
    assert full.log_marginal == pytest.approx(exact, rel=1e-9)
    assert markov.log_marginal == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("shift", [0.0] + SHIFTS)
def test_probit_ep_at_large_offsets_matches_textbook_ep_and_markov(shift):
    ds = bnlab.datasets.load("classification_1d", n=40)
    X_sh, X_c = _represented(ds.X, shift)
    lik = bnlab.likelihoods.Bernoulli("probit")
    kernel = bnlab.kernels.Matern52(lengthscale=1.0, variance=2.0)
    *_, exact = textbook_ep_probit(matern52(X_c, X_c, 1.0, 2.0), ds.y)
    full = bnlab.infer(bnlab.GP(kernel, lik), X_sh, ds.y, method="ep", max_iters=500, tol=1e-10)
    markov = bnlab.infer(bnlab.MarkovGP(kernel, lik), X_sh, ds.y, method="ep", max_iters=500,
                         tol=1e-10)
    assert full.converged
    assert full.log_marginal == pytest.approx(exact, rel=1e-7)
    assert markov.log_marginal == pytest.approx(exact, rel=1e-7)


@pytest.mark.parametrize("shift", SHIFTS)
def test_sparse_gp_with_inducing_inputs_shifted_with_x(shift):
    """Z shifted with X: the same sparse problem, and predictions at shifted test inputs."""
    ds = bnlab.datasets.load("regression_1d")
    X_sh, X_c = _represented(ds.X, shift)
    Z = np.linspace(-2.5, 2.5, 9)[:, None]
    Z_sh, Z_c = _represented(Z, shift)
    Xs_sh, Xs_c = _represented(np.linspace(-3, 3, 11)[:, None], shift)
    lik = bnlab.likelihoods.Gaussian(0.1)
    kernel = bnlab.kernels.Matern32(lengthscale=0.8, variance=1.0)
    far = bnlab.infer(bnlab.SparseGP(kernel, lik, inducing=Z_sh), X_sh, ds.y, method="vi")
    near = bnlab.infer(bnlab.SparseGP(kernel, lik, inducing=Z_c), X_c, ds.y, method="vi")
    assert far.log_marginal == pytest.approx(near.log_marginal, rel=1e-9)
    (m_far, v_far), (m_near, v_near) = far.predict(Xs_sh), near.predict(Xs_c)
    np.testing.assert_allclose(m_far, m_near, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(v_far, v_near, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("shift", SHIFTS)
def test_kmeans_inducing_inputs_move_with_the_data(shift):
    """k-means on shifted inputs picks the shifted centres (the assignment step's
    |x|² − 2x·c + |c|² is formed on centred inputs)."""
    from bnlab.inducing import kmeans
    X = np.random.default_rng(3).uniform(-3, 3, (200, 1))
    X_sh, X_c = _represented(X, shift)
    far = np.asarray(kmeans(jnp.asarray(X_sh), 12, 0)) - shift
    near = np.asarray(kmeans(jnp.asarray(X_c), 12, 0))
    np.testing.assert_allclose(np.sort(far, 0), np.sort(near, 0), atol=1e-6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_scale=st.floats(-8, 3), log_ratio=st.floats(0, 8), sign=st.sampled_from([-1.0, 1.0]),
       method=st.sampled_from(["vi", "ep"]))
def test_full_gp_log_z_is_invariant_to_shifting_x(log_scale, log_ratio, sign, method):
    """Property: scaling X and ℓ together by c and shifting X by s = ±c·10^r (r ≤ 8) leaves
    the full GP's log Z unchanged to 1e-8 relative (reference: the same represented
    inputs, unshifted)."""
    ds = bnlab.datasets.load("regression_1d" if method == "vi" else "classification_1d", n=30)
    c = 10.0**log_scale
    shift = sign * c * 10.0**log_ratio
    X_sh, X_c = _represented(ds.X * c, shift)
    lik = bnlab.likelihoods.Gaussian(0.1) if method == "vi" else bnlab.likelihoods.Bernoulli("probit")
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.0, variance=1.0), lik)
    params = model.init_params()
    params["kernel"][0]["lengthscale"] = jnp.asarray(c)
    far = bnlab.infer(model, X_sh, ds.y, method=method, params=params, tol=1e-12)
    near = bnlab.infer(model, X_c, ds.y, method=method, params=params, tol=1e-12)
    assert far.log_marginal == pytest.approx(near.log_marginal, rel=1e-8)
