"""The MCMC gold standard: annealed importance sampling (AIS) with elliptical slice
sampling (ESS) at fixed hyperparameters.

AIS (Neal 2001), as used for the surfaces of Li, John & Solin (2023, §5.1, App. B, eqs.
26–28; after Kuss & Rasmussen 2005): intermediate targets
    π_t(f) ∝ N(f | 0, K) p(y | f)^{τ_t},   τ_t = (t / T)⁴,  t = 0 … T,
chains start from exact prior draws (τ_0 = 0), and for t = 1 … T
    log w += (τ_t − τ_{t−1}) log p(y | f)      with f the state *before* the move,
    f ← ESS transition leaving π_t invariant     (Neal 2001's ordering).
Each chain's w is an unbiased estimate of Z = p(y | θ); the chains are combined by the
log of the *arithmetic* mean of the weights (as GPML's ``infMCMC`` does — the paper's
"geometric mean" wording is not what its code computes), with the delta-method
standard error se(log Ẑ) = sd(w) / (√C · mean(w)).

ESS (Murray, Adams & MacKay 2010) moves in f-space with prior draws ν = L z, L = chol K
(the engine's jittered factor). Our own kernel rather than blackjax's so that the shrink
loop is a masked ``while_loop`` with a cap whose hits are counted (GPML's "emergency
break" after 20 shrinks accepts the last proposal, which biases; here a capped step
keeps the current state, which preserves detailed balance because the shrinkage path
is reversible step by step) and so that it vmaps over chains and grid points.

The final AIS states, weighted by their normalised weights, are posterior samples of f.
Results are cached on disk (``bnlab._runtime.disk_cache``) keyed by data, model, θ, settings and
``AIS_VERSION``.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from jax.scipy.special import logsumexp

from .. import cubature
from .._runtime import disk_cache as cache
from .work_limits import check_ais_memory
from ..posterior import full

__all__ = ["AISResult", "ais", "ais_grid", "ess_step", "effective_sample_size",
           "posterior_key"]

TWO_PI = 2.0 * np.pi

#: part of every cache key: raise it whenever the sampler's output for the same inputs
#: changes, so that entries written by the old sampler are never served
AIS_VERSION = 1


class AISResult(NamedTuple):
    log_z: float                 # log of the mean AIS weight (log p(y|θ) estimate)
    log_z_se: float              # delta-method standard error of log_z
    log_weights: np.ndarray      # (C,) per-chain log weights
    samples: np.ndarray          # (C, N·D) final states: posterior samples of f (weighted)
    log_predictive: float        # mean test log predictive density (NaN without a test set)
    mean_shrinks: float          # average number of ESS shrinks per transition
    capped_fraction: float       # fraction of ESS transitions that hit the shrink cap
    ess: float = float("nan")    # effective sample size of the weights (Kong 1992)


def effective_sample_size(log_weights) -> float:
    """Kong's (1992) effective sample size (Σ w)² / Σ w² of importance weights: how
    many equally weighted draws the weighted chains are worth. Few (one chain carrying
    most of the weight) means log Ẑ and its delta-method standard error, which assume
    the weights' spread is seen, are not to be trusted."""
    lw = np.asarray(log_weights, float)
    w = np.exp(lw - lw.max())
    return float(w.sum() ** 2 / (w ** 2).sum())


def _log_lik(model, params, y, f):
    F = f.reshape(y.shape[0], model.num_latents)
    lik = model.likelihood
    return jnp.sum(jax.vmap(lambda yn, fn: lik.log_prob(params["likelihood"], yn, fn))(y, F))


def ess_step(key, f, ll_f, chol, beta, log_lik, max_shrinks=50):
    """One elliptical slice sampling transition for N(f|0, LLᵀ) · exp(β log_lik(f)).
    Returns (new f, its log-likelihood, number of shrinks, capped flag)."""
    k_nu, k_u, k_theta, k_loop = jax.random.split(key, 4)
    nu = chol @ jax.random.normal(k_nu, f.shape)
    log_u = beta * ll_f + jnp.log(jax.random.uniform(k_u))
    theta = jax.random.uniform(k_theta, minval=0.0, maxval=TWO_PI)

    def propose(theta):
        g = f * jnp.cos(theta) + nu * jnp.sin(theta)
        return g, log_lik(g)

    g, ll_g = propose(theta)

    def cond(c):
        _, _, _, _, ll_g, n = c
        return (beta * ll_g <= log_u) & (n < max_shrinks)

    def body(c):
        theta, lo, hi, _, _, n = c
        lo = jnp.where(theta < 0, theta, lo)
        hi = jnp.where(theta < 0, hi, theta)
        theta = jax.random.uniform(jax.random.fold_in(k_loop, n), minval=lo, maxval=hi)
        g, ll_g = propose(theta)
        return theta, lo, hi, g, ll_g, n + 1

    init = (theta, theta - TWO_PI, theta, g, ll_g, jnp.asarray(0))
    _, _, _, g, ll_g, n = jax.lax.while_loop(cond, body, init)
    accepted = beta * ll_g > log_u
    return (jnp.where(accepted, g, f), jnp.where(accepted, ll_g, ll_f), n, ~accepted)


