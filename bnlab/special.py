"""log Φ(x), the probit link's log-likelihood, cheaper and more accurate than
``jax.scipy.special.log_ndtr``.

Every probit cubature pass evaluates log Φ at N × (order) nodes, and at n = 200 with
20 nodes that pass costs about as much as the n × n Cholesky of the global update
(benchmarks/README.md). JAX's ``log_ndtr`` evaluates Φ through both ``erf`` and
``erfc`` and an asymptotic series in every lane (≈ 45 ns per value on XLA:CPU, relative
error up to 2e-11 near x = −20, its first derivative 4e-9). Here one ``erfc`` serves
both signs:

- x ≥ 0:        log Φ(x) = log1p(−Φ(−x)),  Φ(−x) = ½ erfc(x/√2);
- −30 ≤ x < 0:  log Φ(x) = log(½ erfc(−x/√2))  (erfc is relatively accurate in its
  tail; erfc(30/√2) ≈ 1e−197 is far from underflow);
- x < −30:      the asymptotic series (Abramowitz & Stegun 26.2.12)
  log Φ(x) = −x²/2 − log(−x) − ½ log 2π + log(1 − u + 3u² − 15u³ + 105u⁴ − 945u⁵),
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

__all__ = ["log_ndtr"]

_TAIL = -30.0
_HALF_LOG_2PI = 0.9189385332046727


@jax.custom_jvp
def log_ndtr(x):
    """log Φ(x) elementwise (float64 accurate to ≈ 1e-14 relative)."""
    x = jnp.asarray(x)
    tail = x < _TAIL
    # each branch gets an input it is valid on, so no branch makes a NaN gradient
    x_body = jnp.where(tail, _TAIL, x)
    upper = x_body >= 0
    phi_minus_abs = 0.5 * jax.lax.erfc(jnp.abs(x_body) * 0.7071067811865476)   # Φ(−|x|)
    body = jnp.where(upper, jnp.log1p(-phi_minus_abs),
                     jnp.log(jnp.where(upper, 0.5, phi_minus_abs)))
    x_tail = jnp.where(tail, x, _TAIL)
    asymptotic = (-0.5 * x_tail * x_tail - jnp.log(-x_tail) - _HALF_LOG_2PI
                  + jnp.log1p(_tail_series(x_tail)))
    return jnp.where(tail, asymptotic, body)


def _tail_series(x):
    """Φ(x) (−x) / φ(x) − 1 for x ≤ −30 (A&S 26.2.12, five terms)."""
    u = 1.0 / (x * x)
    return u * (-1.0 + u * (3.0 + u * (-15.0 + u * (105.0 + u * -945.0))))


@log_ndtr.defjvp
def _log_ndtr_jvp(primals, tangents):
    """d log Φ / dx = φ/Φ: from the value in the body, and as −x / (1 + series) in the
    tail, where exp(−x²/2 − log Φ) would subtract two numbers of size x²/2."""
    (x,), (dx,) = primals, tangents
    value = log_ndtr(x)
    tail = x < _TAIL
    x_body, x_tail = jnp.where(tail, _TAIL, x), jnp.where(tail, x, _TAIL)
    mills = jnp.where(tail, -x_tail / (1.0 + _tail_series(x_tail)),
                      jnp.exp(-0.5 * x_body * x_body - jnp.where(tail, 0.0, value) - _HALF_LOG_2PI))
    return value, dx * mills
