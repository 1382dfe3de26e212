"""bnlab.special.log_ndtr against SciPy's log_ndtr (an independent implementation)."""
import jax
import numpy as np
from scipy.special import log_ndtr as scipy_log_ndtr
from scipy.stats import norm

import bnlab  # noqa: F401  (float64)
from bnlab.special import log_ndtr, ndtr_pair

# both sides of every branch boundary (0, −30) and far into the tail
X = np.concatenate([np.linspace(-1000.0, -31.0, 400), np.linspace(-31.0, 40.0, 20001),
                    [-30.0, -30.0 - 1e-12, -30.0 + 1e-12, 0.0, -1e-300, 1e-300]])


def test_value_matches_scipy_to_1e_13_relative():
    ours = np.asarray(jax.jit(log_ndtr)(X))
    ref = scipy_log_ndtr(X)
    np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=1e-300)


def inverse_mills_ratio(x):
    """(g, x + g) with g = φ(x)/Φ(x): from SciPy for x ≥ −20, else from Laplace's
    continued fraction Φ(x)/φ(x) = 1/(t + r), r = 1/(t + 2/(t + 3/(t + …))), t = −x
    (200 terms), so that x + g = r needs no subtraction."""
    x = np.asarray(x, float)
    t = -np.minimum(x, -20.0)
    r = np.zeros_like(t)
    for k in range(200, 0, -1):
        r = k / (t + r)
    g = np.where(x >= -20, np.exp(norm.logpdf(x) - scipy_log_ndtr(x)), t + r)
    return g, np.where(x >= -20, x + g, r)


def test_first_derivative_is_the_inverse_mills_ratio():
    grad = np.asarray(jax.jit(jax.vmap(jax.grad(log_ndtr)))(X))
    np.testing.assert_allclose(grad, inverse_mills_ratio(X)[0], rtol=1e-12, atol=1e-300)


def test_second_derivative_matches_closed_form():
    """d²/dx² log Φ = −g(x + g), g = φ/Φ; below −20, x + g is the continued fraction's
    tail (no cancellation); above, x + g is exact enough for 1e-9."""
    hess = np.asarray(jax.jit(jax.vmap(jax.grad(jax.grad(log_ndtr))))(X))
    g, x_plus_g = inverse_mills_ratio(X)
    np.testing.assert_allclose(hess, -g * x_plus_g, rtol=1e-9, atol=1e-300)


def test_gradients_finite_everywhere():
    for f in (jax.grad(log_ndtr), jax.grad(jax.grad(log_ndtr))):
        assert np.all(np.isfinite(np.asarray(jax.jit(jax.vmap(f))(X))))


def test_ndtr_pair_matches_scipy_in_both_tails():
    x = np.linspace(-38.0, 38.0, 20001)
    p, q = (np.asarray(v) for v in jax.jit(ndtr_pair)(x))
    np.testing.assert_allclose(p, norm.cdf(x), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(q, norm.sf(x), rtol=1e-13, atol=1e-300)
    dp = np.asarray(jax.jit(jax.vmap(jax.grad(lambda v: ndtr_pair(v)[0])))(x))
    np.testing.assert_allclose(dp, norm.pdf(x), rtol=1e-12, atol=1e-300)


def test_log_free_inverse_mills_ratio_and_its_derivative():
    """``special.inverse_mills_ratio`` (φ/Φ from one erfc, for gradient-only passes)
    against the reference above, and its derivative −m(x + m) against −g(x + g) with
    the reference's x + g (the continued fraction below −20)."""
    from bnlab import special
    g, x_plus_g = inverse_mills_ratio(X)
    np.testing.assert_allclose(np.asarray(special.inverse_mills_ratio(X)), g, rtol=1e-12,
                               atol=1e-300)
    derivative = np.asarray(jax.vmap(jax.grad(special.inverse_mills_ratio))(X))
    np.testing.assert_allclose(derivative, -g * x_plus_g, rtol=1e-9, atol=1e-300)
