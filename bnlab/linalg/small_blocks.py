"""Small D×D blocks (D = the number of latents per data point, 1 or 2): the per-site
linear algebra of the cubature rules, the site methods, the energies and the Markov
GP, in closed form for D = 1 (and D = 2 where it is cheap), so that a vmapped call
over N sites never becomes N batched 1×1 LAPACK calls."""
from __future__ import annotations

import jax.numpy as jnp

__all__ = ["sym", "chol_small", "inv_small", "solve_small", "logdet_small"]


def sym(A):
    """(A + Aᵀ)/2 over the last two axes."""
    return 0.5 * (A + jnp.swapaxes(A, -1, -2))


def chol_small(cov):
    """Cholesky factor of a small covariance (symmetrised first); D = 1 by square root."""
    if cov.shape[-1] == 1:
        return jnp.sqrt(cov)
    return jnp.linalg.cholesky(sym(cov))


def inv_small(A):
    """Inverse of a small symmetric D×D block (D = 1, 2 closed form)."""
    D = A.shape[-1]
    if D == 1:
        return 1.0 / A
    if D == 2:
        a, b, c, d = A[0, 0], A[0, 1], A[1, 0], A[1, 1]
        return jnp.array([[d, -b], [-c, a]]) / (a * d - b * c)
    return jnp.linalg.inv(A)


def solve_small(A, B):
    """A⁻¹B for a small D×D block A (D = 1 by division)."""
    if A.shape[-1] == 1:
        return B / A[0, 0]
    return jnp.linalg.solve(A, B)


def logdet_small(A):
    """log|det A| of a small D×D block (D = 1 closed form)."""
    if A.shape[-1] == 1:
        return jnp.log(jnp.abs(A[0, 0]))
    return jnp.linalg.slogdet(A)[1]
