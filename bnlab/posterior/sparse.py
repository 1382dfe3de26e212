"""Sparse-GP global update: q(u) ∝ p(u) Π_n t_n(W_n u) (Wilkinson et al. 2023, §8.2,
eqs. 62–64, Alg. 2; Bui et al. 2017, App. F.1, eqs. 31–32).

Sites stay per data point in f-space, (ν̄_n, Λ̄_n), exactly as for the full GP; they
act on the *site variable* W_n u with W = K_fu K_uu⁻¹, so the site methods run
unchanged. Everything is computed in the whitened basis v = L⁻¹u (K_uu = LLᵀ, prior
N(0, I)) with A = L⁻¹K_uf, so W_n u = A_nᵀ v and K_uu is never inverted:

    B = I + A Λ̄ Aᵀ = L_B L_Bᵀ      (the posterior precision of v; eq. 62–63)
    m_v = B⁻¹ A ν̄,   S_v = B⁻¹
    mean_n = A_nᵀ m_v,   cov_n = A_nᵀ B⁻¹ A_n             (eq. 64, site variable)
    cond_var_n = K_nn − A_nᵀ A_n = K_nn − Q_nn             (eq. 64, the rest of C_nn)
    log_norm = log ∫ N(v|0, I) Π_n t_n(A_nᵀ v) dv = ½ (Aν̄)ᵀ m_v − ½ log|B|.

B is positive definite exactly when q(u) is, so a failed Cholesky is the PSD
diagnostic (sites of either sign are allowed). Cost O(N M² D²) per update.

With these marginals the engine's energies are the sparse energies (see
``bnlab.engine.energies``): VFE is the SVGP bound (Hensman et al. 2015), the PEP energy is
Bui et al. (2017) eq. 8, and the Laplace energy is the Laplace approximation of
log ∫ p(u) Π p(y_n | W_n u) du with point estimates f_n = W_n m_u (eq. 67's
"point estimates").
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular

from ..sites import Marginals, Sites

__all__ = ["SparsePrior", "JITTER", "prepare", "projection", "marginals", "predict", "posterior_u"]

#: K_uu jitter relative to its mean diagonal (needed when Z = X, Bui et al. 2017 §5 item 9).
JITTER = 1e-8


class SparsePrior(NamedTuple):
    Z: jnp.ndarray         # (M, d) inducing inputs
    chol_Kuu: jnp.ndarray  # (MD, MD) Cholesky factor L of K_uu + jitter
    A: jnp.ndarray         # (MD, N, D) L⁻¹ K_uf, one (MD, D) block per data point
    cond_var: jnp.ndarray  # (N, D, D) K_nn − Q_nn (diagonal clamped at 0)


def _chol_kuu(model, params, Z):
    Kuu = model.prior_covariance(params, Z, Z)
    jitter = JITTER * jnp.mean(jnp.diag(Kuu))
    return jnp.linalg.cholesky(Kuu + jitter * jnp.eye(Kuu.shape[0]))


def _whitened_cross(model, params, L, Z, X):
    """L⁻¹ K(Z, X) as (MD, N, D) blocks."""
    A = solve_triangular(L, model.prior_covariance(params, Z, X), lower=True)
    return A.reshape(A.shape[0], X.shape[0], -1)


def _gram_blocks(A, B):
    """(N, D, D) blocks A_nᵀ B_n for (K, N, D) arrays."""
    return jnp.einsum("kna,knb->nab", A, B)


def prepare(model, params, X) -> SparsePrior:
    if model.posterior != "svgp":
        raise ValueError(
            f"the site methods use q(f|u) = p(f|u) (posterior='svgp'); posterior="
            f"{model.posterior!r} is a Gaussian-regression objective: use "
            "bnlab.sparse.bounds.collapsed_bound or bnlab.sparse.training.fit_minibatch")
    return projection(model, params, X)


def projection(model, params, X) -> SparsePrior:
    """L, A = L⁻¹K_uf and K_nn − Q_nn at inputs X (any q(f|u) structure)."""
    Z = model.inducing_inputs(params, X)
    L = _chol_kuu(model, params, Z)
    A = _whitened_cross(model, params, L, Z, X)
    cond = model.prior_variance(params, X) - _gram_blocks(A, A)
    D = cond.shape[-1]
    diag = jnp.maximum(jnp.diagonal(cond, axis1=-2, axis2=-1), 0.0)
    cond = cond * (1 - jnp.eye(D)) + diag[..., None] * jnp.eye(D)
    return SparsePrior(Z, L, A, cond)


def posterior_u(prior: SparsePrior, sites: Sites):
    """Cholesky factor L_B of B = I + AΛ̄Aᵀ, b = Aν̄ and the whitened mean m_v = B⁻¹b."""
    K, N, D = prior.A.shape
    A = prior.A.reshape(K, N * D)
    if D == 1:
        ALam = prior.A[:, :, 0] * sites.prec[:, 0, 0][None, :]
    else:
        ALam = jnp.einsum("kna,nab->knb", prior.A, sites.prec).reshape(K, N * D)
    B = jnp.eye(K) + ALam @ A.T
    LB = jnp.linalg.cholesky(0.5 * (B + B.T))
    b = A @ sites.nat1.reshape(-1)
    return LB, b, cho_solve((LB, True), b)


def marginals(prior: SparsePrior, sites: Sites) -> Marginals:
    """Marginals of the site variable W_n u under q(u), cond_var = K_nn − Q_nn, and
    log_norm = log ∫ p(u) Π_n t_n(W_n u) du."""
    K, N, D = prior.A.shape
    LB, b, mv = posterior_u(prior, sites)
    mean = jnp.einsum("kna,k->na", prior.A, mv)
    Binv = cho_solve((LB, True), jnp.eye(K))
    Binv_A = (Binv @ prior.A.reshape(K, N * D)).reshape(K, N, D)
    cov = _gram_blocks(prior.A, Binv_A)        # GEMM: faster than a triangular solve
    cov = 0.5 * (cov + jnp.swapaxes(cov, -1, -2))
    half_logdet = jnp.sum(jnp.log(jnp.diag(LB)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * b @ mv - half_logdet
    psd = jnp.all(jnp.isfinite(LB))
    return Marginals(mean, cov, log_norm, psd, prior.cond_var, half_logdet=half_logdet)


def predict(model, params, X, prior: SparsePrior, sites: Sites, marg: Marginals, Xs):
    """Latent predictive mean (Ns, D) and covariance blocks (Ns, D, D) at Xs:
    q(f*) = ∫ p(f* | u) q(u) du (Bui et al. 2017 eq. 1 / App. F.1)."""
    As = _whitened_cross(model, params, prior.chol_Kuu, prior.Z, Xs)
    K, Ns, D = As.shape
    LB, _, mv = posterior_u(prior, sites)
    mean = jnp.einsum("kna,k->na", As, mv)
    Vs = solve_triangular(LB, As.reshape(K, Ns * D), lower=True).reshape(K, Ns, D)
    cov = model.prior_variance(params, Xs) - _gram_blocks(As, As) + _gram_blocks(Vs, Vs)
    return mean, cov
