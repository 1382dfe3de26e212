"""The MCMC gold standard: log p(y | θ) at fixed hyperparameters as an interval,
bidirectional Monte Carlo (BDMC; Grosse, Ghahramani & Adams 2015) with elliptical
slice sampling on the exact model (the kernels, pure and vmappable, are in
``bnlab.studies.ais_kernel``, which states the maths).

- forward annealed importance sampling (AIS; Neal 2001, after Li, John & Solin 2023,
  App. B), annealed from EP's Gaussian posterior (``start``; Laplace's or the prior's
  on request, ``ais_start``): ``log_z`` (= ``log_z_lower``), a stochastic lower bound
  on log p(y);
- reverse AIS from posterior samples: ``log_z_upper``, a stochastic upper bound. The
  posterior samples are *not exact* for a non-conjugate likelihood: they are the
  forward chains' final states resampled by weight and moved ``posterior_steps``
  ESS transitions at β = 1, whose split-R̂ and bulk ESS (``chain_diagnostics``,
  ArviZ's definitions) are reported with them.

The weights' log-mean is combined by the log of the *arithmetic* mean (as GPML's
``infMCMC`` does), with the delta-method standard error sd(w) / (√C · mean(w)), which
describes the weights' spread and not the estimator's bias; the gap between the bounds
does bound the bias. The reference counts as ``converged`` when the interval
[lower − 2 se, upper + 2 se] (``AISResult.interval``) is narrower than a tolerance
(default ``GAP_TOLERANCE`` nats in total), and ``bdmc`` lengthens the schedule until it
is or a budget ends.

Results are cached on disk (``bnlab._runtime.disk_cache``) keyed by data, model, θ, the
schedule (temperatures, chains, moves, β = 1 steps), the direction (forward only or
bidirectional), the start, the seed and ``AIS_VERSION``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._runtime import disk_cache as cache
from .ais_kernel import bdmc_point, ess_step
from .ais_start import STARTED_FROM, STARTS, start_sites
from .chain_diagnostics import summary as chain_summary
from .work_limits import AIS_CHUNK, ais_memory, check_ais_memory

__all__ = ["AISResult", "ais", "ais_grid", "bdmc", "bdmc_grid", "ess_step", "effective_sample_size",
           "posterior_key", "GAP_TOLERANCE", "ais_points_per_program"]

#: part of every cache key: raise it whenever the sampler's output for the same inputs
#: changes, so that entries written by the old sampler are never served
AIS_VERSION = 3

#: the reference is converged when its interval (``AISResult.interval``) is narrower
#: than this (nats, in total)
GAP_TOLERANCE = 0.05
#: directions ``ais`` runs: forward AIS only, or forward and reverse (BDMC)
DIRECTIONS = ("forward", "bidirectional")


class AISResult(NamedTuple):
    log_z: float                 # forward AIS: log of the mean weight (a stochastic lower bound)
    log_z_se: float              # delta-method standard error of log_z
    log_weights: np.ndarray      # (C,) per-chain forward log weights (log_z = log Z₀ + their log-mean)
    samples: np.ndarray          # (C, N·D) forward final states: posterior samples of f, weighted
    log_predictive: float        # mean test log predictive density (NaN without a test set)
    mean_shrinks: float          # average number of ESS shrinks per transition
    capped_fraction: float       # fraction of ESS transitions that hit the shrink cap
    ess: float = float("nan")    # effective sample size of the forward weights (Kong 1992)
    log_z_upper: float = float("nan")      # reverse AIS: a stochastic upper bound
    log_z_upper_se: float = float("nan")   # its delta-method standard error
    log_weights_reverse: np.ndarray | None = None   # (C,) reverse log weights (of 1/Z)
    posterior_samples: np.ndarray | None = None     # (C, N·D) β = 1 chains' final states, equal weights
    rhat: float = float("nan")             # worst rank-normalised split-R̂ of the β = 1 chains
    bulk_ess: float = float("nan")         # smallest bulk ESS of the β = 1 chains
    ess_upper: float = float("nan")        # Kong's ESS of the reverse weights
    tolerance: float = GAP_TOLERANCE       # the interval width below which it is converged
    num_temps: int = 0
    num_chains: int = 0
    start: str = "prior"                   # where the annealing started (``ais_start``)

    @property
    def started_from(self) -> str:
        """Where the annealing started, in words."""
        return STARTED_FROM[self.start]

    @property
    def log_z_lower(self) -> float:
        return self.log_z

    @property
    def log_z_lower_se(self) -> float:
        return self.log_z_se

    @property
    def gap(self) -> float:
        """log_z_upper − log_z_lower: the width of the sandwich (NaN if forward only)."""
        return self.log_z_upper - self.log_z

    @property
    def interval(self) -> tuple[float, float]:
        """Where log p(y) lies by this run: [lower − 2 se_lower, upper + 2 se_upper]
        (each bound's bias one-sided, its noise to two standard errors)."""
        return (self.log_z - 2 * self.log_z_se, self.log_z_upper + 2 * self.log_z_upper_se)

    @property
    def converged(self) -> bool:
        """Whether the interval is narrower than ``tolerance``: both the bias (the gap)
        and the noise (the standard errors) resolved."""
        lo, hi = self.interval
        return bool(np.isfinite(hi - lo) and hi - lo < self.tolerance)


def effective_sample_size(log_weights) -> float:
    """Kong's (1992) effective sample size (Σ w)² / Σ w² of importance weights: how
    many equally weighted draws the weighted chains are worth. Few (one chain carrying
    most of the weight) means log Ẑ and its delta-method standard error, which assume
    the weights' spread is seen, are not to be trusted."""
    lw = np.asarray(log_weights, float)
    w = np.exp(lw - lw.max())
    return float(w.sum() ** 2 / (w ** 2).sum())


def ais_chunks(model, settings, with_test, params, sites, keys, X, y, Xs, ys, devices) -> dict:
    """AIS at a batch of chunks of grid points: ``params`` (stacked hyperparameters),
    ``sites`` (the starts' (W, b), ``ais_start``) and ``keys`` have leading axes
    (chunks, points per chunk); the points of a chunk are
    vmapped, the chunks split over ``devices`` (``studies.devices.sharded``), so a
    point's result does not depend on the grouping (to rounding); the program is
    called through its stored ``jax.export`` (its key, the model's structure key and
    the static settings, describes it completely). Numpy arrays out."""
    from .devices import local_devices, sharded

    T, static = settings[0], settings[1:]       # one compiled program for every T

    def one(p, s, k, X, y, Xs, ys, T):
        return bdmc_point(model, p, s, X, y, k, Xs if with_test else None, ys, T, static)

    chunk = jax.vmap(one, in_axes=(0, 0, 0, None, None, None, None, None))
    run = sharded(chunk, local_devices(devices), 3, ("ais", model.structure_key(), static, with_test),
                  export=True)
    return jax.tree_util.tree_map(np.asarray, run(params, sites, keys, X, y, Xs, ys, np.int32(T)))


def _validate(num_temps, num_chains, steps_per_temp, max_shrinks, posterior_steps, direction,
              tolerance=GAP_TOLERANCE, start="ep"):
    for name, v, lo in (("num_temps", num_temps, 1), ("num_chains", num_chains, 2),
                        ("steps_per_temp", steps_per_temp, 1), ("max_shrinks", max_shrinks, 1),
                        ("posterior_steps", posterior_steps, 4)):
        if isinstance(v, bool) or int(v) != v or v < lo:
            raise ValueError(f"{name} must be an integer ≥ {lo}, got {v}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, got {start!r}")
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance must be a positive number of nats, got {tolerance}")


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
    from ..infer import validate_data
    params = model.init_params() if params is None else params
    model, (params,) = exact_model(model, [params])
    X, y = validate_data(model, X, y)
    return cache.make_key([np.asarray(X), np.asarray(y), repr(model.structure_key())], params)


#: a point's scalar results, and its per-chain arrays (``ais_grid``)
SCALARS = ("log_z", "log_z_se", "log_z_upper", "log_z_upper_se", "lpd", "mean_shrinks",
           "capped_fraction", "rhat", "bulk_ess")
PER_CHAIN = ("log_weights", "log_weights_reverse", "samples", "posterior_samples")


def ais_grid(model, X, y, params_list, *, X_test=None, y_test=None, num_temps=1000,
             num_chains=16, steps_per_temp=1, max_shrinks=50, posterior_steps=100,
             direction="bidirectional", start="ep", seed=0, chunk_size=AIS_CHUNK,
             use_cache=True, keep_samples=False, progress=None, cancel=None, devices=None,
             pool=None):
    """BDMC (or forward AIS only, ``direction="forward"``) at every θ of ``params_list``
    (hyperparameter dicts), vmapped over chunks of grid points, reading and writing the
    disk cache per point. Chunks run side by side on ``devices`` (default every local
    one; ``ais_chunks``), or as tasks of ``pool`` (a Dask pool of ``bnlab.surface``);
    each point's random key comes from its own cache key, so results do not depend on
    either (to rounding). ``chunk_size``: grid points per program (each point's chains
    vmapped inside it), or "memory": as many as fit in one device's memory budget
    (``ais_points_per_program``), so that on an accelerator grid points × chains are
    one batch. ``posterior_steps``: ESS transitions at β = 1 between the
    passes (the chains behind the posterior samples and the reverse start). ``start``:
    anneal from EP's posterior (default), Laplace's, or the prior (``ais_start``;
    ``start_used`` says per point which one it was). Returns
    (dict of arrays over points: ``SCALARS``, ess, ess_upper, num_temps [, the
    ``PER_CHAIN`` arrays as lists]), cancelled)."""
    _validate(num_temps, num_chains, steps_per_temp, max_shrinks, posterior_steps, direction,
              start=start)
    model, params_list = exact_model(model, params_list)
    from ..infer import validate_data
    X, y = validate_data(model, X, y)
    if X.shape[0] * model.num_latents > MAX_POINTS:
        raise ValueError(f"AIS works with the dense prior covariance of every training "
                         f"latent; {X.shape[0]} points × {model.num_latents} latent(s) is "
                         f"above its limit of {MAX_POINTS} (memory grows as n², set-up as n³)")
    from .devices import local_devices, pad_to
    own_pool = pool is None
    remote = not own_pool and hasattr(pool, "client")   # a Dask pool: a task per device
    devs = 1 if remote else local_devices(devices)
    if chunk_size == "memory":   # the points spread evenly, or as many as fit
        spread = pool.slots if remote else len(devs)
        chunk_size = max(1, min(-(-len(params_list) // spread), ais_points_per_program(
            X.shape[0] * model.num_latents, int(num_temps), int(num_chains),
            int(posterior_steps), jax.devices("cpu")[:1] if remote else devs)))
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer or 'memory', got {chunk_size!r}")
    check_ais_memory(X.shape[0] * model.num_latents, int(num_temps), int(num_chains),
                     min(int(chunk_size), len(params_list)))
    with_test = X_test is not None and y_test is not None
    Xs, ys = (validate_data(model, X_test, y_test) if with_test
              else (jnp.zeros((1, X.shape[1])), jnp.zeros(1)))
    settings = (int(num_temps), int(num_chains), int(steps_per_temp), int(max_shrinks),
                int(posterior_steps), direction)
    P = len(params_list)
    out = {k: np.full(P, np.nan) for k in SCALARS + ("ess", "ess_upper")}
    out["num_temps"] = np.full(P, settings[0])
    out["start_used"] = np.full(P, "", dtype=object)
    points = [None] * P
    base = [np.asarray(X), np.asarray(y), repr(model.structure_key()), list(settings), start, seed,
            [np.asarray(Xs), np.asarray(ys)] if with_test else None, AIS_VERSION]
    keys = [cache.make_key(base, jax.tree_util.tree_map(np.asarray, p)) for p in params_list]
    C, n = settings[1], X.shape[0] * model.num_latents
    layout = {**{f: ((), float) for f in SCALARS + ("start_code",)}, "log_weights": ((C,), float),
              "log_weights_reverse": ((C,), float), "samples": ((C, n), float),
              "posterior_samples": ((C, n), float)}

    def keep(i, point):
        for f in SCALARS:
            out[f][i] = point[f]
        out["ess"][i] = effective_sample_size(point["log_weights"])
        out["ess_upper"][i] = effective_sample_size(point["log_weights_reverse"])
        out["start_used"][i] = STARTS[int(point["start_code"])]
        points[i] = point
        if progress:
            progress()

    todo = []
    for i, k in enumerate(keys):
        hit = cache.load("ais", k, expect=layout) if use_cache else None
        if hit is None:
            todo.append(i)
        else:
            keep(i, hit)
    from .surfaces.blocks import Block, ThreadPool, padded, run_blocks
    pool = ThreadPool(1) if own_pool else pool
    batch = 1 if remote else len(devs)
    chunks = [Block(np.asarray(todo[s:s + chunk_size]), -1, -1)
              for s in range(0, len(todo), chunk_size)]
    shared = pool.share((model, settings, with_test))
    starts = {}

    def starting(i):
        """The start's sites at point i (``ais_start.start_sites``), computed once."""
        if i not in starts:
            starts[i] = start_sites(model, X, y, params_list[i], start)
        return starts[i]

    def task(group):
        group = pad_to(group, batch)
        idx = [padded(b.points, chunk_size).tolist() for b in group]
        stacked = jax.tree_util.tree_map(lambda *a: np.stack(a),
                                         *[params_list[i] for c in idx for i in c])
        stacked = jax.tree_util.tree_map(lambda a: a.reshape((len(group), chunk_size) + a.shape[1:]),
                                         stacked)
        rng = np.stack([np.asarray(jax.random.fold_in(jax.random.PRNGKey(seed), int(keys[i][:7], 16)))
                        for c in idx for i in c]).reshape(len(group), chunk_size, -1)
        picked = [starting(i) for c in idx for i in c]
        sites = tuple(np.stack([s[j] for s in picked]).reshape((len(group), chunk_size)
                                                              + picked[0][j].shape)
                      for j in range(2))
        return _ais_chunks_shared, (shared, stacked, sites, rng, np.asarray(X), np.asarray(y),
                                    np.asarray(Xs), np.asarray(ys), devs)

    def store(group, res):
        for g, block in enumerate(group):
            for j, i in enumerate(block.points.tolist()):
                point = {k: v[g, j] for k, v in res.items()}
                point["rhat"], point["bulk_ess"] = chain_summary(point.pop("trace"))
                point["start_code"] = float(STARTS.index(starts[i][2]))
                if use_cache:
                    cache.store("ais", keys[i], point)
                keep(i, point)

    try:
        cancelled = run_blocks(chunks, task, store, pool=pool, batch=batch,
                               cancelled=cancel if cancel is not None else (lambda: False))
    finally:
        if own_pool:
            pool.close()
    if keep_samples:
        out.update({f: [None if p is None else p[f] for p in points] for f in PER_CHAIN})
    return out, cancelled


def ais_point_bytes(latent_values, num_temps, num_chains, posterior_steps) -> int:
    """Bytes one grid point holds in a vmapped AIS program: ``work_limits.ais_memory``'s
    prior factor, chains and schedule, and the β = 1 chains' states kept along their
    ``posterior_steps`` moves (``ais_kernel._moves``, for the chain diagnostics)."""
    return int(ais_memory(latent_values, num_temps, num_chains, 1)
               + 8 * posterior_steps * num_chains * latent_values)


def ais_points_per_program(latent_values, num_temps, num_chains, posterior_steps,
                           devices) -> int:
    """Grid points one AIS program may hold on each of ``devices``: the smallest
    device budget (``batched.free_bytes``: a share of an accelerator's free memory, a
    fixed budget on a CPU) over ``ais_point_bytes``; at least 1."""
    from .surfaces.batched import free_bytes
    per_point = ais_point_bytes(latent_values, num_temps, num_chains, posterior_steps)
    return max(1, min(free_bytes(d) for d in devices) // per_point)


def _ais_chunks_shared(shared, params, sites, keys, X, y, Xs, ys, devices):
    model, settings, with_test = shared
    return ais_chunks(model, settings, with_test, params, sites, keys, X, y, Xs, ys, devices)


def ais(model, X, y, params=None, *, X_test=None, y_test=None, num_temps=1000,
        num_chains=16, steps_per_temp=1, max_shrinks=50, posterior_steps=100,
        direction="bidirectional", start="ep", tolerance=GAP_TOLERANCE, seed=0,
        use_cache=True) -> AISResult:
    """BDMC at one θ (``params``, default the model's): forward AIS's stochastic lower
    bound on log p(y|θ) and (``direction="bidirectional"``) reverse AIS's upper bound
    from approximate posterior samples (module docstring), their standard errors, the
    weighted forward samples of f and the β = 1 chains' samples with their split-R̂
    and bulk ESS (cached on disk). ``tolerance``: the width of the interval below which
    the result is ``converged``. ``start``: as ``ais_grid``'s."""
    _validate(num_temps, num_chains, steps_per_temp, max_shrinks, posterior_steps, direction,
              tolerance, start)
    params = model.init_params() if params is None else params
    out, _ = ais_grid(model, X, y, [params], X_test=X_test, y_test=y_test,
                      num_temps=num_temps, num_chains=num_chains,
                      steps_per_temp=steps_per_temp, max_shrinks=max_shrinks,
                      posterior_steps=posterior_steps, direction=direction, start=start,
                      seed=seed, chunk_size=1, use_cache=use_cache, keep_samples=True)
    one = {k: (v[0] if k in PER_CHAIN + ("start_used",) else float(v[0])) for k, v in out.items()}
    return AISResult(one["log_z"], one["log_z_se"], one["log_weights"], one["samples"],
                     one["lpd"], one["mean_shrinks"], one["capped_fraction"], one["ess"],
                     one["log_z_upper"], one["log_z_upper_se"], one["log_weights_reverse"],
                     one["posterior_samples"], one["rhat"], one["bulk_ess"], one["ess_upper"],
                     float(tolerance), int(num_temps), int(num_chains), one["start_used"])


def _check_refinement(num_temps, max_temps, refine, max_seconds):
    if isinstance(refine, bool) or int(refine) != refine or refine < 2:
        raise ValueError(f"refine must be an integer ≥ 2, got {refine}")
    if isinstance(max_temps, bool) or int(max_temps) != max_temps or max_temps < num_temps:
        raise ValueError(f"max_temps must be an integer ≥ num_temps ({num_temps}), "
                         f"got {max_temps}")
    if max_seconds is not None and not max_seconds > 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds}")


def bdmc(model, X, y, params=None, *, tolerance=GAP_TOLERANCE, num_temps=1000,
         max_temps=16_000, refine=4, num_chains=16, max_seconds=None, **options) -> AISResult:
    """BDMC lengthened until it converges: ``ais`` with ``num_temps`` temperatures, then
    ``refine`` times as many, until the interval is narrower than ``tolerance``
    (``AISResult.converged``), or ``max_temps`` is
    reached, or the next run (predicted as ``refine`` times the last one's time) would
    end past ``max_seconds``. AIS's bias falls roughly as 1 / temperatures (Neal 2001,
    §4), so more temperatures narrow the sandwich (and, the weights less spread, the
    standard errors); more chains shrink only the standard errors. Returns the last run
    (its ``num_temps`` and ``converged`` say where the refinement stopped). Runs
    already cached cost nothing."""
    _check_refinement(num_temps, max_temps, refine, max_seconds)
    start = time.perf_counter()
    temps = int(num_temps)
    while True:
        began = time.perf_counter()
        res = ais(model, X, y, params, tolerance=tolerance, num_temps=temps,
                  num_chains=num_chains, direction="bidirectional", **options)
        took = time.perf_counter() - began
        if res.converged or temps >= max_temps:
            return res
        if max_seconds is not None and time.perf_counter() - start + refine * took > max_seconds:
            return res
        temps = min(temps * int(refine), int(max_temps))


def bdmc_grid(model, X, y, params_list, *, tolerance=GAP_TOLERANCE, num_temps=1000,
              max_temps=None, refine=4, max_seconds=None, progress=None, cancel=None,
              **options):
    """``ais_grid`` (bidirectional) at every θ, then again at ``refine`` times the
    temperatures at the points whose interval is still wider than ``tolerance``, until
    every point is resolved, or ``max_temps`` (default: ``num_temps``, no refinement)
    is reached, or the next pass (predicted as ``refine`` times the last one's time)
    would end past ``max_seconds``. Each point keeps its last run: ``num_temps`` says
    its schedule and ``converged`` its verdict. ``progress`` is called per point of
    the first pass only. Returns (dict as ``ais_grid``'s plus ``converged``,
    cancelled)."""
    max_temps = num_temps if max_temps is None else max_temps
    _check_refinement(num_temps, max_temps, refine, max_seconds)
    _validate(num_temps, 2, 1, 1, 4, "bidirectional", tolerance)
    start, temps = time.perf_counter(), int(num_temps)
    todo, out = np.arange(len(params_list)), None
    while True:
        began = time.perf_counter()
        part, cancelled = ais_grid(model, X, y, [params_list[i] for i in todo], num_temps=temps,
                                   direction="bidirectional", cancel=cancel,
                                   progress=progress if out is None else None, **options)
        took = time.perf_counter() - began
        if out is None:
            out = part
        else:
            for k, v in part.items():
                if isinstance(out[k], list):
                    for j, i in enumerate(todo):
                        out[k][i] = v[j]
                else:
                    out[k][todo] = v
        width = ((out["log_z_upper"] + 2 * out["log_z_upper_se"])
                 - (out["log_z"] - 2 * out["log_z_se"]))
        out["converged"] = np.isfinite(width) & (width < tolerance)
        todo = np.flatnonzero(~out["converged"] & np.isfinite(out["log_z"]))
        if cancelled or not todo.size or temps >= max_temps:
            return out, cancelled
        if max_seconds is not None and time.perf_counter() - start + refine * took > max_seconds:
            return out, cancelled
        temps = min(temps * int(refine), int(max_temps))
