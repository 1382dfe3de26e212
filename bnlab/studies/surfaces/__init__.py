"""Approximate log marginal likelihood surfaces over a grid of two hyperparameters.

At every grid point θ the hyperparameters are fixed and each method is run to
convergence; the surface records its energy (its approximation of log p(y|θ)) — as in
Li, John & Solin (2023, §5.1, Fig. 2), where the grid is 21 × 21 over (log ℓ, log σ)
and the values are divided by n.

Batching (``batching="scan"``, the default on CPUs): the points of a chunk run inside
one compiled program — ``lax.scan`` over ``Engine.run_pure`` (why not ``vmap`` on a
CPU: see ``site_runs._solver``) — compiled once per method;
independent chunks (default: one grid row each) run at the same time: batched over
every local JAX device (``studies.devices``) from a pool of ``workers`` threads, or as
tasks of a Dask cluster (``dask_blocks``) (``blocks`` schedules them),
so memory holds one point's N × N matrices per block in flight, and progress is
reported, cancellation checked and finished blocks stored (``store``) between
chunks. ``batching="vmap"`` (the default on accelerators) solves many points in one
program instead: the engine's step vmapped over them inside one ``while_loop``, each
point frozen once done (``batched``); the blocks, their order, the store,
cancel, progress (per batch of blocks) and Dask tasks are the same.

Warm start (default): the first grid column is walked top to bottom, then every row
(rows = the *first* grid axis) from its first point: each point starts from the
converged sites of the point before it in its row, a row's first point from the first
point of the row above (the very first point starts cold, from ``Engine.cold_sites``).
Warm starting changes the path, not the fixed point, so converged values agree with
``bnlab.infer`` to the convergence tolerance; a point whose warm run diverges or stops
at ``max_iters`` unconverged (a start far from its fixed point: damping halves a site
precision of 1e149 towards 100 in about 490 steps) is re-run cold, and reports the cold
run's value, iteration count and flags, so a warm and a cold surface agree there too.
With ``warm_start=False`` every point is exactly
``bnlab.infer(model, X, y, method, params=θ, ...)``.

The VI and EP-like surfaces share one run: 'ep_like' is the VI site iteration scored
by the EP energy (Li et al. 2023, eq. 11; its record's ``iteration_of``), so both
energies are read off the same converged sites. 'mcmc' is annealed importance sampling
(``bnlab.studies.mcmc``).

The package: ``axes`` (the grid), ``site_runs`` (site methods, scan or vmap),
``layers`` (G-KL, MCMC, the Dataset), ``blocks`` (the scheduler), ``batched`` (the vmap
path), ``dask_blocks`` (a Dask cluster as the pool), ``store`` (the Zarr store).
"""
from __future__ import annotations

from typing import Callable

import jax
import numpy as np
import xarray as xr

from ..._runtime import xarray_dask_type
from ...engine.loop import get_engine
from ...infer import check_resolution, prepare_problem, validate_data, validate_settings
from ...methods.registry import DIRECT, REGISTRY, check_method_name, takes_alpha
from ..devices import local_devices
from ..work_limits import check_surface_size
from .axes import grid_axes, point_params
from .batched import state_bytes
from .blocks import ThreadPool, default_workers, plan_blocks
from .layers import gather, run_direct, run_mcmc
from .site_runs import (BATCHINGS, SiteRun, SiteRunSpec, blocks_per_batch, open_store,
                        resolve_batching, run_site_blocks, site_solver)

xarray_dask_type.install()      # a surface's Dataset does not import dask.array

__all__ = ["surface", "grid_axes", "point_params", "BATCHINGS"]


