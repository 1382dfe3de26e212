"""The Gaussian potential N(w | μ, Σ) and the site projections h_n, factored once.

Challis & Barber (2013), eqs. (1)–(5): p(w) ∝ N(w|μ, Σ) Π_n φ_n(wᵀh_n). Everything the
bound needs from (μ, Σ, H) is computed here once, O(D³ + ND²):

* ``chol``: L with Σ = LLᵀ (a relative jitter of 1e-9·mean diag Σ, as in
  ``bnlab.posterior.full``) — the whitening of App. E: m = μ + L m̃ makes the prior
  quadratic ½(m−μ)ᵀΣ⁻¹(m−μ) = ½‖m̃‖².
* ``H_white`` = H L (rows h̃_n = Lᵀh_n), so m_n = μᵀh_n + m̃ᵀh̃_n costs O(ND).
* ``prec`` = Σ⁻¹ (from the Cholesky factor, never a general inverse): the banded,
  diagonal and factor-analysis structures precondition with its blocks.
* ``H`` is ``None`` for the GP case h_n = e_n (N = D), which the structures exploit
  (column norms instead of products with H).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

__all__ = ["GaussianPrior", "make_prior", "JITTER"]

JITTER = 1e-9


class GaussianPrior(NamedTuple):
    mean: jnp.ndarray        # μ (D,)
    chol: jnp.ndarray        # L (D, D), Σ = LLᵀ
    prec: jnp.ndarray        # Σ⁻¹ (D, D)
    H: Any                   # (N, D) projections h_n as rows, or None for h_n = e_n
    H_white: jnp.ndarray     # H L (N, D) (L itself when H is None)
    H_mean: jnp.ndarray      # H μ (N,)
    half_logdet: jnp.ndarray  # ½ log det Σ = Σ log L_ii

    @property
    def dim(self) -> int:
        return self.chol.shape[0]

    @property
    def num_sites(self) -> int:
        return self.H_white.shape[0]

    def site_means(self, mean_white):
        """m_n = hₙᵀm with m = μ + L m̃."""
        return self.H_mean + self.H_white @ mean_white


def make_prior(mean, cov, H=None) -> GaussianPrior:
    """Factor N(μ, Σ) and the projections. ``H`` (N, D) holds h_n as rows; ``None``
    means h_n = e_n (a GP's latent values, N = D)."""
    cov = jnp.asarray(cov)
    D = cov.shape[0]
    mean = jnp.broadcast_to(jnp.asarray(mean, cov.dtype), (D,))
    jitter = JITTER * jnp.mean(jnp.diag(cov))
    L = jnp.linalg.cholesky(0.5 * (cov + cov.T) + jitter * jnp.eye(D))
    prec = cho_solve((L, True), jnp.eye(D))
    prec = 0.5 * (prec + prec.T)
    if H is None:
        H_white, H_mean = L, mean
    else:
        H = jnp.asarray(H)
        H_white, H_mean = H @ L, H @ mean
    return GaussianPrior(mean, L, prec, H, H_white, H_mean, jnp.sum(jnp.log(jnp.diag(L))))