def _ais_point(model, params, X, y, key, Xs, ys, num_temps, num_chains, steps_per_temp,
               max_shrinks):
    """AIS for one θ (pure; vmapped over grid points by ``ais_grid``)."""
    prior = full.prepare(model, params, X)
    L = prior.chol_K
    n = L.shape[0]

    def log_lik(f):
        return _log_lik(model, params, y, f)

    f0 = (L @ jax.random.normal(jax.random.fold_in(key, 0), (n, num_chains))).T
    ll0 = jax.vmap(log_lik)(f0)
    taus = (jnp.arange(num_temps + 1) / num_temps) ** 4
    step = jax.vmap(lambda k, f, l, beta: ess_step(k, f, l, L, beta, log_lik, max_shrinks),
                    in_axes=(0, 0, 0, None))

    def temperature(carry, t):
        f, ll, logw, shrinks, capped = carry
        logw = logw + (taus[t] - taus[t - 1]) * ll

        def move(c, s):
            f, ll = c
            keys = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, t), s), num_chains)
            f, ll, k, cap = step(keys, f, ll, taus[t])
            return (f, ll), (jnp.sum(k), jnp.sum(cap))

        (f, ll), (k, cap) = jax.lax.scan(move, (f, ll), jnp.arange(steps_per_temp))
        return (f, ll, logw, shrinks + jnp.sum(k), capped + jnp.sum(cap)), None

    init = (f0, ll0, jnp.zeros(num_chains), jnp.asarray(0), jnp.asarray(0))
    (f, _, logw, shrinks, capped), _ = jax.lax.scan(temperature, init,
                                                    jnp.arange(1, num_temps + 1))
    log_z = logsumexp(logw) - jnp.log(num_chains)
    w = jnp.exp(logw - jnp.max(logw))
    se = jnp.std(w, ddof=1) / (jnp.sqrt(num_chains) * jnp.mean(w))
    moves = num_temps * steps_per_temp * num_chains
    lpd = _log_predictive(model, params, X, prior, f, logw, Xs, ys) if Xs is not None else jnp.nan
    return {"log_z": log_z, "log_z_se": se, "log_weights": logw, "samples": f, "lpd": lpd,
            "mean_shrinks": shrinks / moves, "capped_fraction": capped / moves}


def _conditional(model, params, X, prior, Xs):
    """K⁻¹K(X, X*) and the blocks (Ns, D, D) of Cov[f* | f]."""
    D = model.num_latents
    Ks = model.prior_covariance(params, X, Xs)
    A = cho_solve((prior.chol_K, True), Ks)
    Ns = Xs.shape[0]
    kss = model.prior_variance(params, Xs)
    reduce = jnp.einsum("kna,knb->nab", Ks.reshape(-1, Ns, D), A.reshape(-1, Ns, D))
    return A, kss - reduce


def _log_predictive(model, params, X, prior, f, logw, Xs, ys):
    """Mean over test points of log Σ_c w̄_c ∫ p(y*|f*) p(f*|f_c) df*."""
    D = model.num_latents
    A, cov = _conditional(model, params, X, prior, Xs)
    means = (f @ A).reshape(f.shape[0], Xs.shape[0], D)
    rule = cubature.make_rule("gauss_hermite", 20, D)
    lik = model.likelihood
    per = jax.vmap(lambda m: jax.vmap(lambda y_, mi, Ci: lik.log_predictive(
        params["likelihood"], y_, mi, Ci, rule))(ys, m, cov))(means)          # (C, Ns)
    logw_bar = logw - logsumexp(logw)
    return jnp.mean(logsumexp(logw_bar[:, None] + per, axis=0))


