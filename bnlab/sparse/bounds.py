"""Collapsed Gaussian-regression objectives of sparse GPs, in closed form.

With K_uu = LLᵀ, A = L⁻¹K_uf, Q = AᵀA, D = K_ff − Q (only its diagonal or its
diagonal blocks D_bb are ever formed) and noise σ²:

- ``"svgp"``  Titsias (2009) / BYT17 eq. 4 / BT25 eq. 4 (q(f|u) = p(f|u), M = I):
      log N(y; 0, Q + σ²I) − tr(D)/(2σ²)
- ``"diag"``  BT25 eq. 6 (diagonal M, optimal m_n = σ²/(σ² + d_n)):
      log N(y; 0, Q + σ²I) − ½ Σ_n log(1 + d_n/σ²)
- ``"block"`` BT25 eq. 8 (block-diagonal M, optimal m_b = (I + D_bb/σ²)⁻¹):
      log N(y; 0, Q + σ²I) − ½ Σ_b log|I + D_bb/σ²|
- ``"tpep"``  BT25 eq. 14 (M = m I, power α, blocks b):
      log N(y; 0, Q + mα blkdiag(D_bb) + σ²I) − (1−α)/(2α) Σ_b log|I + αm D_bb/σ²|
      − N/(2α) log(1 + α(m − 1)) + (N/2) log m,
  with m maximised numerically when ``scale`` is None (closed form
  m* = (1 + tr(D)/(Nσ²))⁻¹ as α → 0, where it is the spherical bound of BT25 §3.2).
- ``"pep"``   BYT17 §3.6–3.7 (the fixed point of Power EP, any α, blocks):
  ``"tpep"`` at m = 1. α = 1 with blocks of one point is FITC, α = 1 with blocks is
  PITC, α → 0 is ``"svgp"``. BYT17 prints "+ Σ_b (1−α)/(2α) log(I + …)" for blocks:
  the correct term is *minus* a log-determinant (it agrees with B = N,
  with BT25 eq. 14 at m = 1 and with the VFE limit), which is what is used here.

The blocks are consecutive runs of ``block_size`` points in the order of X (the last
block may be shorter); shuffle X and y for the random partitions of BT25. α → 0 is
evaluated through its analytic limit (log|I + αX|/α → tr X), never as 0/0.

For fixed θ the bounds are ordered svgp ≤ tpep(α→0) ≤ diag ≤ block ≤ log p(y)
(BT25 §3.2–3.3: log(1+x) ≤ x, Jensen, Hadamard/Fischer). The PEP and T-PEP energies
for α > 0 are not bounds (BYT17 Fig. 13).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular

from ..likelihoods import Gaussian
from ..posterior.sparse import JITTER

__all__ = ["BOUND_KINDS", "SMALL_ALPHA", "collapsed_bound", "optimal_q_u", "predict",
           "RegressionTerms", "regression_terms"]

BOUND_KINDS = ("svgp", "diag", "block", "tpep", "pep")
#: below this power the α → 0 series is used (relative error O(α²)).
SMALL_ALPHA = 1e-4
LOG2PI = jnp.log(2 * jnp.pi)


class RegressionTerms(NamedTuple):
    """What every collapsed objective needs, computed once: O(NM² + N b²)."""
    L: jnp.ndarray        # (M, M) Cholesky of K_uu + jitter
    A: jnp.ndarray        # (M, N) L⁻¹K_uf
    d: jnp.ndarray        # (N,) diag(K_ff − Q_ff), clamped at 0
    noise: jnp.ndarray    # σ²


def _check_model(model):
    if getattr(model, "structure", None) != "sparse" or not isinstance(model.likelihood, Gaussian):
        raise ValueError("collapsed sparse bounds need a SparseGP with a Gaussian likelihood, "
                         f"got {model!r}")


def regression_terms(model, params, X) -> RegressionTerms:
    _check_model(model)
    Z = model.inducing_inputs(params, X)
    kp = params["kernel"][0]
    k = model.kernel
    Kuu = k(kp, Z, Z)
    L = jnp.linalg.cholesky(Kuu + JITTER * jnp.mean(jnp.diag(Kuu)) * jnp.eye(Z.shape[0]))
    A = solve_triangular(L, k(kp, Z, X), lower=True)
    d = jnp.maximum(k.diag(kp, X) - jnp.sum(A**2, 0), 0.0)
    return RegressionTerms(L, A, d, params["likelihood"]["noise"])


def _split(x, size):
    """x (N, …) as a list of arrays (n_blocks, size, …): full blocks, then the rest."""
    n_full = (x.shape[0] // size) * size
    parts = [x[:n_full].reshape((-1, size) + x.shape[1:])]
    if n_full < x.shape[0]:
        parts.append(x[n_full:][None])
    return parts


def _D_blocks(model, params, X, terms, size):
    """Diagonal blocks D_bb = K_bb − A_bᵀA_b as a list of (n_blocks, b, b) arrays."""
    k, kp = model.kernel, params["kernel"][0]
    out = []
    for Xb, Ab in zip(_split(X, size), _split(terms.A.T, size)):
        Kbb = jax.vmap(lambda x: k(kp, x, x))(Xb)
        out.append(Kbb - jnp.einsum("bim,bjm->bij", Ab, Ab))
    return out


def _logdet_over_alpha(alpha, mats):
    """Σ_b log|I + α X_b| / α for symmetric PSD blocks X_b, with the α → 0 limit tr X
    (series tr X − α/2 tr X² + α²/3 tr X³ below SMALL_ALPHA)."""
    if mats.shape[-1] == 1:
        return jnp.sum(_log1p_over_alpha(alpha, mats[:, 0, 0]))
    small = alpha < SMALL_ALPHA
    a = jnp.where(small, 1.0, alpha)
    I = jnp.eye(mats.shape[-1])
    direct = 2 * jnp.sum(jnp.log(jnp.diagonal(jnp.linalg.cholesky(I + a * mats), 0, -2, -1))) / a
    X2 = mats @ mats
    series = (jnp.trace(mats, 0, -2, -1).sum() - alpha / 2 * jnp.trace(X2, 0, -2, -1).sum()
              + alpha**2 / 3 * jnp.trace(X2 @ mats, 0, -2, -1).sum())
    return jnp.where(small, series, direct)


def _log1p_over_alpha(alpha, x):
    """log(1 + αx)/α elementwise, → x as α → 0."""
    small = alpha < SMALL_ALPHA
    a = jnp.where(small, 1.0, alpha)
    return jnp.where(small, x - alpha / 2 * x**2 + alpha**2 / 3 * x**3, jnp.log1p(a * x) / a)


def _whitened_blocks(terms, y, noise_blocks, size):
    """Ã = A Λ^{-½} and ỹ = Λ^{-½} y for block-diagonal Λ (list of (n, b, b) blocks),
    with Σ log|Λ_b|."""
    if size == 1:                      # diagonal Λ: no per-point Cholesky
        lam = noise_blocks[0][:, 0, 0]
        return terms.A / jnp.sqrt(lam), y / jnp.sqrt(lam), jnp.sum(jnp.log(lam))
    At, yt, logdet = [], [], 0.0
    for Lam, Ab, yb in zip(noise_blocks, _split(terms.A.T, size), _split(y, size)):
        C = jnp.linalg.cholesky(Lam)
        At.append(jax.vmap(lambda c, a: solve_triangular(c, a, lower=True))(C, Ab).reshape(-1, Ab.shape[-1]))
        yt.append(jax.vmap(lambda c, v: solve_triangular(c, v, lower=True))(C, yb).reshape(-1))
        logdet = logdet + 2 * jnp.sum(jnp.log(jnp.diagonal(C, 0, -2, -1)))
    return jnp.concatenate(At).T, jnp.concatenate(yt), logdet


def _posterior_factors(terms, y, noise_blocks, size):
    """log N(y; 0, Q + Λ) and (L_B, c) with B = I + ÃÃᵀ, c = L_B⁻¹Ãỹ: |Q + Λ| = |Λ||B| and
    yᵀ(Q + Λ)⁻¹y = ỹᵀỹ − cᵀc, so only M×M matrices are factored."""
    At, yt, logdet_lam = _whitened_blocks(terms, y, noise_blocks, size)
    LB = jnp.linalg.cholesky(jnp.eye(At.shape[0]) + At @ At.T)
    c = solve_triangular(LB, At @ yt, lower=True)
    quad = yt @ yt - c @ c
    log_n = -0.5 * (y.shape[0] * LOG2PI + logdet_lam + 2 * jnp.sum(jnp.log(jnp.diag(LB))) + quad)
    return log_n, LB, c


def _noise_blocks(terms, Dbb, scale):
    """Λ = scale · blkdiag(D_bb) + σ² I as a list of blocks."""
    return [scale * D + terms.noise * jnp.eye(D.shape[-1]) for D in Dbb]


def _tpep(terms, Dbb, y, alpha, m, size):
    N = y.shape[0]
    s2 = terms.noise
    log_n, _, _ = _posterior_factors(terms, y, _noise_blocks(terms, Dbb, m * alpha), size)
    ld = sum(_logdet_over_alpha(alpha, m * D / s2) for D in Dbb)
    return (log_n - 0.5 * (1 - alpha) * ld - 0.5 * N * _log1p_over_alpha(alpha, m - 1.0)
            + 0.5 * N * jnp.log(m))


def _best_scale(terms, Dbb, y, alpha, size, iters=40):
    """argmax_m of the T-PEP energy by golden-section search over log m ∈ [−12, 3]
    (held constant for gradients: by the envelope theorem dF/dθ is the partial)."""
    f = lambda lm: _tpep(terms, Dbb, y, alpha, jnp.exp(lm), size)
    g = (jnp.sqrt(5.0) - 1) / 2

    def body(_, ab):
        a, b = ab
        c, d = b - g * (b - a), a + g * (b - a)
        return jnp.where(f(c) > f(d), jnp.array([a, d]), jnp.array([c, b]))

    a, b = jax.lax.fori_loop(0, iters, body, jnp.array([-12.0, 3.0]))
    return jax.lax.stop_gradient(jnp.exp(0.5 * (a + b)))


def _settings(model, kind, alpha, block_size):
    kind = model.posterior if kind is None else kind
    if kind not in BOUND_KINDS:
        raise ValueError(f"kind must be one of {BOUND_KINDS}, got {kind!r}")
    if kind in ("tpep", "pep"):
        if alpha is None:
            raise ValueError(f"kind={kind!r} needs the power alpha in [0, 1]")
        if not (isinstance(alpha, jax.core.Tracer) or 0 <= float(alpha) <= 1):
            raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    block_size = model.block_size if block_size is None else block_size
    if kind == "block" and block_size is None:
        raise ValueError("kind='block' needs a block_size")
    if block_size is None or kind in ("svgp", "diag"):
        block_size = 1
    if int(block_size) != block_size or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    return kind, alpha, int(block_size)


def collapsed_bound(model, params, X, y, kind=None, alpha=None, block_size=None, scale=None):
    """The collapsed objective ``kind`` (default ``model.posterior``) at params.

    ``alpha`` is the power for "pep" and "tpep" (α = 0 is the VFE limit);
    ``block_size`` the points per block for "block", "pep" and "tpep" (default
    ``model.block_size``, else 1); ``scale`` the T-PEP m (None: maximised)."""
    kind, alpha, size = _settings(model, kind, alpha, block_size)
    return _collapsed(model, kind, size, params, jnp.asarray(X), jnp.asarray(y), alpha, scale)


@partial(jax.jit, static_argnums=(0, 1, 2))
def _collapsed(model, kind, size, params, X, y, alpha, scale):
    terms = regression_terms(model, params, X)
    s2 = terms.noise
    if kind in ("svgp", "diag", "block"):
        Dbb = (_D_blocks(model, params, X, terms, size) if kind == "block"
               else [terms.d[:, None, None]])
        log_n, _, _ = _posterior_factors(terms, y, _noise_blocks(terms, [terms.d[:, None, None]], 0.0), 1)
        if kind == "svgp":
            return log_n - 0.5 * jnp.sum(terms.d) / s2
        if kind == "diag":
            return log_n - 0.5 * jnp.sum(jnp.log1p(terms.d / s2))
        return log_n - 0.5 * sum(_logdet_over_alpha(1.0, D / s2) for D in Dbb)
    Dbb = (_D_blocks(model, params, X, terms, size) if size > 1 else [terms.d[:, None, None]])
    if kind == "pep":
        scale = 1.0
    elif scale is None:
        scale = _best_scale(terms, Dbb, y, alpha, size)
    return _tpep(terms, Dbb, y, alpha, scale, size)


def optimal_q_u(model, params, X, y, kind=None, alpha=None, block_size=None, scale=None):
    """The optimal q(u) = N(m_u, S_u) of the objective ``kind``:
    q(u) ∝ p(u) N(y; K_fu K_uu⁻¹u, Λ) with Λ = σ²I for svgp/diag/block (BT25 §3: the
    same q(u) for every structured M) and Λ = mα blkdiag(D_bb) + σ²I for tpep/pep
    (BYT17 §3.6–3.7; BT25 Remark 2). Returns (m_u, S_u)."""
    kind, alpha, size = _settings(model, kind, alpha, block_size)
    terms, LB, c = _fit(model, kind, size, params, jnp.asarray(X), jnp.asarray(y), alpha, scale)
    mv = solve_triangular(LB.T, c, lower=False)
    Binv = cho_solve((LB, True), jnp.eye(LB.shape[0]))
    return terms.L @ mv, terms.L @ Binv @ terms.L.T


@partial(jax.jit, static_argnums=(0, 1, 2))
def _fit(model, kind, size, params, X, y, alpha, scale):
    terms = regression_terms(model, params, X)
    if kind in ("svgp", "diag", "block"):
        blocks, noise_scale, size = [terms.d[:, None, None]], 0.0, 1
    else:
        blocks = (_D_blocks(model, params, X, terms, size) if size > 1 else [terms.d[:, None, None]])
        m = 1.0 if kind == "pep" else (_best_scale(terms, blocks, y, alpha, size) if scale is None else scale)
        noise_scale = m * alpha
    _, LB, c = _posterior_factors(terms, y, _noise_blocks(terms, blocks, noise_scale), size)
    return terms, LB, c


def predict(model, params, X, y, Xs, kind=None, alpha=None, block_size=None, scale=None):
    """Latent predictive mean and variance at Xs under the optimal q(u) of ``kind``,
    with q(f*|u) = p(f*|u) (BT25 §3.3). Add σ² for y*."""
    kind, alpha, size = _settings(model, kind, alpha, block_size)
    X, y = jnp.asarray(X), jnp.asarray(y)
    terms, LB, c = _fit(model, kind, size, params, X, y, alpha, scale)
    Z = model.inducing_inputs(params, jnp.asarray(X))
    k, kp = model.kernel, params["kernel"][0]
    As = solve_triangular(terms.L, k(kp, Z, jnp.asarray(Xs)), lower=True)
    mean = As.T @ solve_triangular(LB.T, c, lower=False)
    Vs = solve_triangular(LB, As, lower=True)
    var = k.diag(kp, jnp.asarray(Xs)) - jnp.sum(As**2, 0) + jnp.sum(Vs**2, 0)
    return mean, var
