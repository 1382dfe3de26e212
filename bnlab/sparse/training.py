"""Minibatch (stochastic) training of sparse GPs: the uncollapsed objectives with an
explicit q(u) (natural-gradient steps) and the hyperparameters (Adam, optax).

q(u) is held in the whitened basis v = L⁻¹u, q(v) = N(m, SSᵀ) with S lower
triangular (Hensman et al. 2015), so KL[q(u)‖p(u)] = ½(tr SSᵀ + mᵀm − K − log|SSᵀ|).
With A_n = L⁻¹K_{u f_n}, d_n = K_nn − Q_nn and q(W_n u) = N(μ_n, c_n) (μ_n = A_nᵀm,
c_n = A_nᵀSSᵀA_n) the objective is F = (N/|b|) Σ_{n∈b} ℓ_n − KL (+ N/|b|·Σ_{n∈b} r
for T-PEP), an unbiased estimate of the full sum over a uniformly drawn batch b:

- ``"svgp"`` (any likelihood; BT25 eq. 2, Hensman et al. 2015):
      ℓ_n = E_{N(μ_n, c_n + d_n)}[log p(y_n | f)]
- ``"diag"`` (Gaussian; BT25 eq. 5): ℓ_n = E_q log N(y_n; w_nᵀu, σ²) − ½ log(1 + d_n/σ²)
- ``"block"`` (Gaussian; BT25 eqs. 9–10): batches are whole blocks of a fixed random
  partition, ℓ_b = E_q log N(y_b; ·, σ²I) − ½ log|I + D_bb/σ²|
- ``"tpep"`` (Gaussian; BT25 F_{6,r} with B = N, power α, scale m learned as log m):
      ℓ_n = E_q log N(y_n; w_nᵀu, mαd_n + σ²) − (1−α)/(2α) log(1 + αm d_n/σ²)
            − (1/2α) log(1 + α(m − 1)) + ½ log m
  (α → 0 through its analytic limit). At the optimal q(u) each equals its collapsed
  form in ``bnlab.sparse.bounds`` (BT25 App. A).

Positive hyperparameters are optimised as logs; inducing inputs are free.
"""
from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.scipy.linalg import solve_triangular

from .. import cubature
from ..infer import validate_data
from ..likelihoods import Gaussian
from ..posterior.sparse import projection
from .bounds import _log1p_over_alpha, _logdet_over_alpha

__all__ = ["QU", "FitResult", "uncollapsed_objective", "minibatch_objective", "fit_minibatch",
           "predict", "optimal_qu_whitened"]

LOG2PI = np.log(2 * np.pi)
LEARNABLE = ("kernel", "likelihood", "inducing")


class QU(NamedTuple):
    """Whitened q(v) = N(mean, sqrt sqrtᵀ); ``log_scale`` is log m for T-PEP."""
    mean: jnp.ndarray       # (K,)
    sqrt: jnp.ndarray       # (K, K), lower triangle used
    log_scale: jnp.ndarray  # ()


class FitResult(NamedTuple):
    params: dict
    q: QU
    objective: np.ndarray   # minibatch objective estimate per step
    model: Any

    def predict(self, X_test):
        return predict(self.model, self.params, self.q, X_test)


def _kl_whitened(q: QU):
    S = jnp.tril(q.sqrt)
    return 0.5 * (jnp.sum(S**2) + q.mean @ q.mean - q.mean.shape[0]
                  - 2 * jnp.sum(jnp.log(jnp.abs(jnp.diag(S)))))


def _check(model, kind):
    if getattr(model, "structure", None) != "sparse":
        raise ValueError(f"minibatch training needs a SparseGP, got {model!r}")
    kind = model.posterior if kind is None else kind
    if kind not in ("svgp", "diag", "block", "tpep"):
        raise ValueError(f"kind must be 'svgp', 'diag', 'block' or 'tpep', got {kind!r}")
    if kind != "svgp" and not isinstance(model.likelihood, Gaussian):
        raise ValueError(f"kind={kind!r} (structured q(f|u), Bui & Titsias 2025) is derived for "
                         "Gaussian likelihoods only; use kind='svgp'")
    return kind


@lru_cache(maxsize=None)
def _rule(spec, num_latents):
    return cubature.make_rule(spec[0], spec[1], num_latents)


