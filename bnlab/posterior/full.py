"""Full-GP global update (Wilkinson et al. 2023, eq. 10 / Alg. 1) in a stable form.

Given the prior covariance K (ND×ND) and the sites (ν̄, Λ̄) the posterior is
N(m, C) with C = (K⁻¹ + Λ̄)⁻¹ and m = C ν̄. K is never inverted. Three factorisations:

* **W½ form** (one latent, every site precision λ_n ≥ 0 — always the case for
  Laplace/VI/EP/PL on log-concave likelihoods): with s = √λ,
  B = I + s sᵀ ∘ K = LLᵀ (Rasmussen & Williams, Alg. 3.2/3.5),
  m = K(ν̄ − s ∘ B⁻¹(s ∘ Kν̄)), log|I + KΛ̄| = 2 Σ log L_ii, and
  diag C = (1 − diag B⁻¹)/λ where that is accurate, else diag(K − VᵀV), V = L⁻¹ diag(s) K
  (for the sites where it is not).
* **Signed W½ form** (one latent, site precisions of either sign — pl2, and EP or
  Laplace on non-log-concave likelihoods): with g = √|λ|, Σ = diag(sign λ), sites
  sorted positive first, M = Σ + g gᵀ ∘ K = L Σ Lᵀ
  (``linalg.dense.signed_cholesky_and_inverse``);
  the posterior is PD exactly when M has the inertia of Σ, and then every leading
  block of M does too, so the factorisation exists without pivoting and a failed one
  *is* the PSD diagnostic. K is neither inverted nor factored (``_signed_system``).
* **Prior-Cholesky form** (block-diagonal D×D sites of any sign, D > 1): with
  K = L_K L_Kᵀ, B = I + L_Kᵀ Λ̄ L_K = UUᵀ (U upper-triangular), C = WWᵀ with
  W = L_K U⁻ᵀ lower-triangular. B is positive definite exactly when the posterior is,
  so a failed Cholesky *is* the PSD diagnostic (Sylvester: |B| = |I + KΛ̄|).

Each gives log_norm = log ∫ N(f|0, K) Π_n exp(ν̄_nᵀf_n − ½f_nᵀΛ̄_nf_n) df
                  = ½ ν̄ᵀm − ½ log|I + KΛ̄|,
which every energy builds on.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular

from ..sites import Marginals, Sites, site_residual
from ..linalg.dense import (column_sums, lower_gram, lower_solve_lower,
                           lower_triangular_inverse, signed_cholesky_and_inverse,
                           symmetric_cholesky)

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


def _factored(L):
    """Whether a Cholesky factor exists: a failed factorisation is NaN throughout (LAPACK
    reports it, jax fills the factor; ``signed_cholesky_and_inverse`` propagates a failed
    leaf into every later block), and a non-finite input reaches the diagonal, so the
    diagonal tells, without a pass over the whole N×N factor."""
    return jnp.all(jnp.isfinite(jnp.diag(L)))


def _block_diag_times(prec, M):
    """Λ̄ M for block-diagonal Λ̄ given as (N, D, D) blocks and M of shape (ND, k)."""
    N, D, _ = prec.shape
    return jnp.einsum("nab,nbk->nak", prec, M.reshape(N, D, -1)).reshape(N * D, -1)


#: Inaccurate short-form variances corrected column by column, at most this many; more
#: and every variance takes the product form (see ``_variances_sqrt``).
PATCHED_COLUMNS = 16


def _sqrt_factor(K, lam):
    """s = √λ and the Cholesky factor of B = I + s sᵀ ∘ K (the W½ form). Only round-off
    negatives may be clipped here; ``_certified`` says whether that is all there was."""
    s = jnp.sqrt(jnp.maximum(lam, 0.0))
    return s, symmetric_cholesky(jnp.eye(K.shape[0]) + s[:, None] * K * s[None, :])


def _split_natural_mean(K, lam, s, nu):
    """ν̄ = s ∘ b + r for the W½ form's mean m = KSB⁻¹(b − SKr) + Kr (S = diag(s)): b = ν̄/s
    on the sites at least as informative as the prior (λ_n K_nn ≥ 1), r = ν̄ on the rest.

    The textbook m = Kν̄ − KSB⁻¹SKν̄ subtracts two vectors of size ‖K‖λ|μ̃| to get one of
    size |μ̃| (μ̃ = ν̄/λ the site mean): with Gaussian noise σ_n² = 1e-10 the site
    precisions are 1e10 and the mean loses ten digits (the energies then came out at
    +6·10⁵ where log p(y) ≈ −5·10⁴). Since SKS = B − I, KSB⁻¹b = Kν̄ − KSB⁻¹SKν̄ for
    ν̄ = Sb without the subtraction (R&W Alg. 2.1's α = S B⁻¹ b); the remaining r is at
    most |μ̃|/K_nn per site, so its own cancellation is at the prior's scale. The vector
    K is multiplied by, SB⁻¹(b − SKr) + r, is K⁻¹m = ν̄ − Λ̄m itself (``Marginals.residual``)."""
    strong = lam * jnp.diag(K) >= 1.0
    b = jnp.where(strong, nu / jnp.where(strong, s, 1.0), 0.0)
    return b, jnp.where(strong, 0.0, nu)


def _certified(lam):
    """Whether every negative site precision is round-off (≥ −1e-10 (1 + max|λ|)); the
    W½ form cannot certify a posterior with larger ones."""
    return jnp.min(lam) >= -1e-10 * (1.0 + jnp.max(jnp.abs(lam)))


def _variances_sqrt(K, lam, s, L_inv, signed=None):
    """diag C for C = K − K S B⁻¹ S K, B = I + SKS = LLᵀ, S = diag(s), s = √λ; with
    ``signed = (σ, L)`` (the signed W½ form: σ = sign λ, s = √|λ|, B = Σ + SKS = LΣLᵀ)
    the same with B⁻¹ = L⁻ᵀΣL⁻¹ and λ_n read as |λ_n|.

    Since SCS = I − B⁻¹ (signed: Σ − ΣB⁻¹Σ) when every λ_n ≠ 0, C_nn = (1 − [B⁻¹]_nn)/λ_n
    (signed: (σ_n − [B⁻¹]_nn)/|λ_n|) needs only L⁻¹ (N³/3 flops, see ``bnlab.linalg.dense``)
    instead of the N³ flops of V = L⁻¹SK in C_nn = K_nn − ‖V_:n‖² (R&W Alg. 3.2;
    signed: Σ_k σ_k V_kn²). The short form cancels when |λ_n| C_nn is tiny:
    [B⁻¹]_nn carries an absolute error of about ε‖B‖ ≤ ε(1 + Σ λ_n K_nn), so it is
    trusted only where ε(1 + Σ λ_n K_nn)/(λ_n C_nn) ≤ 1e-7, a bound the observed
    errors stay well inside (benchmarks/README.md, "Accuracy behind the code").
    Signed, B⁻¹ is not bounded by I: a factor with LΣLᵀ = B + ΔB,
    |ΔB| ≲ ε|L||L|ᵀ, gives |δ[B⁻¹]_nn| = |uᵀΔBu| ≲ ε‖L‖²_F ‖L⁻¹‖² a_n for u = B⁻¹e_n,
    a_n = Σ_k (L⁻¹)²_kn; the estimate takes ‖L⁻¹‖² ≈ max_k a_k, a lower bound that
    still exceeds the observed errors on pl2's states, a third to a half of their sites
    negative, whereas the upper bound ‖L⁻¹‖²_F would send many columns to the N³
    product form for nothing (same section).
    Elsewhere — zero sites at initialisation, or the few sites with tiny λ_n
    at a large prior variance — C_nn = K_nn − ‖V_:n‖², for those columns only when they
    are at most ``PATCHED_COLUMNS`` (2N² flops each), else for all. V comes from the
    L⁻¹ at hand as one product, which XLA:CPU runs faster than the triangular solve
    L⁻¹(SK). On the benchmark's surface CVI mostly needs a few such columns per step
    where σ² ≥ e^7, rarely more than ``PATCHED_COLUMNS``. Under ``vmap`` the
    ``lax.switch`` evaluates every branch."""
    eps = jnp.finfo(K.dtype).eps
    squares = L_inv * L_inv
    if signed is None:
        weights = 1.0
        diag_inv = column_sums(squares)                                  # d_n = [B⁻¹]_nn
        short = (1.0 - diag_inv) / lam
        estimate = eps * (1.0 + jnp.sum(lam * jnp.diag(K))) * diag_inv / (lam * short)
    else:
        sign, L = signed
        weights = sign[:, None]
        column_norms = column_sums(squares)                              # a_n
        short = (sign - sign @ squares) / jnp.abs(lam)
        estimate = (eps * jnp.sum(L * L) * jnp.max(column_norms) * column_norms
                    / (jnp.abs(lam) * short))
    # the product form's own error, ε K_nn absolute, can be the larger (σ² = 1e20 with
    # site precisions 0.01: ε K_nn = 2e4 against C_nn ≈ 100, while the short form's
    # estimate was 1e-7): it is taken only where it is the more accurate of the two
    product_estimate = eps * jnp.diag(K) / jnp.abs(short)
    inaccurate = ~((lam != 0) & (short > 0)
                   & ((estimate <= 1e-7) | (estimate <= product_estimate)))
    count = jnp.sum(inaccurate)

    def squared_norms(K_columns):        # Σ_k σ_k (L⁻¹ S K_:n)_k² for the given columns
        V = L_inv @ (s[:, None] * K_columns)
        return column_sums(weights * V * V)   # not jnp.sum (see column_sums)

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
    faster than the two triangular solves of ``cho_solve``."""
    K = prior.K
    lam = sites.prec[:, 0, 0]
    nu = sites.nat1[:, 0]
    s, L = _sqrt_factor(K, lam)
    L_inv = lower_triangular_inverse(L)
    b, r = _split_natural_mean(K, lam, s, nu)
    residual = r + s * ((L_inv @ (b - s * (K @ r))) @ L_inv)                    # K⁻¹m
    mean = K @ residual
    var = _variances_sqrt(K, lam, s, L_inv)
    share = column_sums(L_inv * L_inv)                          # [B⁻¹]_nn = 1 − λ_n C_nn
    half_logdet = jnp.sum(jnp.log(jnp.diag(L)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * nu @ mean - half_logdet
    psd = _factored(L) & jnp.all(var > 0) & _certified(lam)
    return Marginals(mean[:, None], var[:, None, None], log_norm, psd,
                     jnp.zeros((K.shape[0], 1, 1)), residual[:, None], share[:, None, None],
                     half_logdet=half_logdet)


class _SignedSystem(NamedTuple):
    """The signed W½ form in the sorted order (``perm``; ``unsort`` maps back):
    K_p = K[perm][:, perm], g = √|λ_p|, M = Σ + g gᵀ ∘ K_p = L Σ Lᵀ, and L⁻¹ (pruned
    by XLA where unused)."""
    perm: jnp.ndarray
    unsort: jnp.ndarray
    lam: jnp.ndarray
    sign: jnp.ndarray
    g: jnp.ndarray
    K: jnp.ndarray
    L: jnp.ndarray
    L_inv: jnp.ndarray


def _signed_system(prior: FullPrior, sites: Sites) -> _SignedSystem:
    """Factor M = Σ + GKG, G = diag(√|λ|), Σ = diag(sign λ) (zero sites count as
    positive), for C = (K⁻¹ + Λ̄)⁻¹ = K − KGM⁻¹GK with Λ̄ = GΣG of either sign.

    Inertia (Haynsworth, the block matrix [[K⁻¹, G], [G, −Σ]] read through either Schur
    complement): K⁻¹ + Λ̄ is positive definite exactly when M has the inertia of Σ.
    With the positive sites first, every leading block M_S of M also has the inertia
    of Σ_S when the posterior is PD: M_S is the M of the sub-problem with prior K_SS
    and the sites on S, which is the marginal on S of the posterior without the
    (negative) sites outside S, and dropping negative sites only adds precision.
    So ``signed_cholesky_and_inverse`` needs no pivoting, fails (NaN) exactly when the
    posterior is not PD, and |I + KΛ̄| = |Σ||M| = |L|². Unlike the prior-Cholesky form
    it needs neither K's Cholesky factor nor its jitter, and factor and inverse cost
    2N³/3 flops instead of three N³/3-class passes and a product (B = I + L_KᵀΛ̄L_K,
    its Cholesky, the solve, diag WWᵀ)."""
    lam = sites.prec[:, 0, 0]
    perm, unsort = _positive_first(lam < 0)
    lam_p = lam[perm]
    sign = jnp.where(lam_p < 0, -1.0, 1.0).astype(lam.dtype)
    g = jnp.sqrt(jnp.abs(lam_p))
    # rows, then columns: two contiguous gathers beat one gather of N² index pairs;
    # in bounds by construction, so the default clamping is skipped
    rows = prior.K.at[perm].get(mode="promise_in_bounds", unique_indices=True)
    K = rows.at[:, perm].get(mode="promise_in_bounds", unique_indices=True)
    L, L_inv = signed_cholesky_and_inverse(jnp.diag(sign) + g[:, None] * K * g[None, :], sign)
    return _SignedSystem(perm, unsort, lam_p, sign, g, K, L, L_inv)


def _positive_first(negative):
    """(perm, unsort) of the stable partition that puts the non-negative sites first
    (``jnp.argsort(negative, stable=True)`` and its inverse) by counting, O(N) instead
    of two O(N log N) argsorts."""
    keep = ~negative
    unsort = jnp.where(negative, jnp.sum(keep) + jnp.cumsum(negative) - 1, jnp.cumsum(keep) - 1)
    perm = jnp.zeros_like(unsort).at[unsort].set(jnp.arange(negative.shape[0]),
                                                  unique_indices=True)
    return perm, unsort


def _plain_residual(sites, mean):
    """ν̄ − Λ̄m by subtraction (``Marginals.residual``; the signed form has no split that
    avoids it, and must return what the W½ form it shares a ``lax.cond`` with returns)."""
    return sites.nat1 - sites.prec[:, :, 0] * mean[:, None]


def _marginals_signed(prior: FullPrior, sites: Sites) -> Marginals:
    """The signed W½ form with variances (``_signed_system``), like ``_marginals_sqrt``:
    M⁻¹ = L⁻ᵀΣL⁻¹ from the factorisation's inverse, which also gives the variances."""
    system = _signed_system(prior, sites)
    K, g, sign, L_inv = system.K, system.g, system.sign, system.L_inv
    nu = sites.nat1[:, 0]
    Knu = K @ nu[system.perm]
    mean_p = Knu - K @ (g * ((sign * (L_inv @ (g * Knu))) @ L_inv))
    var_p = _variances_sqrt(K, system.lam, g, L_inv, (sign, system.L))
    share_p = sign * (sign @ (L_inv * L_inv))                   # σ_n[M⁻¹]_nn = 1 − λ_n C_nn
    mean, var, share = mean_p[system.unsort], var_p[system.unsort], share_p[system.unsort]
    half_logdet = jnp.sum(jnp.log(jnp.diag(system.L)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * nu @ mean - half_logdet
    psd = _factored(system.L) & jnp.all(var > 0)
    return Marginals(mean[:, None], var[:, None, None], log_norm, psd,
                     jnp.zeros((K.shape[0], 1, 1)), _plain_residual(sites, mean),
                     share[:, None, None], half_logdet=half_logdet)


def _whitened_precision(prior: FullPrior, sites: Sites):
    """B = I + L_Kᵀ Λ̄ L_K, the posterior precision in the prior's whitened coordinates,
    by the triangular-aware product (N³/2 flops, ``linalg.dense.lower_gram``). Its
    off-diagonal blocks are symmetric by construction; ``jnp.linalg.cholesky``
    symmetrises its input, which takes care of the round-off in the diagonal leaves."""
    N, D = sites.nat1.shape
    Lk = prior.chol_K
    return jnp.eye(N * D) + lower_gram(Lk, _block_diag_times(sites.prec, Lk), D)


def _marginals_chol(prior: FullPrior, sites: Sites) -> Marginals:
    """The prior-Cholesky form (D > 1 latents) with the *reversed* factorisation
    B = UUᵀ, U upper triangular (U = JLJ for JBJ = LLᵀ, J the reversal): then
    C = L_K B⁻¹ L_Kᵀ = WWᵀ with W = L_K U⁻ᵀ lower-triangular, and JWᵀJ = L⁻¹(J L_Kᵀ J)
    is a triangular solve whose right-hand side is lower-triangular too
    (``linalg.dense.lower_solve_lower``, N³/3 flops, mostly in products). That solve
    replaces the N³-flop solve L_B⁻¹L_Kᵀ of the forward form, or a triangular inverse
    followed by a triangular product (N³/3 + 2N³/3 flops)."""
    N, D = sites.nat1.shape
    B = _whitened_precision(prior, sites)
    L_rev = jnp.linalg.cholesky(B[::-1, ::-1])
    W = lower_solve_lower(L_rev, prior.chol_K.T[::-1, ::-1]).T[::-1, ::-1]   # C = WWᵀ
    nu = sites.nat1.reshape(-1)
    mean = W @ (nu @ W)
    Wb = W.reshape(N, D, N * D)
    cov = jnp.einsum("nak,nbk->nab", Wb, Wb)
    half_logdet = jnp.sum(jnp.log(jnp.diag(L_rev)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * nu @ mean - half_logdet
    psd = _factored(L_rev)
    return Marginals(mean.reshape(N, D), cov, log_norm, psd, jnp.zeros((N, D, D)),
                     half_logdet=half_logdet)


def _mean_only_sqrt(prior: FullPrior, sites: Sites) -> Marginals:
    """``_marginals_sqrt`` without the variances: one Cholesky and O(N²) work instead
    of the N×N triangular solve of V (cov is NaN)."""
    K = prior.K
    lam, nu = sites.prec[:, 0, 0], sites.nat1[:, 0]
    s, L = _sqrt_factor(K, lam)
    b, r = _split_natural_mean(K, lam, s, nu)
    residual = r + s * cho_solve((L, True), b - s * (K @ r))                    # K⁻¹m
    mean = K @ residual
    half_logdet = jnp.sum(jnp.log(jnp.diag(L)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * nu @ mean - half_logdet
    psd = _factored(L) & _certified(lam)
    N = K.shape[0]
    return Marginals(mean[:, None], jnp.full((N, 1, 1), jnp.nan), log_norm, psd,
                     jnp.zeros((N, 1, 1)), residual[:, None], jnp.full((N, 1, 1), jnp.nan),
                     half_logdet=half_logdet)


def _mean_only_signed(prior: FullPrior, sites: Sites) -> Marginals:
    """``_marginals_signed`` without the variances: m = Kν̄ − KGM⁻¹GKν̄ with
    M⁻¹ = L⁻ᵀΣL⁻¹ by two triangular solves (cov is NaN)."""
    system = _signed_system(prior, sites)
    K, g, L = system.K, system.g, system.L
    nu = sites.nat1[:, 0]
    Knu = K @ nu[system.perm]
    w = system.sign * solve_triangular(L, g * Knu, lower=True)
    mean_p = Knu - K @ (g * solve_triangular(L, w, lower=True, trans="T"))
    mean = mean_p[system.unsort]
    half_logdet = jnp.sum(jnp.log(jnp.diag(L)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * nu @ mean - half_logdet
    N = K.shape[0]
    return Marginals(mean[:, None], jnp.full((N, 1, 1), jnp.nan), log_norm,
                     _factored(L), jnp.zeros((N, 1, 1)), _plain_residual(sites, mean),
                     jnp.full((N, 1, 1), jnp.nan), half_logdet=half_logdet)


def _mean_only_chol(prior: FullPrior, sites: Sites) -> Marginals:
    """``_marginals_chol`` without the covariance blocks: m = L_K L_B⁻ᵀ L_B⁻¹ L_Kᵀ ν̄."""
    N, D = sites.nat1.shape
    Lk = prior.chol_K
    LB = jnp.linalg.cholesky(_whitened_precision(prior, sites))
    nu = sites.nat1.reshape(-1)
    w = solve_triangular(LB, Lk.T @ nu, lower=True)
    mean = Lk @ solve_triangular(LB, w, lower=True, trans="T")
    half_logdet = jnp.sum(jnp.log(jnp.diag(LB)))   # ½ log|I + KΛ̄|
    log_norm = 0.5 * nu @ mean - half_logdet
    psd = _factored(LB)
    return Marginals(mean.reshape(N, D), jnp.full((N, D, D), jnp.nan), log_norm, psd,
                     jnp.zeros((N, D, D)), half_logdet=half_logdet)


def marginals_mean_only(prior: FullPrior, sites: Sites) -> Marginals:
    """Means and log_norm (cov is NaN) for the methods whose site updates and energy
    need only the mean (Laplace/Newton, Gauss–Newton, Taylor, their QN and Riemannian
    forms): it saves the N³ solve that the marginal variances cost."""
    if sites.nat1.shape[1] > 1:
        return _mean_only_chol(prior, sites)
    return jax.lax.cond(_use_sqrt_form(sites), _mean_only_sqrt, _mean_only_signed, prior, sites)


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
    return jax.lax.cond(_use_sqrt_form(sites), _marginals_sqrt, _marginals_signed, prior, sites)


def marginals_nonnegative(prior: FullPrior, sites: Sites) -> Marginals:
    """``marginals`` for one latent when every site precision is ≥ 0 by construction
    (log-concave likelihood and a method that keeps it so; chosen by the engine). It
    avoids ``lax.cond``, which under ``vmap`` (grid surfaces) evaluates both
    factorisations. A site precision below −1e-10·(1 + max|λ|), impossible in exact
    arithmetic here, marks the posterior as not certified (psd False)."""
    return _marginals_sqrt(prior, sites)


def _predict_sqrt(prior, sites, mean, Ks, kss):
    s, L = _sqrt_factor(prior.K, sites.prec[:, 0, 0])
    V = solve_triangular(L, s[:, None] * Ks, lower=True)
    return kss - jnp.sum(V**2, 0)[:, None, None]


def _predict_signed(prior, sites, mean, Ks, kss):
    """C** = k** − K*ᵀGM⁻¹GK* = k** − VᵀΣV, V = L⁻¹GK* (``_signed_system``)."""
    system = _signed_system(prior, sites)
    V = solve_triangular(system.L, system.g[:, None] * Ks[system.perm], lower=True)
    return kss - (system.sign @ (V * V))[:, None, None]


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
    the mean; ``site_residual`` takes it from the solve that gave m where it can."""
    D = sites.nat1.shape[1]
    Ks = model.prior_covariance(params, X, Xs)                   # (ND, Ns·D)
    kss = model.prior_variance(params, Xs)
    alpha = site_residual(marg, sites)
    mean = (Ks.T @ alpha.reshape(-1)).reshape(-1, D)
    if D > 1:
        cov = _predict_chol(prior, sites, mean, Ks, kss)
    else:
        cov = jax.lax.cond(_use_sqrt_form(sites), _predict_sqrt, _predict_signed,
                           prior, sites, mean, Ks, kss)
    return mean, cov