def ais_chunks(model, settings, with_test, params, keys, X, y, Xs, ys, devices) -> dict:
    """AIS at a batch of chunks of grid points: ``params`` (stacked hyperparameters) and
    ``keys`` have leading axes (chunks, points per chunk); the points of a chunk are
    vmapped, the chunks split over ``devices`` (``studies.devices.sharded``), so a
    point's result does not depend on the grouping (to rounding). Numpy arrays out."""
    from .devices import local_devices, sharded
    T, C, S, M = settings

    def one(p, k, X, y, Xs, ys):
        return _ais_point(model, p, X, y, k, Xs if with_test else None, ys, T, C, S, M)

    chunk = jax.vmap(one, in_axes=(0, 0, None, None, None, None))
    run = sharded(chunk, local_devices(devices), 2, ("ais", model.structure_key(), settings, with_test))
    return jax.tree_util.tree_map(np.asarray, run(params, keys, X, y, Xs, ys))


def _validate(num_temps, num_chains, steps_per_temp, max_shrinks):
    for name, v, lo in (("num_temps", num_temps, 1), ("num_chains", num_chains, 2),
                        ("steps_per_temp", steps_per_temp, 1), ("max_shrinks", max_shrinks, 1)):
        if int(v) != v or v < lo:
            raise ValueError(f"{name} must be an integer ≥ {lo}, got {v}")


#: the most latent values (points × latents) AIS samples: its state is dense in them
MAX_POINTS = 5000


def exact_model(model, params_list):
    """The model AIS samples: the exact posterior of the model's prior and likelihood.
    A Markov GP's prior is its kernel's full GP (the state-space form of the same
    covariance) and a sparse GP approximates that full GP, so both are sampled as
    ``bnlab.GP`` with the same kernels and likelihood (inducing inputs dropped); the
    gold standard of a sparse surface is then the exact model's evidence."""
    from ..model import GP
    if getattr(model, "structure", None) == "full":
        return model, params_list
    if not hasattr(model, "kernels"):
        raise ValueError(f"AIS needs a bnlab GP model, got {type(model).__name__}")
    exact = GP(list(model.kernels), model.likelihood)
    return exact, [{"kernel": p["kernel"], "likelihood": p["likelihood"]} for p in params_list]


def posterior_key(model, X, y, params=None) -> str:
    """A fingerprint of the posterior that ``ais`` samples for these arguments: the data,
    the exact model (``exact_model``: a sparse or Markov GP's full GP) and its
    hyperparameters (``params``, default the model's). Equal keys mean the same exact
    posterior whatever the approximate method and its settings, so a view keeps its
    MCMC reference while only those change. The sampler's settings are not part of it:
    ``ais`` caches each schedule on disk under its own key."""
    from ..inference import validate_data
    params = model.init_params() if params is None else params
    model, (params,) = exact_model(model, [params])
    X, y = validate_data(model, X, y)
    return cache.make_key([np.asarray(X), np.asarray(y), repr(model.structure_key())], params)


