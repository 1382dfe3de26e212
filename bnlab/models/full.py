"""Full-GP global update (Wilkinson et al. 2023, eq. 10 / Alg. 1) in a stable form.

Given the prior covariance K (ND×ND) and the sites (ν̄, Λ̄) the posterior is
N(m, C) with C = (K⁻¹ + Λ̄)⁻¹ and m = C ν̄. K is never inverted. Two factorisations:

* **W½ form** (one latent, every site precision λ_n ≥ 0 — always the case for
  Laplace/VI/EP/PL on log-concave likelihoods): with s = √λ,
  B = I + s sᵀ ∘ K = LLᵀ (Rasmussen & Williams, Alg. 3.2/3.5),
  m = K(ν̄ − s ∘ B⁻¹(s ∘ Kν̄)), log|I + KΛ̄| = 2 Σ log L_ii, and
  diag C = (1 − diag B⁻¹)/λ where that is accurate, else diag(K − VᵀV), V = L⁻¹ diag(s) K
  (for the sites where it is not).
* **Prior-Cholesky form** (any sign of Λ̄, block-diagonal D×D sites): with
  K = L_K L_Kᵀ, B = I + L_Kᵀ Λ̄ L_K = UUᵀ (U upper-triangular), C = WWᵀ with
  W = L_K U⁻ᵀ lower-triangular. B is positive definite exactly when the posterior is,
  so a failed Cholesky *is* the PSD diagnostic (Sylvester: |B| = |I + KΛ̄|).

Both give log_norm = log ∫ N(f|0, K) Π_n exp(ν̄_nᵀf_n − ½f_nᵀΛ̄_nf_n) df
                  = ½ ν̄ᵀm − ½ log|I + KΛ̄|,
which every energy builds on.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular

from ..sites import Marginals, Sites
from .dense_linalg import column_sums, lower_gram, lower_solve_lower, lower_triangular_inverse

__all__ = ["FullPrior", "prepare", "marginals", "marginals_nonnegative", "marginals_mean_only",
           "marginals_mean_only_nonnegative", "predict"]

JITTER = 1e-9


class FullPrior(NamedTuple):
    K: jnp.ndarray        # (ND, ND) prior covariance of the stacked latents
    chol_K: jnp.ndarray   # (ND, ND) Cholesky factor of K + jitter·mean(diag K)·I
    num_latents: int = 1


def prepare(model, params, X) -> FullPrior:
    K = model.prior_covariance(params, X, X)
    jitter = JITTER * jnp.mean(jnp.diag(K))
    chol_K = jnp.linalg.cholesky(K + jitter * jnp.eye(K.shape[0]))
    return FullPrior(K, chol_K, model.num_latents)


def _block_diag_times(prec, M):
    """Λ̄ M for block-diagonal Λ̄ given as (N, D, D) blocks and M of shape (ND, k)."""
    N, D, _ = prec.shape
    return jnp.einsum("nab,nbk->nak", prec, M.reshape(N, D, -1)).reshape(N * D, -1)


#: Inaccurate short-form variances corrected column by column, at most this many; more
#: and every variance takes the product form (see ``_variances_sqrt``).
PATCHED_COLUMNS = 16


def _variances_sqrt(K, lam, s, L_inv):
    """diag C for C = K − K S B⁻¹ S K, B = I + SKS = LLᵀ, S = diag(s), s = √λ.

    Since C = S⁻¹(I − B⁻¹)S⁻¹ when every λ_n > 0, C_nn = (1 − [B⁻¹]_nn)/λ_n needs only
    L⁻¹ (N³/3 flops, see ``dense_linalg``) instead of the N³ flops of V = L⁻¹SK in
    C_nn = K_nn − ‖V_:n‖² (R&W Alg. 3.2). The short form cancels when λ_n C_nn is tiny:
    [B⁻¹]_nn carries an absolute error of about ε‖B‖ ≤ ε(1 + Σ λ_n K_nn), so it is
    trusted only where ε(1 + Σ λ_n K_nn)/(λ_n C_nn) ≤ 1e-7 (observed errors on the
    surface grid of benchmarks/surface.py were 100–1000× below this estimate, ≤ 7e-10
    relative). Elsewhere — zero sites at initialisation, or the few sites with tiny λ_n
    at a large prior variance — C_nn = K_nn − ‖V_:n‖², for those columns only when they
    are at most ``PATCHED_COLUMNS`` (2N² flops each), else for all. V comes from the
    L⁻¹ at hand as one product, which XLA:CPU runs twice as fast as the triangular
    solve L⁻¹(SK) (0.65 against 1.31 ms at N = 281). On the benchmark's surface CVI
    mostly needs 1–7 such columns per step where σ² ≥ e^7 (measured at four points:
    ≥ 17 in ≤ 7 % of the steps). Under ``vmap`` the ``lax.switch`` evaluates every
    branch."""
    B_inv_diag = jnp.einsum("ij,ij->j", L_inv, L_inv)     # column sums of squares
    short = (1.0 - B_inv_diag) / lam
    norm_B = 1.0 + jnp.sum(lam * jnp.diag(K))
    estimate = jnp.finfo(K.dtype).eps * norm_B / (lam * short)
    inaccurate = ~((lam > 0) & (short > 0) & (estimate <= 1e-7))
    count = jnp.sum(inaccurate)

    def squared_norms(K_columns):        # ‖L⁻¹ S K_:n‖² for the given columns
        V = L_inv @ (s[:, None] * K_columns)
        return column_sums(V * V)          # not jnp.sum: 4× faster at N = 1000

    def patched():
        idx = jnp.nonzero(inaccurate, size=PATCHED_COLUMNS, fill_value=0)[0]
        fixed = K[idx, idx] - squared_norms(K[:, idx])
        return short.at[idx].set(jnp.where(inaccurate[idx], fixed, short[idx]))

    def every_column():
        return jnp.diag(K) - squared_norms(K)

    path = jnp.where(count == 0, 0, jnp.where(count <= PATCHED_COLUMNS, 1, 2))
    return jax.lax.switch(path, [lambda: short, patched, every_column])


def _marginals_sqrt(prior: FullPrior, sites: Sites) -> Marginals:
    """The W½ form with variances. L⁻¹, needed for diag B⁻¹ anyway, also gives
    B⁻¹v = L⁻ᵀ(L⁻¹v) for the mean as two matrix–vector products, which XLA:CPU runs
    ≈ 3× faster than the two triangular solves of ``cho_solve`` (0.14 against 0.46
    Choleskys at N = 200, benchmarks/README.md)."""
    K = prior.K
    lam = sites.prec[:, 0, 0]
    nu = sites.nat1[:, 0]
    s = jnp.sqrt(jnp.maximum(lam, 0.0))
    # only round-off negatives may be clipped; anything larger cannot be certified here
    certified = jnp.min(lam) >= -1e-10 * (1.0 + jnp.max(jnp.abs(lam)))
    L = jnp.linalg.cholesky(jnp.eye(K.shape[0]) + s[:, None] * K * s[None, :])
    L_inv = lower_triangular_inverse(L)
    Knu = K @ nu
    mean = Knu - K @ (s * ((L_inv @ (s * Knu)) @ L_inv))
    var = _variances_sqrt(K, lam, s, L_inv)
    log_norm = 0.5 * nu @ mean - jnp.sum(jnp.log(jnp.diag(L)))
    psd = jnp.all(jnp.isfinite(L)) & jnp.all(var > 0) & certified
    return Marginals(mean[:, None], var[:, None, None], log_norm, psd,
                     jnp.zeros((K.shape[0], 1, 1)))


def _whitened_precision(prior: FullPrior, sites: Sites):
    """B = I + L_Kᵀ Λ̄ L_K, the posterior precision in the prior's whitened coordinates,
    by the triangular-aware product (N³/2 flops, ``dense_linalg.lower_gram``). Its
    off-diagonal blocks are symmetric by construction; ``jnp.linalg.cholesky``
    symmetrises its input, which takes care of the round-off in the diagonal leaves."""
    N, D = sites.nat1.shape
    Lk = prior.chol_K
    return jnp.eye(N * D) + lower_gram(Lk, _block_diag_times(sites.prec, Lk), D)


def _marginals_chol(prior: FullPrior, sites: Sites) -> Marginals:
    """The prior-Cholesky form with the *reversed* factorisation B = UUᵀ, U upper
    triangular (U = JLJ for JBJ = LLᵀ, J the reversal): then C = L_K B⁻¹ L_Kᵀ = WWᵀ with
    W = L_K U⁻ᵀ lower-triangular, and JWᵀJ = L⁻¹(J L_Kᵀ J) is a triangular solve whose
    right-hand side is lower-triangular too (``dense_linalg.lower_solve_lower``, N³/3
    flops, mostly in products). That solve replaces the N³-flop solve L_B⁻¹L_Kᵀ of the
    forward form and, before the tenth session here, a triangular inverse followed by a
    triangular product (N³/3 + 2N³/3 flops; pl2's step at N = 1000 went from 4.0–4.2 to
    3.4–3.6 Choleskys, benchmarks/README.md)."""
    N, D = sites.nat1.shape
    B = _whitened_precision(prior, sites)
    L_rev = jnp.linalg.cholesky(B[::-1, ::-1])
    W = lower_solve_lower(L_rev, prior.chol_K.T[::-1, ::-1]).T[::-1, ::-1]   # C = WWᵀ
    nu = sites.nat1.reshape(-1)
    mean = W @ (nu @ W)
    Wb = W.reshape(N, D, N * D)
    cov = jnp.einsum("nak,nbk->nab", Wb, Wb)
    log_norm = 0.5 * nu @ mean - jnp.sum(jnp.log(jnp.diag(L_rev)))
    psd = jnp.all(jnp.isfinite(L_rev))
    return Marginals(mean.reshape(N, D), cov, log_norm, psd, jnp.zeros((N, D, D)))


def _mean_only_sqrt(prior: FullPrior, sites: Sites) -> Marginals:
    """``_marginals_sqrt`` without the variances: one Cholesky and O(N²) work instead
    of the N×N triangular solve of V (cov is NaN)."""
    K = prior.K
    lam, nu = sites.prec[:, 0, 0], sites.nat1[:, 0]
    s = jnp.sqrt(jnp.maximum(lam, 0.0))
    certified = jnp.min(lam) >= -1e-10 * (1.0 + jnp.max(jnp.abs(lam)))
    L = jnp.linalg.cholesky(jnp.eye(K.shape[0]) + s[:, None] * K * s[None, :])
    Knu = K @ nu
    mean = Knu - K @ (s * cho_solve((L, True), s * Knu))
    log_norm = 0.5 * nu @ mean - jnp.sum(jnp.log(jnp.diag(L)))
    psd = jnp.all(jnp.isfinite(L)) & certified
    N = K.shape[0]
    return Marginals(mean[:, None], jnp.full((N, 1, 1), jnp.nan), log_norm, psd,
                     jnp.zeros((N, 1, 1)))


def _mean_only_chol(prior: FullPrior, sites: Sites) -> Marginals:
    """``_marginals_chol`` without the covariance blocks: m = L_K L_B⁻ᵀ L_B⁻¹ L_Kᵀ ν̄."""
    N, D = sites.nat1.shape
    Lk = prior.chol_K
    LB = jnp.linalg.cholesky(_whitened_precision(prior, sites))
    nu = sites.nat1.reshape(-1)
    w = solve_triangular(LB, Lk.T @ nu, lower=True)
    mean = Lk @ solve_triangular(LB, w, lower=True, trans="T")
    log_norm = 0.5 * nu @ mean - jnp.sum(jnp.log(jnp.diag(LB)))
    psd = jnp.all(jnp.isfinite(LB))
    return Marginals(mean.reshape(N, D), jnp.full((N, D, D), jnp.nan), log_norm, psd,
                     jnp.zeros((N, D, D)))


def marginals_mean_only(prior: FullPrior, sites: Sites) -> Marginals:
    """Means and log_norm (cov is NaN) for the methods whose site updates and energy
    need only the mean (Laplace/Newton, Gauss–Newton, Taylor, their QN and Riemannian
    forms): it saves the N³ solve that the marginal variances cost."""
    if sites.nat1.shape[1] > 1:
        return _mean_only_chol(prior, sites)
    return jax.lax.cond(_use_sqrt_form(sites), _mean_only_sqrt, _mean_only_chol, prior, sites)


def marginals_mean_only_nonnegative(prior: FullPrior, sites: Sites) -> Marginals:
    """``marginals_mean_only`` when every site precision is ≥ 0 by construction (see
    ``marginals_nonnegative``)."""
    return _mean_only_sqrt(prior, sites)


def _use_sqrt_form(sites: Sites):
    return jnp.all(sites.prec[:, 0, 0] >= 0)


def marginals(prior: FullPrior, sites: Sites) -> Marginals:
    """Posterior marginals q(f_n) = N(m_n, C_nn) and log_norm for the given sites."""
    if sites.nat1.shape[1] > 1:
        return _marginals_chol(prior, sites)
    return jax.lax.cond(_use_sqrt_form(sites), _marginals_sqrt, _marginals_chol, prior, sites)


def marginals_nonnegative(prior: FullPrior, sites: Sites) -> Marginals:
    """``marginals`` for one latent when every site precision is ≥ 0 by construction
    (log-concave likelihood and a method that keeps it so; chosen by the engine). It
    avoids ``lax.cond``, which under ``vmap`` (grid surfaces) evaluates both
    factorisations. A site precision below −1e-10·(1 + max|λ|), impossible in exact
    arithmetic here, marks the posterior as not certified (psd False)."""
    return _marginals_sqrt(prior, sites)


def _predict_sqrt(prior, sites, mean, Ks, kss):
    s = jnp.sqrt(jnp.maximum(sites.prec[:, 0, 0], 0.0))
    L = jnp.linalg.cholesky(jnp.eye(prior.K.shape[0]) + s[:, None] * prior.K * s[None, :])
    V = solve_triangular(L, s[:, None] * Ks, lower=True)
    return kss - jnp.sum(V**2, 0)[:, None, None]


def _predict_chol(prior, sites, mean, Ks, kss):
    N, D = sites.nat1.shape
    Lk = prior.chol_K
    LB = jnp.linalg.cholesky(_whitened_precision(prior, sites))
    A = solve_triangular(Lk, Ks, lower=True)                    # L_K⁻¹ K(X, X*)
    BA = solve_triangular(LB, A, lower=True)
    Ns = Ks.shape[1] // D
    Ab, BAb = A.reshape(-1, Ns, D), BA.reshape(-1, Ns, D)
    return (kss - jnp.einsum("kna,knb->nab", Ab, Ab) + jnp.einsum("kna,knb->nab", BAb, BAb))


def predict(model, params, X, prior: FullPrior, sites: Sites, marg: Marginals, Xs):
    """Latent predictive mean (Ns, D) and covariance blocks (Ns, D, D) at Xs.

    Uses K⁻¹m = ν̄ − Λ̄m (from m = (K⁻¹ + Λ̄)⁻¹ν̄), so no solve with K is needed for
    the mean."""
    D = sites.nat1.shape[1]
    Ks = model.prior_covariance(params, X, Xs)                   # (ND, Ns·D)
    kss = model.prior_variance(params, Xs)
    alpha = sites.nat1 - jnp.einsum("nab,nb->na", sites.prec, marg.mean)
    mean = (Ks.T @ alpha.reshape(-1)).reshape(-1, D)
    if D > 1:
        cov = _predict_chol(prior, sites, mean, Ks, kss)
    else:
        cov = jax.lax.cond(_use_sqrt_form(sites), _predict_sqrt, _predict_chol,
                           prior, sites, mean, Ks, kss)
    return mean, cov