@partial(jax.jit, static_argnums=(0, 6))
def _point_terms(model, rule, params, q: QU, X, y, kind, alpha):
    """Σ_n ℓ_n over the given points (a whole number of blocks for "block")."""
    pr = projection(model, params, X)
    K, n, D = pr.A.shape
    S = jnp.tril(q.sqrt)
    mu = jnp.einsum("kna,k->na", pr.A, q.mean)
    V = (S.T @ pr.A.reshape(K, n * D)).reshape(K, n, D)
    c = jnp.einsum("kna,knb->nab", V, V)
    lp = params["likelihood"]
    if kind == "svgp":
        ell = jax.vmap(lambda yn, m, C: model.likelihood.expected_log_prob(lp, yn, m, C, rule))(
            y, mu, c + pr.cond_var)
        return jnp.sum(ell)
    s2 = lp["noise"]
    d, resid2 = pr.cond_var[:, 0, 0], (y - mu[:, 0]) ** 2 + c[:, 0, 0]
    if kind == "diag":
        return jnp.sum(-0.5 * (LOG2PI + jnp.log(s2) + resid2 / s2) - 0.5 * jnp.log1p(d / s2))
    if kind == "tpep":
        m = jnp.exp(q.log_scale)
        v = m * alpha * d + s2
        return jnp.sum(-0.5 * (LOG2PI + jnp.log(v) + resid2 / v)
                       - 0.5 * (1 - alpha) * _log1p_over_alpha(alpha, m * d / s2)
                       - 0.5 * _log1p_over_alpha(alpha, m - 1.0) + 0.5 * q.log_scale)
    size = model.block_size
    Ab = pr.A[:, :, 0].T.reshape(-1, size, K)
    Kbb = jax.vmap(lambda x: model.kernel(params["kernel"][0], x, x))(X.reshape(-1, size, X.shape[1]))
    Dbb = Kbb - jnp.einsum("bim,bjm->bij", Ab, Ab)
    return (jnp.sum(-0.5 * (LOG2PI + jnp.log(s2) + resid2 / s2))
            - 0.5 * _logdet_over_alpha(1.0, Dbb / s2))


def uncollapsed_objective(model, params, q: QU, X, y, kind=None, alpha=0.0,
                          cubature_spec=("gauss_hermite", 20)):
    """The full-batch uncollapsed objective F(params, q) (module docstring)."""
    kind = _check(model, kind)
    rule = _rule(tuple(cubature_spec), model.num_latents)
    return _point_terms(model, rule, params, q, jnp.asarray(X), jnp.asarray(y), kind, alpha) \
        - _kl_whitened(q)


def minibatch_objective(model, params, q: QU, X_batch, y_batch, num_data, kind=None, alpha=0.0,
                        cubature_spec=("gauss_hermite", 20)):
    """(N/|b|) Σ_{n∈b} ℓ_n − KL: unbiased for ``uncollapsed_objective`` when the batch
    (of points, or of whole blocks for "block") is drawn uniformly."""
    kind = _check(model, kind)
    rule = _rule(tuple(cubature_spec), model.num_latents)
    Xb, yb = jnp.asarray(X_batch), jnp.asarray(y_batch)
    return (num_data / yb.shape[0]) * _point_terms(model, rule, params, q, Xb, yb, kind, alpha) \
        - _kl_whitened(q)


def _split_params(params, learn):
    """(free, fixed): learned leaves unconstrained (log of positive ones)."""
    free, fixed = {}, {}
    for key, value in params.items():
        if key in learn:
            free[key] = value if key == "inducing" else jax.tree_util.tree_map(
                lambda v: jnp.log(jnp.asarray(v, float)), value)
        else:
            fixed[key] = value
    return free, fixed


def _join_params(free, fixed):
    out = dict(fixed)
    for key, value in free.items():
        out[key] = value if key == "inducing" else jax.tree_util.tree_map(jnp.exp, value)
    return out


def optimal_qu_whitened(model, params, X, y, kind="svgp", alpha=0.0, scale=1.0):
    """The optimal q(v) for Gaussian regression (BT25 §3; BYT17 §3.6): v-posterior of
    N(y; Aᵀv, Λ), Λ = σ²I (svgp/diag/block) or mα diag(d) + σ²I (tpep)."""
    pr = projection(model, params, jnp.asarray(X))
    A = pr.A[:, :, 0]
    lam = params["likelihood"]["noise"] + (scale * alpha * pr.cond_var[:, 0, 0] if kind == "tpep" else 0.0)
    LB = jnp.linalg.cholesky(jnp.eye(A.shape[0]) + (A / lam) @ A.T)
    mean = jax.scipy.linalg.cho_solve((LB, True), A @ (jnp.asarray(y) / lam))
    sqrt = solve_triangular(LB.T, jnp.eye(A.shape[0]), lower=False)   # B⁻¹ = L_B⁻ᵀL_B⁻¹
    Lq = jnp.linalg.cholesky(sqrt @ sqrt.T)
    return QU(mean, Lq, jnp.log(jnp.asarray(scale, float)))


def _data_term(model, rule, params, mean, cov, log_scale, X, y, kind, alpha):
    """Σ ℓ_n as a function of q(v) = N(mean, cov) with cov a full symmetric matrix."""
    q = QU(mean, jnp.linalg.cholesky(0.5 * (cov + cov.T)), log_scale)
    return _point_terms(model, rule, params, q, X, y, kind, alpha)