def ais_grid(model, X, y, params_list, *, X_test=None, y_test=None, num_temps=1000,
             num_chains=16, steps_per_temp=1, max_shrinks=50, seed=0, chunk_size=7,
             use_cache=True, keep_samples=False, progress=None, cancel=None, devices=None,
             pool=None):
    """AIS at every θ of ``params_list`` (hyperparameter dicts), vmapped over chunks of
    grid points, reading and writing the disk cache per point. Chunks run side by side
    on ``devices`` (default every local one; ``ais_chunks``), or as tasks of ``pool``
    (a Dask pool of ``bnlab.surface``); each point's random key comes from its own
    cache key, so results do not depend on either (to rounding). Returns (dict of arrays over points:
    log_z, log_z_se, lpd, mean_shrinks, capped_fraction, num_temps
    [, samples, log_weights]), cancelled)."""
    _validate(num_temps, num_chains, steps_per_temp, max_shrinks)
    model, params_list = exact_model(model, params_list)
    from ..inference import validate_data
    X, y = validate_data(model, X, y)
    if X.shape[0] * model.num_latents > MAX_POINTS:
        raise ValueError(f"AIS works with the dense prior covariance of every training "
                         f"latent; {X.shape[0]} points × {model.num_latents} latent(s) is "
                         f"above its limit of {MAX_POINTS} (memory grows as n², set-up as n³)")
    check_ais_memory(X.shape[0] * model.num_latents, int(num_temps), int(num_chains),
                     min(int(chunk_size), len(params_list)))
    with_test = X_test is not None and y_test is not None
    Xs, ys = (validate_data(model, X_test, y_test) if with_test
              else (jnp.zeros((1, X.shape[1])), jnp.zeros(1)))
    settings = (int(num_temps), int(num_chains), int(steps_per_temp), int(max_shrinks))
    P = len(params_list)
    fields = ("log_z", "log_z_se", "lpd", "mean_shrinks", "capped_fraction")
    out = {k: np.full(P, np.nan) for k in fields}
    out["num_temps"] = np.full(P, settings[0])
    samples = [None] * P
    base = [np.asarray(X), np.asarray(y), repr(model.structure_key()), list(settings), seed,
            [np.asarray(Xs), np.asarray(ys)] if with_test else None, AIS_VERSION]
    keys = [cache.make_key(base, jax.tree_util.tree_map(np.asarray, p)) for p in params_list]
    C, n = settings[1], X.shape[0] * model.num_latents
    layout = {**{f: ((), float) for f in fields}, "log_weights": ((C,), float),
              "samples": ((C, n), float)}
    todo = []
    for i, k in enumerate(keys):
        hit = cache.load("ais", k, expect=layout) if use_cache else None
        if hit is None:
            todo.append(i)
            continue
        for f in fields:
            out[f][i] = hit[f]
        samples[i] = hit
        if progress:
            progress()
    from .devices import local_devices, pad_to
    from .surface_blocks import Block, ThreadPool, padded, run_blocks
    own_pool = pool is None
    pool = ThreadPool(1) if own_pool else pool
    remote = hasattr(pool, "client")            # a Dask pool: each task on one device
    devs = 1 if remote else local_devices(devices)
    batch = 1 if remote else len(devs)
    chunks = [Block(np.asarray(todo[s:s + chunk_size]), -1, -1)
              for s in range(0, len(todo), chunk_size)]
    shared = pool.share((model, settings, with_test))

    def task(group):
        group = pad_to(group, batch)
        idx = [padded(b.points, chunk_size).tolist() for b in group]
        stacked = jax.tree_util.tree_map(lambda *a: np.stack(a),
                                         *[params_list[i] for c in idx for i in c])
        stacked = jax.tree_util.tree_map(lambda a: a.reshape((len(group), chunk_size) + a.shape[1:]),
                                         stacked)
        rng = np.stack([np.asarray(jax.random.fold_in(jax.random.PRNGKey(seed), int(keys[i][:7], 16)))
                        for c in idx for i in c]).reshape(len(group), chunk_size, -1)
        return _ais_chunks_shared, (shared, stacked, rng, np.asarray(X), np.asarray(y),
                                    np.asarray(Xs), np.asarray(ys), devs)

    def store(group, res):
        for g, block in enumerate(group):
            for j, i in enumerate(block.points.tolist()):
                point = {k: v[g, j] for k, v in res.items()}
                for f in fields:
                    out[f][i] = point[f]
                samples[i] = point
                if use_cache:
                    cache.store("ais", keys[i], point)
                if progress:
                    progress()

    try:
        cancelled = run_blocks(chunks, task, store, pool=pool, batch=batch,
                               cancelled=cancel if cancel is not None else (lambda: False))
    finally:
        if own_pool:
            pool.close()
    return _finish(out, samples, keep_samples), cancelled


def _ais_chunks_shared(shared, params, keys, X, y, Xs, ys, devices):
    model, settings, with_test = shared
    return ais_chunks(model, settings, with_test, params, keys, X, y, Xs, ys, devices)


def _finish(out, samples, keep_samples):
    if keep_samples:
        out["samples"] = [None if s is None else s["samples"] for s in samples]
        out["log_weights"] = [None if s is None else s["log_weights"] for s in samples]
    return out


def ais(model, X, y, params=None, *, X_test=None, y_test=None, num_temps=1000,
        num_chains=16, steps_per_temp=1, max_shrinks=50, seed=0, use_cache=True) -> AISResult:
    """AIS estimate of log p(y|θ) at one θ (``params``, default the model's), with its
    standard error and weighted posterior samples of f (cached on disk)."""
    params = model.init_params() if params is None else params
    out, _ = ais_grid(model, X, y, [params], X_test=X_test, y_test=y_test,
                      num_temps=num_temps, num_chains=num_chains,
                      steps_per_temp=steps_per_temp, max_shrinks=max_shrinks, seed=seed,
                      chunk_size=1, use_cache=use_cache, keep_samples=True)
    return AISResult(float(out["log_z"][0]), float(out["log_z_se"][0]), out["log_weights"][0],
                     out["samples"][0], float(out["lpd"][0]), float(out["mean_shrinks"][0]),
                     float(out["capped_fraction"][0]),
                     effective_sample_size(out["log_weights"][0]))
