"""Approximate log marginal likelihood surfaces over a grid of two hyperparameters.

At every grid point θ the hyperparameters are fixed and each method is run to
convergence; the surface records its energy (its approximation of log p(y|θ)) — as in
Li, John & Solin (2023, §5.1, Fig. 2), where the grid is 21 × 21 over (log ℓ, log σ)
and the values are divided by n.

Batching (``batching="scan"``, the default on CPUs): the points of a chunk run inside
one compiled program — ``lax.scan`` over ``Engine.run_pure`` (why not ``vmap`` on a
CPU: see ``_solver``) — compiled once per method;
independent chunks (default: one grid row each) run at the same time: batched over
every local JAX device (``studies.devices``) from a pool of ``workers`` threads, or as
tasks of a Dask cluster (``studies.dask_blocks``) (``surface_blocks`` schedules them),
so memory holds one point's N × N matrices per block in flight, and progress is
reported, cancellation checked and finished blocks stored (``studies.store``) between
chunks. ``batching="vmap"`` (the default on accelerators) solves many points in one
program instead: the engine's step vmapped over them inside one ``while_loop``, each
point frozen once done (``studies.batched``); the blocks, their order, the store,
cancel, progress (per batch of blocks) and Dask tasks are the same.

Warm start (default): the first grid column is walked top to bottom, then every row
(rows = the *first* grid axis) from its first point: each point starts from the
converged sites of the point before it in its row, a row's first point from the first
point of the row above (the very first point starts cold, from ``sites.init_sites``). Warm starting changes the path, not the fixed point, so
converged values agree with ``bnlab.infer`` to the convergence tolerance; a point whose
warm run diverges is re-run cold. With ``warm_start=False`` every point is exactly
``bnlab.infer(model, X, y, method, params=θ, ...)``.

The VI and EP-like surfaces share one run: 'ep_like' is the VI site iteration scored
by the EP energy (Li et al. 2023, eq. 11), so both energies are read off the same
converged sites. 'mcmc' is annealed importance sampling (``bnlab.studies.mcmc``).
"""
from __future__ import annotations

import threading
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from .._runtime import exported
from .._runtime.compiled import CompiledCache
from ..engine.energies import energy as compute_energy
from ..engine.loop import get_engine, trace_length
from ..engine.state import Settings
from ..infer import infer, prepare_problem, validate_data, validate_settings
from ..methods.registry import DIRECT, REGISTRY, check_method_name
from ..sites import Sites, init_sites
from .batched import points_per_program, solve_groups, state_bytes
from .devices import local_devices, pad_to, sharded
from .work_limits import check_surface_size
from .surface_blocks import ThreadPool, default_workers, for_runs, padded, plan_blocks, run_blocks

__all__ = ["surface", "grid_axes", "point_params", "LIKELIHOOD_AXES"]

LIKELIHOOD_AXES = ("noise", "df", "scale")
SETTING_AXES = ("alpha",)


