"""The Jaakkola–Jordan (1997) local variational bound for logistic sites, with its EM
optimisation — the baseline the G-KL bound dominates (Challis & Barber 2013, §5.1).

Sites φ_n(w) = σ(y_n wᵀh_n), y_n ∈ {−1, +1}. With λ(ξ) = tanh(ξ/2)/(4ξ),
    log σ(x) ≥ log σ(ξ) + (x − ξ)/2 − λ(ξ)(x² − ξ²),
so Π_n φ_n ≥ c(ξ) exp(−½wᵀFw + wᵀf) with F = Σ_n 2λ(ξ_n)h_nh_nᵀ, f = ½Σ_n y_n h_n,
log c = Σ_n [log σ(ξ_n) − ξ_n/2 + λ(ξ_n)ξ_n²] (eq. 12), and integrating against
N(w|μ, Σ) (eqs. 13–14)
    B(ξ) = log c − ½μᵀΣ⁻¹μ + ½bᵀA⁻¹b − ½log det Σ − ½log det A,  A = Σ⁻¹ + F, b = Σ⁻¹μ + f.
The paper prints −½log det(2πΣ) − ½log det(2πA): the 2π factors cancel in the exact
integral (the printed form is low by D log 2π, notes A7) — we use the exact one.
EM: ξ_n² = h_nᵀ(S + mmᵀ)h_n with S = A⁻¹, m = A⁻¹b; each step cannot decrease B(ξ).
Computed in whitened form: A = L⁻ᵀ(I + H̃ᵀΛH̃)L⁻¹ with H̃ = HL, Λ = diag 2λ(ξ).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

from .prior import make_prior

__all__ = ["LocalBound", "jaakkola_jordan", "jj_lambda"]


class LocalBound(NamedTuple):
    bound: float
    mean: np.ndarray          # m_ξ = A⁻¹b
    cov: np.ndarray           # S_ξ = A⁻¹
    xi: np.ndarray
    n_iters: int
    converged: bool


def jj_lambda(xi):
    """λ(ξ) = tanh(ξ/2)/(4ξ), with its limit 1/8 at ξ = 0."""
    xi = jnp.abs(xi)
    safe = jnp.where(xi < 1e-6, 1.0, xi)
    return jnp.where(xi < 1e-6, 0.125 - xi**2 / 96, jnp.tanh(0.5 * safe) / (4 * safe))


def _posterior(prior, y, xi):
    Hw = prior.H_white
    lam2 = 2 * jj_lambda(xi)
    B = jnp.eye(prior.dim) + (Hw.T * lam2) @ Hw
    R = jnp.linalg.cholesky(B)
    H = jnp.eye(prior.dim) if prior.H is None else prior.H
    f = 0.5 * H.T @ y
    white_mu = jax.scipy.linalg.solve_triangular(prior.chol, prior.mean, lower=True)
    Lt_b = white_mu + prior.chol.T @ f                   # Lᵀ b
    v = cho_solve((R, True), Lt_b)                        # B⁻¹ Lᵀ b
    log_c = jnp.sum(jax.nn.log_sigmoid(xi) - 0.5 * xi + jj_lambda(xi) * xi**2)
    bound = (log_c - 0.5 * white_mu @ white_mu + 0.5 * Lt_b @ v
             - jnp.sum(jnp.log(jnp.diag(R))))
    mean = prior.chol @ v
    Binv_Hw = cho_solve((R, True), Hw.T)                  # B⁻¹ h̃_n as columns
    site_var = jnp.sum(Hw.T * Binv_Hw, 0)                 # h_nᵀ S h_n
    site_mean = H @ mean
    return bound, mean, R, site_var, site_mean


@jax.jit
def _em(prior, y, xi0, tol, max_iters):
    def cond(c):
        i, _, _, done = c
        return (i < max_iters) & ~done

    def body(c):
        i, xi, old, _ = c
        bound, _, _, site_var, site_mean = _posterior(prior, y, xi)
        new_xi = jnp.sqrt(site_var + site_mean**2)
        return i + 1, new_xi, bound, jnp.abs(bound - old) <= tol * (1 + jnp.abs(bound))

    return jax.lax.while_loop(cond, body, (0, xi0, jnp.asarray(-jnp.inf), False))


def jaakkola_jordan(prior_mean, prior_cov, H, y, *, max_iters=2000, tol=1e-12,
                    xi0=None) -> LocalBound:
    """Optimise the JJ bound for p(w) ∝ N(w|μ, Σ) Π_n σ(y_n wᵀh_n) by EM over ξ.
    ``H`` (N, D) has h_n as rows (``None``: h_n = e_n, a GP with logit likelihood)."""
    y = np.asarray(y, dtype=float)
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError("jaakkola_jordan: labels y must be in {-1, +1}")
    prior = make_prior(jnp.asarray(prior_mean, float), jnp.asarray(prior_cov, float),
                       None if H is None else jnp.asarray(H, float))
    if y.shape[0] != prior.num_sites:
        raise ValueError(f"jaakkola_jordan: y has {y.shape[0]} entries for "
                         f"{prior.num_sites} sites")
    xi = jnp.ones(prior.num_sites) if xi0 is None else jnp.asarray(xi0, float)
    n, xi, _, done = _em(prior, jnp.asarray(y), xi, tol, max_iters)
    bound, mean, R, _, _ = _posterior(prior, jnp.asarray(y), xi)
    Rinv_Lt = jax.scipy.linalg.solve_triangular(R, prior.chol.T, lower=True)
    return LocalBound(float(bound), np.asarray(mean), np.asarray(Rinv_Lt.T @ Rinv_Lt),
                      np.asarray(xi), int(n), bool(done))