def _site_groups(methods, damping, max_iters, log_concave):
    """Engine runs needed: a method whose record runs another's site iteration
    (``Method.iteration_of``: 'ep_like' runs VI's) shares one run with it when both are
    asked for, their damping and iteration limits agree and the likelihood is
    log-concave. The shared run is the scoring method's, which rejects a step whose
    cavity is not PD (the EP energy needs every cavity); with log-concave likelihoods
    VI's site precisions are ≥ 0, so every cavity precision 1/C_nn − λ_n is positive and
    no VI step is ever rejected for it, but a non-log-concave one (Student-t) can make a
    cavity indefinite where VI itself goes on, so there the two run separately and each
    equals ``bnlab.infer``."""
    run = {m: m for m in methods}
    for m in methods:
        base = REGISTRY[m].iteration_of
        if (log_concave and base in run and run[base] == base and damping[base] == damping[m]
                and max_iters[base] == max_iters[m]):
            run[base] = m
    groups = {}
    for m in methods:
        groups.setdefault(run[m], []).append(m)
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

    ``grid``: {name: values, name: values} over the model's hyperparameters (the
    kernel's and the likelihood's, named by ``bnlab.hyperparameters``: lengthscale,
    variance, noise, …) or the PEP power ``alpha``.
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
    at once, each frozen once converged or diverged (``bnlab.studies.surface.batched``) — the
    form for an accelerator, where one batched kernel costs about what one matrix's
    does; with ``warm_start`` the rows advance side by side, each point warm-started
    as on the scan path, without it every point is independent; AIS ('mcmc') then
    vmaps as many grid points (each with its chains) per program as fit in memory
    (``mcmc.ais_grid``'s ``chunk_size="memory"``). "auto" (default):
    "vmap" where the devices are not CPUs, else "scan". Recorded in
    ``attrs["batching"]``. Both give the same values to the convergence tolerance and
    the same flags. ``batch_points``: with "vmap", grid points held by one program on
    each device (default: as many as fit in ``DEVICE_FRACTION`` of the device's free
    memory, or ``CPU_BYTES`` on a CPU; ``bnlab.studies.surface.batched``); a larger grid is
    split into several programs, never refused.
    ``store``: a Zarr path: every finished site-method block is written there, and a
    rerun with the same arguments reads them back (``attrs["blocks_from_store"]``),
    computing only what is missing; other arguments are an error naming what differs
    (``bnlab.studies.surface.store``). AIS results are kept per point in bnlab's disk cache.
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
    method_options = method_options or {}

    def uses_alpha(m):               # the one α rule (``bnlab.methods.takes_alpha``)
        return takes_alpha(m, base=method_options.get(m, {}).get("base", "vi"))

    for m in methods:
        if m == "mcmc":
            continue
        check_method_name(m)
        validate_settings(m, alpha if uses_alpha(m) else 1.0, damping[m], max_iters[m], tol)
    axes = grid_axes(model, grid)
    names = tuple(a[0] for a in axes)
    shape = (axes[0][1].size, axes[1][1].size)
    X, y, base = prepare_problem(model, X, y, params, check_scales=False)
    with_test = X_test is not None and y_test is not None
    if with_test:
        X_test, y_test = validate_data(model, X_test, y_test, "X_test", width=X.shape[1])
    # the scale checks are monotone in each hyperparameter (a noise against the
    # targets, a variance against a noise, ½‖y‖² against Nσ² + σ_n², a period and a
    # lengthscale against the inputs, test inputs included; the others do not enter):
    # the grid's four corners bound every cell. The base point is not checked: off the
    # grid, no cell runs there
    (_, first), (_, second) = axes
    corners = [(a, b) for a in (first.min(), first.max()) for b in (second.min(), second.max())]
    for corner in corners:
        params_at = point_params(base, names, corner)
        try:
            model.check_scales(params_at, X, y)
            if with_test:
                model.check_inputs(params_at, np.concatenate([X, X_test]))
            for m in methods:
                if m in REGISTRY or m in DIRECT:
                    check_resolution(model, params_at, y, m, method_options.get(m))
        except ValueError as err:
            point = ", ".join(f"{n} = {v:g}" for n, v in zip(names, corner))
            raise ValueError(f"at the grid point {point}: {err}") from err
    check_surface_size(X.shape[0], model.num_latents, shape[0] * shape[1], methods, max_iters,
                       mcmc_options, max_work, workers if client is None else 0, warm_start)
    thetas = np.stack(np.meshgrid(axes[0][1], axes[1][1], indexing="ij"), -1).reshape(-1, 2)
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
    batching = resolve_batching(batching, devs)
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
        a = float(alpha) if uses_alpha(run) else 1.0
        const = (base, X, y, a, float(damping[run]), float(tol), bool(backtracking),
                 bool(acceleration), int(max_iters[run]),
                 X_test if with_test else np.zeros((1, X.shape[1])),
                 y_test if with_test else np.zeros(1))
        spec = SiteRunSpec(model, run, tuple(cubature), tuple(method_options.get(run, {}).items()),
                           extra, names, int(max_iters[run]), with_test, uses_alpha(run),
                           jax.tree_util.tree_map(np.asarray, const), batching,
                           int(batch_points or 0))
        if batching == "vmap":
            spec = spec._replace(point_bytes=state_bytes(
                get_engine(model, run, tuple(cubature), spec.options), X, y, base, names))
        site_runs.append(SiteRun(spec, members, thetas, N, D))
    if client is not None:
        from .dask_blocks import DaskPool
        pool, batch, task_devices = DaskPool(client), 1, 1
        if batching == "vmap":       # the workers split a batch to their own memory
            batch = blocks_per_batch(site_runs, blocks, warm_start, (jax.devices("cpu")[0],), 1)
    else:
        pool = ThreadPool(int(workers) if workers is not None else default_workers(devs))
        batch, task_devices = len(devs), devs
        if batching == "vmap":
            batch = blocks_per_batch(site_runs, blocks, warm_start, devs, pool.slots)
        else:
            for r in site_runs:      # one compiled program per run, shared by the threads
                site_solver(r.spec, devs)
    mcmc = dict(mcmc_options or {}, devices=task_devices, pool=pool)
    if batching == "vmap":           # AIS: grid points × chains, one batch sized to memory
        mcmc.setdefault("chunk_size", "memory")
    from_store = 0
    try:
        if site_runs:
            block_store = None
            if store is not None:
                block_store = open_store(store, site_runs, blocks, model, X, y, X_test, y_test,
                                         base, axes, methods, damping, max_iters, alpha, tol,
                                         backtracking, acceleration, cubature, warm_start,
                                         chunk, method_options)
            cancelled, from_store = run_site_blocks(site_runs, blocks, warm_start, results,
                                                    cancel, report, pool, batch, task_devices,
                                                    block_store)
        test = (X_test, y_test) if with_test else None
        for m in direct:
            if not cancelled:
                cancelled = run_direct(DIRECT[m], model, X, y, test, base, names, thetas,
                                       results[m], method_options.get(m, {}), max_iters[m],
                                       tol, cubature, cancel, report)
        if "mcmc" in methods and not cancelled:
            cancelled = run_mcmc(model, X, y, X_test if with_test else None,
                                 y_test if with_test else None, base, names, thetas, results,
                                 cancel, report, mcmc)
    finally:
        pool.close()
    ds = gather(results, methods, axes, shape, N, with_test, cancelled, warm_start, model)
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