def grid_axes(model, grid) -> list[tuple[str, np.ndarray]]:
    """Validate ``grid`` (a dict of exactly two hyperparameter names → 1-D values) and
    return it as [(name, float array), (name, float array)]."""
    if not isinstance(grid, dict):
        raise ValueError(f"grid must be a dict of two hyperparameter names to values, got {type(grid).__name__}")
    if len(grid) != 2:
        raise ValueError(f"grid must have exactly two axes, got {len(grid)}: {list(grid)}")
    kernels = model.init_params()["kernel"]
    known = {k for kp in kernels for k in kp}
    if len(kernels) > 1:          # one latent's kernel: the names ``bnlab.studies.learning`` uses
        known |= {f"{k}_{i}" for i, kp in enumerate(kernels) for k in kp}
    known |= set(model.likelihood.init_params()) | set(SETTING_AXES)
    axes = []
    for name, values in grid.items():
        if name not in known:
            raise ValueError(f"unknown grid parameter {name!r} for {model!r}; "
                             f"choose from {sorted(known)}")
        try:
            v = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"grid axis {name!r} must hold numbers, got {values!r}") from None
        if v.ndim != 1 or v.size == 0:
            raise ValueError(f"grid axis {name!r} must be a non-empty 1-D array, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"grid axis {name!r} has NaN or infinite values")
        if np.any(v <= 0):
            raise ValueError(f"grid axis {name!r} must be positive (it is a scale, variance or "
                             f"power), got minimum {v.min()}")
        if name == "alpha" and np.any(v > 1):
            raise ValueError(f"grid axis 'alpha' (Power-EP power) must lie in (0, 1], got max {v.max()}")
        axes.append((name, v))
    if axes[0][0] == axes[1][0]:
        raise ValueError(f"the two grid axes must differ, got {axes[0][0]!r} twice")
    return axes


def point_params(base, names, theta):
    """``base`` hyperparameters with the grid names set to ``theta`` (traceable).
    A kernel name applies to every latent's kernel, "name_i" (several latents) to
    latent i's only; an ARD lengthscale becomes isotropic."""
    kernels = [dict(kp) for kp in base["kernel"]]
    lik = dict(base["likelihood"])
    for name, value in zip(names, theta):
        for i, kp in enumerate(kernels):
            key = name.removesuffix(f"_{i}") if len(kernels) > 1 else name
            if key in kp:
                kp[key] = jnp.broadcast_to(value, jnp.shape(kp[key])).astype(float)
        if name in lik:
            lik[name] = jnp.asarray(value, float)
    return {"kernel": kernels, "likelihood": lik}


def _point_alpha(names, theta, alpha):
    for name, value in zip(names, theta):
        if name == "alpha":
            return value
    return alpha


# ---- one compiled block solver per (engine, extra energies, grid names, sizes) -------
_SOLVERS = CompiledCache(maxsize=16)


def _solver(engine, extra, names, max_iters, with_test, alpha_axis, devices):
    """The block program, compiled over ``devices`` (``studies.devices.sharded``: a
    leading axis of independent blocks split over them). A block runs the points of a chunk one after another with
    ``lax.scan``: each point starts from the last converged sites in the walk (warm) or
    from the initial sites (cold); a warm run that diverges is redone cold.

    Why a scan over ``run_pure`` rather than ``vmap``: on CPU the Cholesky and
    triangular solves are LAPACK calls made matrix by matrix even when batched, a
    vmapped ``while_loop`` runs every point for as many iterations as the slowest one,
    and the model's ``lax.cond`` (√W form vs signed √W form) becomes a ``select``
    that evaluates both branches — together several times the work. The scan keeps each point's
    cost equal to a single ``bnlab.infer`` call, compiled once per chunk length. On an
    accelerator those costs are small beside a kernel launch per matrix and step, and
    ``batching="vmap"`` (``studies.batched``) is the better form."""
    key = (engine, extra, names, trace_length(max_iters), with_test, alpha_axis)
    return sharded(_SOLVERS.get(key, lambda: _build_solver(*key)), devices, 4, key, export=True)


def _build_solver(engine, extra, names, length, with_test, alpha_axis):

    def solve_point(theta, start, use_start, base, X, y, alpha, rho, tol, backtrack, accelerate,
                    max_iters, Xs, ys):
        params = point_params(base, names, theta)
        settings = Settings(_point_alpha(names, theta, alpha) if alpha_axis else alpha, rho, tol,
                            backtrack, accelerate)
        cold = init_sites(X.shape[0], engine.model.num_latents)

        def run(sites):
            return engine.run_pure(params, X, y, settings, max_iters, sites, length)

        def attempt(carry):          # 1st: warm (if any); 2nd, only after a diverged
            k, _ = carry               # warm run: cold. One run_pure in the program.
            warm = use_start & (k == 0)
            return k + 1, run(Sites(jnp.where(warm, start.nat1, cold.nat1),
                                    jnp.where(warm, start.prec, cold.prec)))

        def again(carry):
            k, result = carry
            return (k == 0) | ((k == 1) & use_start & result[4])

        blank = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype),
                                       jax.eval_shape(run, cold))
        _, (state, trace, n, converged, diverged) = jax.lax.while_loop(
            again, attempt, (jnp.asarray(0), blank))
        last = jnp.maximum(n - 1, 0)
        out = {"energy": state.energy, "iterations": n, "converged": converged,
               "diverged": diverged,
               "psd": trace.posterior_psd[last] & trace.cavity_psd[last],
               "nat1": state.sites.nat1, "prec": state.sites.prec}
        for kind in extra:
            out[kind] = compute_energy(kind, engine.lik, engine.rule, params["likelihood"], y,
                                       state.marginals, state.sites, 1.0)
        if with_test:
            out["lpd"] = jnp.mean(engine.log_predictive_pure(params, X, state, Xs, ys))
        return out

    def block(thetas, start_nat1, start_prec, start_ok, warm, *const):
        def body(carry, theta):
            nat1, prec, ok = carry
            out = solve_point(theta, Sites(nat1, prec), ok & warm, *const)
            good = out["converged"] & ~out["diverged"]
            carry = (jnp.where(good, out["nat1"], nat1), jnp.where(good, out["prec"], prec),
                     ok | good)
            return carry, out

        _, outs = jax.lax.scan(body, (start_nat1, start_prec, start_ok), thetas)
        return outs

    return block


def _is_cancelled(cancel):
    if cancel is None:
        return False
    if isinstance(cancel, threading.Event):
        return cancel.is_set()
    return bool(cancel())


