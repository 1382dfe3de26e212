"""Anderson acceleration of the site iteration, each mixed step checked by a safeguard.

The damped site update is a fixed-point map x ↦ G(x) on the sites' natural parameters
(Wilkinson et al. 2023, eq. 9). For CVI at a large prior variance its Jacobian has
eigenvalues both below −1 (which forces ρ down, the step control's halving) and close
to +1 (a slow mode), so no single damping converges fast (the benchmark surface's
probit problem at n = 281, ℓ = e^0.5, σ² = e^7.6 is one such point). Anderson mixing
(Anderson 1965; Walker & Ni 2011, "type II") replaces G(x_k) by

    x_{k+1} = G(x_k) − (ΔX + ΔF) γ,   γ = argmin_γ ‖f_k − ΔF γ‖,

with f_i = G(x_i) − x_i and ΔX, ΔF the differences of the last depth + 1 accepted
iterates and residuals: a secant model of the map fitted on the history. A fixed point
of G is a fixed point of the mixed iteration, so the result is the same; only the path
differs. The engine accepts a mixed step only when it keeps the posterior positive
definite (and, for EP-family energies, every cavity) and passes the method's safeguard
(``Method.mixing``): for CVI, it does not lower the ELBO (the step control's
test); for EP, Power EP and Laplace, which ascend nothing the engine evaluates, the
plain step from the mixed iterate changes the sites less (``relative_norm``) than the
plain step from the current one — a plain monotone form of the residual safeguard of
Zhang, O'Donoghue & Boyd (2020). A rejected mixed step clears the history, and the
next step is a plain one. The iteration counts with and without it are in
benchmarks/README.md.

γ is a constant to differentiation (``stop_gradient``): learning's unrolled gradient
runs the plain iteration, and the eigendecomposition's derivative is undefined at the
empty history.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["History", "empty", "extrapolate", "push", "clear", "relative_norm"]

#: Directions of ΔF with singular values below this fraction of the largest are dropped.
RCOND = 1e-7


class History(NamedTuple):
    xs: jnp.ndarray     # (depth, P) the last accepted iterates, oldest first
    fs: jnp.ndarray     # (depth, P) their residuals G(x) − x
    count: jnp.ndarray  # () how many rows are valid (the newest ``count``)


def empty(size: int, depth: int) -> History:
    zeros = jnp.zeros((depth, size))
    return History(zeros, zeros, jnp.asarray(0))


def extrapolate(history: History, x, f):
    """The mixed iterate x + f − (ΔX + ΔF)γ; with an empty history, x + f = G(x)."""
    depth = history.xs.shape[0]
    xs = jnp.concatenate([history.xs, x[None]])
    fs = jnp.concatenate([history.fs, f[None]])
    valid = jnp.arange(depth) >= depth - history.count       # newest ``count`` columns
    dX = jnp.where(valid[:, None], xs[1:] - xs[:-1], 0.0).T   # (P, depth)
    dF = jnp.where(valid[:, None], fs[1:] - fs[:-1], 0.0).T
    gamma = jax.lax.stop_gradient(_least_squares(dF, f))
    return x + f - (dX + dF) @ gamma


def _least_squares(A, b):
    """min ‖Aγ − b‖ by the normal equations: A is P × depth, so its Gram matrix is at most
    10 × 10 and an eigendecomposition of it costs nothing next to the step (an SVD of
    the tall A would not). Eigenvalues below RCOND²·λ_max are dropped (all of them
    when A = 0, which gives γ = 0 rather than 0/0)."""
    w, V = jnp.linalg.eigh(A.T @ A)
    keep = (w > RCOND**2 * w[-1]) & (w > 0)
    inv = jnp.where(keep, 1.0 / jnp.where(keep, w, 1.0), 0.0)
    return V @ (inv * (V.T @ (A.T @ b)))


def relative_norm(residual, x):
    """‖r / (1 + |x|)‖₂: the residual measured like the convergence test's relative
    change, in 2-norm (the max over sites jumps between sites from step to step)."""
    return jnp.linalg.norm(residual / (1 + jnp.abs(x)))


def push(history: History, x, f) -> History:
    """Append an accepted iterate and its residual, dropping the oldest."""
    return History(jnp.concatenate([history.xs[1:], x[None]]),
                   jnp.concatenate([history.fs[1:], f[None]]),
                   jnp.minimum(history.count + 1, history.xs.shape[0]))


def clear(history: History) -> History:
    return history._replace(count=jnp.zeros_like(history.count))
