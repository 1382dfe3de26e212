"""Posterior preconditioning of the full Cholesky structure.

Whitened by the prior (m = μ + L m̃, C = C̃Lᵀ, App. E) the bound's curvature in m̃ is
I + LᵀΓL, Γ = Σ_n Γ_n h_n h_nᵀ the sites' precisions: for GP regression its
condition number is σ²λ_max(K)/σ_n², and L-BFGS stalls once it passes ≈ 1e3 (at
σ² = 1e20, σ_n² = 0.1 the bound stopped at −1.4e9 after 200 iterations, where
log p(y) = −231). A second, linear change of variables m̃ = T m̂, C̃ = ĈTᵀ with
TTᵀ = (I + LᵀΓ₀L)⁻¹ makes that curvature I when Γ₀ is the sites' precision, which a
likelihood with ``constant_curvature`` (Gaussian: 1/σ_n² under every q) gives at any
marginals: the optimum is then Ĉ = I, m̂ = PᵀΓ₀y. Linear, so the concavity of §3.2 is
kept; only the full structure uses it (its rows are dense, so ĈTᵀ stays upper
triangular; preconditioning the other structures' mean alone left their C̃ scaled
unlike it, and banded, chevron and factor-analysis bounds fell further at σ² = 1e10).

T = (ML)⁻¹ with MᵀM = Σ⁻¹ + Γ₀ (M lower triangular): formed from the posterior
precision, in which Σ⁻¹ is swamped by Γ₀ exactly where the posterior is the
likelihood's, instead of from I + LᵀΓ₀L, whose identity float64 loses beside
entries of size σ²/σ_n².
"""
from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from .bound import site_precisions
from .prior import GaussianPrior

__all__ = ["preconditioner", "to_white"]


def _reverse_cholesky(A):
    """Lower-triangular M with A = MᵀM: Cholesky of the index-reversed A."""
    return jnp.linalg.cholesky(A[::-1, ::-1]).T[::-1, ::-1]


def preconditioner(prior: GaussianPrior, lik, lik_params, y, rule):
    """T (D, D), lower triangular, TTᵀ = (I + LᵀΓ₀L)⁻¹, Γ₀ the site precisions at the
    prior's marginals (clipped at 0). Where float64 cannot form it, T = I, the prior
    whitening alone."""
    variances = jnp.sum(prior.H_white**2, axis=1)
    gamma = site_precisions(lik, lik_params, y, prior.H_mean, variances, rule)
    gamma = jnp.where(jnp.isfinite(gamma), jnp.maximum(gamma, 0.0), 0.0)
    if prior.H is None:
        precision = prior.prec + jnp.diag(gamma)
    else:
        precision = prior.prec + prior.H.T @ (gamma[:, None] * prior.H)
    M = _reverse_cholesky(0.5 * (precision + precision.T))
    D = prior.dim
    T = solve_triangular(M @ prior.chol, jnp.eye(D), lower=True)
    return jnp.where(jnp.all(jnp.isfinite(T)), T, jnp.eye(D))


def to_white(vparams, T):
    """(m̂, Ĉ) → (m̃, C̃) = (T m̂, ĈTᵀ) for the full structure's parameters {"mean",
    "cov": {"top", "diag"}}; Ĉ is masked to its upper triangle first (its lower entries
    are free parameters the structure ignores)."""
    top = jnp.triu(vparams["cov"]["top"])
    return {"mean": T @ vparams["mean"],
            "cov": {"top": top @ T.T, "diag": vparams["cov"]["diag"]}}