def _site_groups(methods, damping, max_iters, log_concave):
    """Engine runs needed: 'vi' and 'ep_like' share the VI iteration when their damping
    and iteration limits agree and the likelihood is log-concave. The shared run is
    'ep_like', which rejects a step whose cavity is not PD (the EP energy needs every
    cavity); with log-concave likelihoods VI's site precisions are ≥ 0, so every cavity
    precision 1/C_nn − λ_n is positive and no VI step is ever rejected for it, but a
    non-log-concave one (Student-t) can make a cavity indefinite where VI itself goes on,
    so there the two run separately and each equals ``bnlab.infer``."""
    share = {"vi", "ep_like"} <= set(methods) and damping["vi"] == damping["ep_like"] \
        and max_iters["vi"] == max_iters["ep_like"] and log_concave
    groups = {}
    for m in methods:
        run = "ep_like" if share and m in ("vi", "ep_like") else m
        groups.setdefault(run, []).append(m)
    return groups


def _per_method(value, methods, name, default):
    """A scalar for every method, or a {method: value} dict (others get ``default``)."""
    if isinstance(value, dict):
        unknown = set(value) - set(methods)
        if unknown:
            raise ValueError(f"{name} names methods not in the surface: {sorted(unknown)}")
        return {m: value.get(m, default) for m in methods}
    return {m: value for m in methods}


