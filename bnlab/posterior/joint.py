"""Joint posterior covariance of two training inputs under a full GP with sites.

With prior covariance K and site precisions Λ̄ the posterior covariance is
C = (K⁻¹ + Λ̄)⁻¹ (Wilkinson et al. 2023, eq. 10; Rasmussen & Williams 2006, eq. 3.41
for diagonal W). The marginals that the engine keeps are only the diagonal blocks of
C; the cross-covariance C_ij needs the whole factorisation. We use the factorisations
of ``bnlab.posterior.full`` that its marginals use, so that the ellipses agree with the
bands to round-off (both valid for any sign of Λ̄):

* one latent, the signed W½ form: M = Σ + GKG = LΣLᵀ (sorted order), C = K − VᵀΣV
  on the two columns, V = L⁻¹GK_{:, (i, j)};
* D > 1, the prior-Cholesky form: with K = L_K L_Kᵀ and B = I + L_Kᵀ Λ̄ L_K = L_B L_Bᵀ,
  C = WᵀW where W = L_B⁻¹ L_Kᵀ, so the {i, j} block is W[:, idx]ᵀ W[:, idx] with idx
  the latent coordinates of inputs i and j.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ..sites import Sites
from .full import FullPrior, _signed_system, _whitened_precision

__all__ = ["joint_covariance"]


def joint_covariance(prior: FullPrior, sites: Sites, i: int, j: int):
    """Posterior covariance of (f(x_i), f(x_j)) as a (2D, 2D) matrix, latents of x_i
    first. Raises ValueError for indices out of range or a non-full prior."""
    if not isinstance(prior, FullPrior):
        raise ValueError(f"joint_covariance needs a full-GP prior, got {type(prior).__name__}")
    N, D = sites.nat1.shape
    for name, k in (("i", i), ("j", j)):
        if not 0 <= int(k) < N:
            raise ValueError(f"index {name}={k} is outside the {N} training inputs")
    if D == 1:
        return _one_latent_pair(prior, sites, jnp.asarray([int(i), int(j)]))
    Lk = prior.chol_K
    LB = jnp.linalg.cholesky(_whitened_precision(prior, sites))
    idx = jnp.concatenate([jnp.arange(D) + int(i) * D, jnp.arange(D) + int(j) * D])
    W = solve_triangular(LB, Lk.T[:, idx], lower=True)
    return W.T @ W


@jax.jit
def _one_latent_pair(prior: FullPrior, sites: Sites, pair):
    """The (2, 2) block for one latent by the signed W½ form (compiled: run op by op,
    its unrolled recursion dispatches hundreds of small operations a call)."""
    system = _signed_system(prior, sites)
    at = system.unsort[pair]                                  # positions in sorted order
    V = solve_triangular(system.L, system.g[:, None] * system.K[:, at], lower=True)
    return system.K[at[:, None], at[None, :]] - V.T @ (system.sign[:, None] * V)