def fit_minibatch(model, X, y, params=None, *, kind=None, alpha=0.0, batch_size=256,
                  num_steps=2000, learning_rate=0.01, ng_step=0.1, learn=LEARNABLE, seed=0,
                  q=None, cubature_spec=("gauss_hermite", 20)) -> FitResult:
    """Stochastic training: each step draws ``batch_size`` points uniformly without
    replacement (whole blocks of a fixed random partition for kind="block", BT25),
    then

    * q(v) takes a natural-gradient step of size ``ng_step`` on the minibatch estimate
      (Hensman et al. 2013): with g = ∇_η[(N/|b|)Σ_b ℓ_n] in the expectation
      parameters η = (m, S + mmᵀ), the natural parameters move to
      (1 − ρ)θ + ρ(θ_prior + g) — exactly the damped update of N tied sites
      t(u)^N of Wilkinson et al. (2023) Alg. 2 (VI sites);
    * the hyperparameters in ``learn`` (⊆ "kernel", "likelihood", "inducing") and the
      T-PEP log m take an Adam step (``learning_rate``) on the same estimate.

    Returns the final params, q and the per-step objective estimates."""
    kind = _check(model, kind)
    if not set(learn) <= set(LEARNABLE):
        raise ValueError(f"learn must be a subset of {LEARNABLE}, got {learn!r}")
    if int(batch_size) < 1 or int(num_steps) < 1 or not learning_rate > 0:
        raise ValueError("batch_size and num_steps must be positive integers and "
                         "learning_rate positive")
    if not 0 < ng_step <= 1:
        raise ValueError(f"ng_step must lie in (0, 1], got {ng_step}")
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    X, y = validate_data(model, X, y)
    N = X.shape[0]
    params = model.init_params(X) if params is None else dict(params)
    if "inducing" not in params:
        params["inducing"] = model.initial_inducing(X)
    unit = 1
    if kind == "block":
        unit = model.block_size
        if N % unit or batch_size % unit:
            raise ValueError(f"kind='block' needs N ({N}) and batch_size ({batch_size}) to be "
                             f"multiples of block_size ({unit})")
        perm = jax.random.permutation(jax.random.PRNGKey(seed + 1), N)
        X, y = X[perm], y[perm]
    batch_size = min(int(batch_size), N)
    K = params["inducing"].shape[0] * model.num_latents
    if q is None:
        q = QU(jnp.zeros(K), jnp.eye(K), jnp.asarray(0.0))
    S0 = jnp.tril(q.sqrt) @ jnp.tril(q.sqrt).T
    free, fixed = _split_params(params, learn)
    opt = optax.adam(learning_rate)
    rule = _rule(tuple(cubature_spec), model.num_latents)
    Xu, yu = X.reshape(N // unit, unit, -1), y.reshape(N // unit, unit)
    scale = N / batch_size

    def step(carry, key):
        (free_, log_scale), mean, cov, state = carry
        idx = jax.random.choice(key, N // unit, (batch_size // unit,), replace=False)
        Xb, yb = Xu[idx].reshape(batch_size, -1), yu[idx].reshape(-1)
        data = lambda f, ls, m, S: scale * _data_term(model, rule, _join_params(f, fixed), m, S,
                                                      ls, Xb, yb, kind, alpha)
        value, (g_free, g_ls, g_m, g_S) = jax.value_and_grad(data, argnums=(0, 1, 2, 3))(
            free_, log_scale, mean, cov)
        q_ = QU(mean, jnp.linalg.cholesky(cov), log_scale)
        estimate = value - _kl_whitened(q_)
        g_S = 0.5 * (g_S + g_S.T)
        prec = jnp.linalg.inv(cov)
        new_prec = (1 - ng_step) * prec + ng_step * (jnp.eye(K) - 2 * g_S)
        new_nat1 = (1 - ng_step) * prec @ mean + ng_step * (g_m - 2 * g_S @ mean)
        new_cov = jnp.linalg.inv(0.5 * (new_prec + new_prec.T))
        grads = (jax.tree_util.tree_map(jnp.negative, g_free), -g_ls)
        updates, state = opt.update(grads, state, (free_, log_scale))
        theta = optax.apply_updates((free_, log_scale), updates)
        return (theta, new_cov @ new_nat1, 0.5 * (new_cov + new_cov.T), state), estimate

    theta = (free, q.log_scale)
    carry0 = (theta, q.mean, S0, opt.init(theta))
    keys = jax.random.split(jax.random.PRNGKey(seed), int(num_steps))
    (theta, mean, cov, _), trace = jax.jit(lambda c, k: jax.lax.scan(step, c, k))(carry0, keys)
    q_final = QU(mean, jnp.linalg.cholesky(cov), theta[1])
    return FitResult(_join_params(theta[0], fixed), q_final, np.asarray(trace), model)


def predict(model, params, q: QU, X_test):
    """Latent predictive mean and variance at X_test with q(f*|u) = p(f*|u) (one latent)."""
    Xs = jnp.asarray(X_test, float)
    pr = projection(model, params, Xs)
    A = pr.A[:, :, 0]
    S = jnp.tril(q.sqrt)
    return A.T @ q.mean, pr.cond_var[:, 0, 0] + jnp.sum((S.T @ A) ** 2, 0)