def surface(model, X, y, methods=("laplace", "vi", "ep", "ep_like"), grid=None, *,
            X_test=None, y_test=None, params=None, alpha=1.0, damping=0.5, max_iters=200,
            tol=1e-8, backtracking=True, acceleration=True, cubature=("gauss_hermite", 20),
            warm_start=True, chunk_size=None, workers=None, devices=None, client=None,
            store=None, progress: Callable[[float], None] | None = None, cancel=None,
            method_options=None, mcmc_options=None, max_work=None, batching="auto",
            batch_points=None) -> xr.Dataset:
    """Evaluate each method's approximate log marginal likelihood on a 2-D grid.

    ``grid``: {name: values, name: values} over kernel hyperparameters (lengthscale,
    variance, period), likelihood ones (noise, df, scale) or the PEP power ``alpha``.
    ``methods``: any site method name, 'gkl' and 'mcmc'; ``alpha``, ``damping``,
    ``max_iters``, ``tol``, ``backtracking``, ``acceleration``, ``cubature`` mean what
    they mean in ``bnlab.infer``;
    ``damping`` and ``max_iters`` may also be {method: value} dicts (parallel EP at
    large signal variances needs stronger damping than VI).
    ``method_options``: {method: {option: value}} (e.g. G-KL covariance structure);
    ``mcmc_options``: keyword arguments of ``bnlab.studies.mcmc.ais`` (temperatures, chains,
    seed, direction, tolerance) and of ``bdmc_grid`` (max_temps, refine, max_seconds:
    unresolved cells rerun with longer schedules). With 'mcmc' the Dataset also holds BDMC's bounds per
    cell: ``mcmc_lower`` (forward AIS, = the 'mcmc' scheme), ``mcmc_upper`` (reverse
    AIS), their ``_se``, ``mcmc_gap``, the β = 1 chains' ``mcmc_rhat`` and
    ``mcmc_bulk_ess``; the 'mcmc' scheme's ``converged`` marks cells whose interval is
    narrower than ``attrs["mcmc_tolerance"]``.
    ``chunk_size``: grid points per compiled block (default: one grid row);
    ``devices``: the JAX devices that solve independent blocks side by side (default:
    every local one; a count takes the first ones), recorded in ``attrs["devices"]``;
    values agree with one device's to rounding (XLA compiles the partitioned program on
    its own; a warm-started walk carries a rounding difference along to within the
    convergence tolerance). ``workers``: threads each sending a batch of blocks to
    the devices at once (default: one per core and device on a CPU, one on a GPU).
    ``client``: a ``dask.distributed.Client``: site-method blocks and AIS grid points
    become tasks on its workers (G-KL stays in this process; a worker lost mid-run has
    its tasks recomputed elsewhere);
    ``attrs["workers"]`` records how many took part.
    ``batching``: how a site method's grid points share a compiled program. "scan":
    the points of a block one after another (``lax.scan``), blocks side by side on the
    devices and threads — the fast form on a CPU, where LAPACK factors matrix by
    matrix. "vmap": many points in one program, a ``while_loop`` stepping all of them
    at once, each frozen once converged or diverged (``bnlab.studies.batched``) — the
    form for an accelerator, where one batched kernel costs about what one matrix's
    does; with ``warm_start`` the rows advance side by side, each point warm-started
    as on the scan path, without it every point is independent; AIS ('mcmc') then
    vmaps as many grid points (each with its chains) per program as fit in memory
    (``mcmc.ais_grid``'s ``chunk_size="memory"``). "auto" (default):
    "vmap" where the devices are not CPUs, else "scan". Recorded in
    ``attrs["batching"]``. Both give the same values to the convergence tolerance and
    the same flags. ``batch_points``: with "vmap", grid points held by one program on
    each device (default: as many as fit in ``DEVICE_FRACTION`` of the device's free
    memory, or ``CPU_BYTES`` on a CPU; ``bnlab.studies.batched``); a larger grid is
    split into several programs, never refused.
    ``store``: a Zarr path: every finished site-method block is written there, and a
    rerun with the same arguments reads them back (``attrs["blocks_from_store"]``),
    computing only what is missing; other arguments are an error naming what differs
    (``bnlab.studies.store``). AIS results are kept per point in bnlab's disk cache.
    ``progress(fraction)`` is called after every chunk (with "vmap": every batch of
    chunks); ``cancel`` (a threading.Event
    or a callable returning True) stops between chunks, keeping finished values (NaN
    elsewhere) and setting ``attrs["cancelled"] = 1``.
    ``max_work``: the most work allowed (default ``work_limits.MAX_WORK``, about an hour
    on a 2-core CPU): a surface estimated above it, or above the available memory, is a
    ValueError stating the estimate before anything runs (``bnlab.studies.work_limits``).

    Returns an ``xarray.Dataset`` with dims (scheme, <axis 0>, <axis 1>) and variables
    log_marginal, log_marginal_per_n, log_marginal_se (MCMC only), log_predictive (when a
    test set is given), converged, diverged, psd, iterations. Where a method diverged,
    log_marginal holds the energy of its last valid iterate (the run stops there; a
    first step that diverged leaves the starting sites'): read it with ``diverged``
    (the lab draws no value there). The method dimension is
    called "scheme", not "method": ``Dataset.sel`` has a keyword argument ``method`` (the
    inexact-match rule), so ``surf.sel(method="ep")`` would silently select nothing and
    return every method; ``surf.sel(scheme="ep")`` selects EP.
    """
    if grid is None:
        raise ValueError("grid is required: a dict of two hyperparameter names to values")
    methods = list(methods)
    if not methods:
        raise ValueError("methods must name at least one method")
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods has duplicates: {methods}")
    damping = _per_method(damping, methods, "damping", 0.5)
    max_iters = _per_method(max_iters, methods, "max_iters", 200)
    for m in methods:
        if m == "mcmc":
            continue
        check_method_name(m)
        validate_settings(m, 1.0 if m == "ep" else alpha, damping[m], max_iters[m], tol)
    axes = grid_axes(model, grid)
    names = tuple(a[0] for a in axes)
    shape = (axes[0][1].size, axes[1][1].size)
    X, y, base = prepare_problem(model, X, y, params)
    check_surface_size(X.shape[0], model.num_latents, shape[0] * shape[1], methods, max_iters,
                       mcmc_options, max_work, workers if client is None else 0)
    thetas = np.stack(np.meshgrid(axes[0][1], axes[1][1], indexing="ij"), -1).reshape(-1, 2)
    with_test = X_test is not None and y_test is not None
    if with_test:
        X_test, y_test = validate_data(model, X_test, y_test, "X_test", width=X.shape[1])
    method_options = method_options or {}
    N, D = X.shape[0], model.num_latents
    chunk = int(chunk_size) if chunk_size is not None else shape[1]
    if chunk < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")

    P = thetas.shape[0]
    results = {m: _empty(P) for m in methods}
    groups = _site_groups([m for m in methods if m in REGISTRY], damping, max_iters,
                          model.likelihood.log_concave and model.num_latents == 1)
    blocks = plan_blocks(shape, chunk, warm_start)
    devs = local_devices(devices)
    if workers is not None and int(workers) < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    batching = _resolve_batching(batching, devs)
    if batch_points is not None and int(batch_points) < 1:
        raise ValueError(f"batch_points must be at least 1, got {batch_points}")
    if workers is None and batching == "vmap" and client is None:
        workers = 1                  # one program in flight holds the memory budget
    direct = [m for m in methods if m in DIRECT]
    total = len(blocks) * len(groups) + P * (len(direct) + ("mcmc" in methods))
    done, cancelled = 0, False

    def report(k=1):
        nonlocal done
        done += k
        if progress is not None:
            progress(min(1.0, done / max(total, 1)))

    site_runs = []
    for run, members in groups.items():
        extra = tuple(REGISTRY[m].energy for m in members if m != run)
        a = 1.0 if run == "ep" else float(alpha)
        const = (base, X, y, a, float(damping[run]), float(tol), bool(backtracking),
                 bool(acceleration), int(max_iters[run]),
                 X_test if with_test else np.zeros((1, X.shape[1])),
                 y_test if with_test else np.zeros(1))
        spec = SiteRunSpec(model, run, tuple(cubature), tuple(method_options.get(run, {}).items()),
                           extra, names, int(max_iters[run]), with_test, run != "ep",
                           jax.tree_util.tree_map(np.asarray, const), batching,
                           int(batch_points or 0))
        if batching == "vmap":
            spec = spec._replace(point_bytes=state_bytes(
                get_engine(model, run, tuple(cubature), spec.options), X, y, base, names))
        site_runs.append(_SiteRun(spec, members, thetas, N, D))
    if client is not None:
        from .dask_blocks import DaskPool
        pool, batch, task_devices = DaskPool(client), 1, 1
        if batching == "vmap":       # the workers split a batch to their own memory
            batch = _blocks_per_batch(site_runs, blocks, warm_start, (jax.devices("cpu")[0],), 1)
    else:
        pool = ThreadPool(int(workers) if workers is not None else default_workers(devs))
        batch, task_devices = len(devs), devs
        if batching == "vmap":
            batch = _blocks_per_batch(site_runs, blocks, warm_start, devs, pool.slots)
        else:
            for r in site_runs:      # one compiled program per run, shared by the threads
                _site_solver(r.spec, devs)
    mcmc = dict(mcmc_options or {}, devices=task_devices, pool=pool)
    if batching == "vmap":           # AIS: grid points × chains, one batch sized to memory
        mcmc.setdefault("chunk_size", "memory")
    from_store = 0
    try:
        if site_runs:
            block_store = None
            if store is not None:
                block_store = _open_store(store, site_runs, blocks, model, X, y, X_test, y_test,
                                          base, axes, methods, damping, max_iters, alpha, tol,
                                          backtracking, acceleration, cubature, warm_start,
                                          chunk, method_options)
            cancelled, from_store = _run_site_blocks(site_runs, blocks, warm_start, results,
                                                     cancel, report, pool, batch, task_devices,
                                                     block_store)
        test = (X_test, y_test) if with_test else None
        for m in direct:
            if not cancelled:
                cancelled = _run_direct(DIRECT[m], model, X, y, test, base, names, thetas,
                                        results[m], method_options.get(m, {}), max_iters[m],
                                        tol, cubature, cancel, report)
        if "mcmc" in methods and not cancelled:
            cancelled = _run_mcmc(model, X, y, X_test if with_test else None,
                                  y_test if with_test else None, base, names, thetas, results,
                                  cancel, report, {}, mcmc, None, tol, cubature)
    finally:
        pool.close()
    ds = _dataset(results, methods, axes, shape, N, with_test, cancelled, warm_start, model)
    ds.attrs.update(devices=len(devs) if client is None else 1, blocks_from_store=from_store,
                    batching=batching)
    if client is not None:
        ds.attrs["workers"] = pool.workers_used
    return ds


