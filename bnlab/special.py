"""log Φ(x), the probit link's log-likelihood, cheaper and more accurate than
``jax.scipy.special.log_ndtr``.

Every probit cubature pass evaluates log Φ at N × (order) nodes, so at a few hundred
sites that pass weighs as much as the N × N Cholesky of the global update. JAX's
``log_ndtr`` evaluates Φ through both ``erf`` and ``erfc`` and an asymptotic series in
every lane (relative error up to 2e-11 near x = −20, its first derivative 4e-9).
Here one ``erfc`` serves
both signs, and one ``log`` serves all three branches (every lane of a vectorised
``where`` evaluates every branch, and a log costs twice an erfc on XLA:CPU):

- x ≥ 0:        log Φ(x) = log(1 − p),  p = Φ(−x) = ½ erfc(x/√2), by its Maclaurin
  series below p = 0.01 (log(1 − p) would round to 0 for tiny p);
- −30 ≤ x < 0:  log Φ(x) = log p  (erfc is relatively accurate in its tail;
  erfc(30/√2) ≈ 1e−197 is far from underflow);
- x < −30:      the asymptotic series (Abramowitz & Stegun 26.2.12)
  log Φ(x) = −x²/2 − ½ log 2π − log(−x / (1 − u + 3u² − 15u³ + 105u⁴ − 945u⁵)),
  u = 1/x², whose first omitted term is 10395 u⁶ < 2e−14 there.

The derivative is the inverse Mills ratio φ(x)/Φ(x) = exp(−x²/2 − log Φ(x) − ½ log 2π)
(from the series in the tail), a custom JVP that reuses the value, so a value, gradient
and Hessian pass costs about one value pass (the second derivative is d/dx of that
rule). tests/test_special.py checks the value against SciPy's ``log_ndtr`` (≤ 1e−13
relative) and both derivatives against SciPy and, in the tail, Laplace's continued
fraction for the Mills ratio.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["log_ndtr", "inverse_mills_ratio", "ndtr_pair"]

_TAIL = -30.0
_HALF_LOG_2PI = 0.9189385332046727
_SERIES_BELOW = 0.01


@jax.custom_jvp
def log_ndtr(x):
    """log Φ(x) elementwise (float64 accurate to ≈ 1e-14 relative)."""
    tail, x_body, x_tail = _split_at_tail(x)
    upper = x_body >= 0
    p = _phi_minus_abs(x_body)
    # one log for all three branches: log Φ(x) = log(1 − p), log p, or
    # −x²/2 − ½ log 2π − log(−x / (1 + series))
    log_arg = jnp.log(jnp.where(tail, _tail_mills(x_tail), jnp.where(upper, 1.0 - p, p)))
    return jnp.where(tail, -0.5 * x_tail * x_tail - _HALF_LOG_2PI - log_arg,
                     jnp.where(upper & (p < _SERIES_BELOW), _log1m_series(p), log_arg))


def _split_at_tail(x):
    """(x < −30, x clamped to the body, x clamped to the tail): each branch gets an
    input it is valid on, so no branch makes a NaN gradient."""
    x = jnp.asarray(x)
    tail = x < _TAIL
    return tail, jnp.where(tail, _TAIL, x), jnp.where(tail, x, _TAIL)


def _phi_minus_abs(x):
    """Φ(−|x|) = ½ erfc(|x|/√2), relatively accurate however small."""
    return 0.5 * jax.lax.erfc(jnp.abs(x) * 0.7071067811865476)


def _log1m_series(p):
    """log(1 − p) for 0 ≤ p < 0.01, eight Maclaurin terms (the first omitted one is
    p⁹/9, < 1.2e−17 p). Above 0.01, log(1 − p) itself is accurate to ≈ ε/p ≤ 1.1e−14
    relative, the rounding of 1 − p being the only error."""
    return -p * (1 + p * (1 / 2 + p * (1 / 3 + p * (1 / 4 + p * (1 / 5 + p * (1 / 6 + p * (
        1 / 7 + p / 8)))))))


def _tail_series(x):
    """Φ(x) (−x) / φ(x) − 1 for x ≤ −30 (A&S 26.2.12, five terms)."""
    u = 1.0 / (x * x)
    return u * (-1.0 + u * (3.0 + u * (-15.0 + u * (105.0 + u * -945.0))))


def _tail_mills(x):
    """φ(x)/Φ(x) = −x / (1 + series) for x ≤ −30."""
    return -x / (1.0 + _tail_series(x))


@log_ndtr.defjvp
def _log_ndtr_jvp(primals, tangents):
    """d log Φ / dx = φ/Φ: from the value in the body, and as −x / (1 + series) in the
    tail, where exp(−x²/2 − log Φ) would subtract two numbers of size x²/2."""
    (x,), (dx,) = primals, tangents
    value = log_ndtr(x)
    tail, x_body, x_tail = _split_at_tail(x)
    mills = jnp.where(tail, _tail_mills(x_tail),
                      jnp.exp(-0.5 * x_body * x_body - jnp.where(tail, 0.0, value) - _HALF_LOG_2PI))
    return value, dx * mills


@jax.custom_jvp
def inverse_mills_ratio(x):
    """φ(x)/Φ(x) = d log Φ / dx without log Φ: exp(−x²/2 − ½ log 2π)/Φ(x), Φ from the
    body's one ``erfc`` (for x ≥ −30 neither the exp, ≥ 1e−196, nor Φ, ≥ 1e−198,
    underflows), and −x / (1 + series) in the tail. For a pass that needs the
    derivative alone (the quasi-Newton secant's gradient at the previous mean): there
    log Φ's jvp rule above, which reuses the value, also pays the value's log."""
    tail, x_body, x_tail = _split_at_tail(x)
    return jnp.where(tail, _tail_mills(x_tail),
                     jnp.exp(-0.5 * x_body * x_body - _HALF_LOG_2PI) / ndtr_pair(x_body)[0])


@inverse_mills_ratio.defjvp
def _inverse_mills_ratio_jvp(primals, tangents):
    """d(φ/Φ)/dx = −m(x + m), with no Φ², which underflows below x ≈ −26.5."""
    (x,), (dx,) = primals, tangents
    m = inverse_mills_ratio(x)
    return m, dx * (-m * (x + m))


def ndtr_pair(x):
    """(Φ(x), Φ(−x)) from one ``erfc``: the smaller of the two is ½ erfc(|x|/√2),
    relatively accurate in its tail, the other one minus it (≥ ½, so no cancellation).
    ``jax.scipy.special.ndtr`` evaluates both ``erf`` and ``erfc`` per call, so the
    pair cost four."""
    x = jnp.asarray(x)
    small = _phi_minus_abs(x)
    large = 1.0 - small
    upper = x >= 0
    return jnp.where(upper, large, small), jnp.where(upper, small, large)