def _empty(P):
    return {"log_marginal": np.full(P, np.nan), "log_marginal_se": np.full(P, np.nan),
            "log_predictive": np.full(P, np.nan), "converged": np.zeros(P, bool),
            "diverged": np.zeros(P, bool), "psd": np.zeros(P, bool),
            "iterations": np.zeros(P, int)}


class SiteRunSpec(NamedTuple):
    """Everything a process needs to solve blocks of one site-method run (picklable:
    sent once to every Dask worker)."""
    model: object
    run: str
    cubature: tuple
    options: tuple
    extra: tuple
    names: tuple
    max_iters: int
    with_test: bool
    alpha_axis: bool
    const: tuple
    batching: str = "scan"   # "scan" or "vmap" (``surface``'s ``batching``)
    batch_points: int = 0    # "vmap": points per program and device (0: from memory)
    point_bytes: int = 0     # "vmap": one point's iterate (``batched.state_bytes``)


BATCHINGS = ("auto", "vmap", "scan")


def _resolve_batching(batching, devices) -> str:
    """``batching`` with "auto" made "vmap" on accelerators and "scan" on CPUs."""
    if batching not in BATCHINGS:
        raise ValueError(f"batching must be one of {BATCHINGS}, got {batching!r}")
    if batching == "auto":
        return "scan" if devices[0].platform == "cpu" else "vmap"
    return batching


def _points_per_program(spec, devices, workers=1) -> int:
    return spec.batch_points or points_per_program(spec.point_bytes, devices, workers)


def _blocks_per_batch(site_runs, blocks, warm_start, devices, workers) -> int:
    """Blocks the scheduler hands to one vmapped call: as many as its programs hold at
    once (with warm starts a block's points run one after another, so a block holds
    one point; without, all of its points), over every device."""
    held = 1 if warm_start else max(len(b.points) for b in blocks)
    points = min((_points_per_program(r.spec, devices, workers) for r in site_runs), default=1)
    return max(1, points * len(devices) // held)


def _site_solver(spec, devices):
    engine = get_engine(spec.model, spec.run, spec.cubature, spec.options)
    return _solver(engine, spec.extra, spec.names, spec.max_iters, spec.with_test,
                   spec.alpha_axis, devices)


def solve_site_blocks(spec: SiteRunSpec, thetas, nat1, prec, has, warm, devices,
                      lanes=0) -> dict:
    """Solve a batch of blocks (leading axis) of ``spec``'s run on ``devices`` (a tuple of
    this process's devices, or a count): thetas (B, L, 2), warm-start sites nat1 (B, N, D)
    and prec (B, N, D, D), has (B,) whether they are converged sites. Returns the per-point
    outputs as numpy arrays (B, L, ...). With "vmap" batching, ``lanes`` is the
    scheduler's usual batch (``batched.solve_groups`` pads a smaller one to it)."""
    devs = local_devices(devices)
    if spec.batching == "vmap":
        engine = get_engine(spec.model, spec.run, spec.cubature, spec.options)
        return solve_groups(engine, spec, thetas, nat1, prec, has, warm, devs,
                            _points_per_program(spec, devs), lanes)
    solve = _site_solver(spec, devs)
    B = thetas.shape[0]
    rows = pad_to(list(range(B)), len(devs))
    out = solve(thetas[rows], nat1[rows], prec[rows], has[rows], np.asarray(bool(warm)),
                *spec.const)
    return {k: np.asarray(v)[:B] for k, v in out.items()}


class _SiteRun:
    """One site-method run of a surface ('ep_like' also serving 'vi'): what solves its
    blocks and the converged sites of every grid point solved so far (warm starts)."""

    def __init__(self, spec, members, thetas, N, D):
        self.spec, self.members, self.run = spec, members, spec.run
        self.thetas = thetas
        self.cold = init_sites(N, D)
        self.nat1 = np.zeros((thetas.shape[0], N, D))
        self.prec = np.zeros((thetas.shape[0], N, D, D))
        self.ok = np.zeros(thetas.shape[0], bool)   # converged sites usable as a warm start

    def task(self, blocks, length, warm_start, devices, spec, lanes):   # in the calling thread
        """(function, arguments) solving ``blocks`` (``solve_site_blocks``)."""
        has = np.array([b.source >= 0 and self.ok[b.source] for b in blocks])
        pick = lambda mine, cold: np.stack([mine[b.source] if h else cold
                                            for b, h in zip(blocks, has)])
        return solve_site_blocks, (
            spec, np.stack([self.thetas[padded(b.points, length)] for b in blocks]),
            pick(self.nat1, np.asarray(self.cold.nat1)), pick(self.prec, np.asarray(self.cold.prec)),
            has, bool(warm_start), devices, lanes)

    def store(self, block, out, results):                   # in the calling thread
        idx = block.points
        out = {k: v[:len(idx)] for k, v in out.items()}
        self.nat1[idx], self.prec[idx] = out["nat1"], out["prec"]
        self.ok[idx] = out["converged"] & ~out["diverged"]
        for m in self.members:
            r = results[m]
            r["log_marginal"][idx] = out["energy"] if m == self.run else out[REGISTRY[m].energy]
            r["iterations"][idx] = out["iterations"]
            r["converged"][idx] = out["converged"]
            r["diverged"][idx] = out["diverged"]
            r["psd"][idx] = out["psd"]
            if "lpd" in out:
                r["log_predictive"][idx] = out["lpd"]


def _run_site_blocks(site_runs, blocks, warm_start, results, cancel, report, pool, batch,
                     devices, block_store):
    """Solve every run's blocks (``surface_blocks``) in one pool and store each point's
    values for the run's methods; blocks found in ``block_store`` are read, not solved,
    and every solved block is written to it. Returns (cancelled, blocks read)."""
    length = max(len(b.points) for b in blocks)
    plan = for_runs(blocks, len(site_runs))
    specs = [pool.share(r.spec) for r in site_runs]
    position = {id(b): i % len(blocks) for i, b in enumerate(plan)}   # block within its run
    done = set()
    if block_store is not None:
        stored = block_store.load()
        for i, b in enumerate(plan):
            out = stored[site_runs[b.run].run].get(position[id(b)])
            if out is not None:
                site_runs[b.run].store(b, out, results)
                done.add(i)
                report()

    # the usual batch: at most as many blocks as become ready together (a spine
    # block's rows, or every block when they are independent)
    children = np.bincount([b.after + 1 for b in blocks])
    lanes = int(min(batch, children.max()))

    def task(group):
        return site_runs[group[0].run].task(group, length, warm_start, devices,
                                            specs[group[0].run], lanes)

    def store(group, out):
        for k, b in enumerate(group):
            mine = {f: v[k] for f, v in out.items()}
            site_runs[b.run].store(b, mine, results)
            if block_store is not None:
                block_store.save(site_runs[b.run].run, position[id(b)], mine)
        report(len(group))               # once per batch

    cancelled = run_blocks(plan, task, store, pool=pool, batch=batch, done=done,
                           cancelled=lambda: _is_cancelled(cancel))
    return cancelled, len(done)


def _open_store(path, site_runs, blocks, model, X, y, X_test, y_test, base, axes, methods,
                damping, max_iters, alpha, tol, backtracking, acceleration, cubature,
                warm_start, chunk, method_options):
    """The ``BlockStore`` of this surface's site-method blocks, fingerprinted by
    everything their values depend on."""
    from .store import BlockStore, fingerprint
    tree = lambda t: jax.tree_util.tree_map(np.asarray, t)
    prints = fingerprint(
        data=[np.asarray(X), np.asarray(y)],
        test_data=None if X_test is None or y_test is None else [np.asarray(X_test), np.asarray(y_test)],
        model=repr(model), hyperparameters=tree(base),
        grid=[[n, v] for n, v in axes], methods=list(methods),
        settings={"alpha": alpha, "damping": damping, "max_iters": max_iters, "tol": tol,
                  "backtracking": backtracking, "acceleration": acceleration,
                  "cubature": [str(c) for c in cubature], "warm_start": warm_start,
                  "chunk_size": chunk},
        method_options=repr(sorted((k, sorted(v.items())) for k, v in method_options.items())))
    length = max(len(b.points) for b in blocks)
    layout = {}
    for r in site_runs:
        N, D = r.nat1.shape[1:]
        fields = {"energy": ((length,), "float64"), "iterations": ((length,), "int64"),
                  "converged": ((length,), "bool"), "diverged": ((length,), "bool"),
                  "psd": ((length,), "bool"), "nat1": ((length, N, D), "float64"),
                  "prec": ((length, N, D, D), "float64")}
        fields.update({e: ((length,), "float64") for e in r.spec.extra})
        if r.spec.with_test:
            fields["lpd"] = ((length,), "float64")
        layout[r.run] = (len(blocks), fields)
    return BlockStore(path, prints, layout)


_DIRECT = CompiledCache(maxsize=8)


def _direct_bound(record, model, names, max_iters, tol, cubature, options):
    """bound(thetas (R, 2), base, X, y) → (R,): the record's pure ``bound_at_optimum``
    at each θ under ``lax.map``, jitted once per key and models with the same structure
    key (every number is an argument), and called through its stored ``jax.export``
    (``bnlab._runtime.exported``: the key describes the program completely, so a new
    process neither traces nor lowers it)."""
    key = ("direct", record.name, model.structure_key(), names, max_iters, tol, cubature,
           options)

    def build():
        def bound(thetas, base, X, y):
            return jax.lax.map(lambda t: record.bound_at_optimum(
                point_params(base, names, t), X, y, model=model, max_iters=max_iters,
                tol=tol, cubature=cubature, **dict(options)), thetas)
        return jax.jit(bound)

    jitted = _DIRECT.get(key, build)
    return lambda *args: exported.call(jitted, key, args)


def _run_direct(record, model, X, y, test, base, names, thetas, r, options, max_iters, tol,
                cubature, cancel, report):
    """A family that optimises q directly (``bnlab.methods.DirectMethod``, G-KL) at every
    grid point, into ``r`` (the method's arrays of ``_empty``); True if cancelled.
    Without a ``test`` set (X_test, y_test) the energy comes from the record's pure
    ``bound_at_optimum`` under ``lax.map`` (one grid row per call); with one, or with
    options the pure form does not take, each point is a ``bnlab.infer`` call in a loop
    (compiled once): the predictive needs the optimised q."""
    if test is None and set(options) <= set(record.bound_options):
        bound = _direct_bound(record, model, names, int(max_iters), float(tol),
                              tuple(cubature), tuple(sorted(options.items())))
        row = thetas.shape[0] // np.unique(thetas[:, 0]).size      # one grid row
        for start in range(0, thetas.shape[0], row):
            if _is_cancelled(cancel):
                return True
            idx = np.arange(start, min(start + row, thetas.shape[0]))
            r["log_marginal"][idx] = np.asarray(bound(jnp.asarray(thetas[idx]), base, X, y))
            ok = np.isfinite(r["log_marginal"][idx])
            r["converged"][idx], r["psd"][idx], r["diverged"][idx] = ok, ok, ~ok
            report(idx.size)
        return False
    for i, theta in enumerate(thetas):
        if _is_cancelled(cancel):
            return True
        params = point_params(base, names, jnp.asarray(theta))
        res = infer(model, X, y, method=record.name, params=params, max_iters=max_iters,
                    tol=tol, cubature=cubature, **options)
        r["log_marginal"][i] = res.log_marginal
        r["iterations"][i], r["converged"][i] = res.n_iters, res.converged
        r["diverged"][i], r["psd"][i] = res.diverged, not res.diverged
        if test is not None:
            r["log_predictive"][i] = res.log_predictive(*test)
        report()
    return False


def _run_mcmc(model, X, y, Xs, ys, base, names, thetas, results, cancel, report, _gkl,
              options, _max_iters, _tol, _cubature):
    """BDMC at every grid point (``bnlab.studies.mcmc.ais_grid``): the 'mcmc' scheme's
    log_marginal is forward AIS's estimate (a stochastic lower bound), and its bounds,
    standard errors and chain diagnostics become the ``mcmc_*`` variables (``_dataset``).
    'converged' marks the cells whose interval is narrower than ``tolerance`` (an
    option here, ``mcmc.GAP_TOLERANCE`` by default); with ``max_temps`` (and
    ``max_seconds``) the unresolved cells are rerun with longer schedules
    (``mcmc.bdmc_grid``), and 'iterations' holds each cell's last schedule."""
    from .mcmc import GAP_TOLERANCE, ais_grid, bdmc_grid
    options = dict(options)
    tolerance = options.pop("tolerance", GAP_TOLERANCE)
    thetas = [point_params(base, names, jnp.asarray(t)) for t in thetas]
    if options.get("direction", "bidirectional") == "forward":
        out, cancelled = ais_grid(model, X, y, thetas, X_test=Xs, y_test=ys,
                                  cancel=lambda: _is_cancelled(cancel), progress=report, **options)
    else:
        out, cancelled = bdmc_grid(model, X, y, thetas, X_test=Xs, y_test=ys,
                                   tolerance=tolerance, cancel=lambda: _is_cancelled(cancel),
                                   progress=report, **options)
    r = results["mcmc"]
    r["log_marginal"][:] = out["log_z"]
    r["log_marginal_se"][:] = out["log_z_se"]
    r["log_predictive"][:] = out["lpd"]
    width = (out["log_z_upper"] + 2 * out["log_z_upper_se"]) - (out["log_z"] - 2 * out["log_z_se"])
    r["converged"][:] = np.isfinite(width) & (width < tolerance)
    r["psd"][:] = np.isfinite(out["log_z"])
    r["iterations"][:] = out["num_temps"]
    r["bounds"] = {"mcmc_lower": out["log_z"], "mcmc_upper": out["log_z_upper"],
                   "mcmc_lower_se": out["log_z_se"], "mcmc_upper_se": out["log_z_upper_se"],
                   "mcmc_rhat": out["rhat"], "mcmc_bulk_ess": out["bulk_ess"]}
    r["tolerance"] = float(tolerance)
    return cancelled


def _dataset(results, methods, axes, shape, N, with_test, cancelled, warm_start, model):
    dims = ("scheme", axes[0][0], axes[1][0])
    coords = {"scheme": methods, axes[0][0]: axes[0][1], axes[1][0]: axes[1][1]}

    def stack(key):
        return np.stack([results[m][key].reshape(shape) for m in methods])

    lml = stack("log_marginal")
    data = {"log_marginal": (dims, lml), "log_marginal_per_n": (dims, lml / N),
            "converged": (dims, stack("converged")), "diverged": (dims, stack("diverged")),
            "psd": (dims, stack("psd")), "iterations": (dims, stack("iterations"))}
    if "mcmc" in methods:
        data["log_marginal_se"] = (dims, stack("log_marginal_se"))
        # BDMC's bounds per cell (``_run_mcmc``); NaN where AIS did not run (cancelled)
        bounds = results["mcmc"].get("bounds", {})
        for name in ("mcmc_lower", "mcmc_upper", "mcmc_lower_se", "mcmc_upper_se",
                     "mcmc_rhat", "mcmc_bulk_ess"):
            data[name] = (dims[1:], bounds.get(name, np.full(shape, np.nan)).reshape(shape))
        data["mcmc_gap"] = (dims[1:], data["mcmc_upper"][1] - data["mcmc_lower"][1])
    if with_test:
        data["log_predictive"] = (dims, stack("log_predictive"))
    attrs = {"n_train": int(N), "cancelled": int(cancelled), "warm_start": int(warm_start),
             "model": repr(model)}
    if "mcmc" in methods:
        from .mcmc import GAP_TOLERANCE
        attrs["mcmc_tolerance"] = results["mcmc"].get("tolerance", GAP_TOLERANCE)
    return xr.Dataset(data, coords=coords, attrs=attrs)
