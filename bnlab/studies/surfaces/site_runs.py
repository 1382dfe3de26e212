"""A surface's site-method runs: the compiled block solver (a ``lax.scan`` of
``Engine.run_pure`` over a block's points, ``_solver``) or the vmapped batch
(``batched``), each run's warm-start sites, its blocks scheduled through ``blocks``
and kept in a Zarr ``store``."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..._runtime.compiled import CompiledCache
from ...engine.energies import energy as compute_energy
from ...engine.loop import get_engine, trace_length
from ...engine.state import Settings
from ...methods.registry import REGISTRY
from ...sites import Sites, init_sites
from ..devices import local_devices, pad_to, sharded
from .axes import point_alpha, point_params
from .batched import points_per_program, solve_groups
from .blocks import for_runs, is_cancelled, padded, run_blocks

__all__ = ["SiteRunSpec", "SiteRun", "solve_site_blocks", "run_site_blocks", "open_store",
           "resolve_batching", "blocks_per_batch", "site_solver", "BATCHINGS"]

# ---- one compiled block solver per (engine, extra energies, grid names, sizes) -------
_SOLVERS = CompiledCache(maxsize=16)


def _solver(engine, extra, names, max_iters, with_test, alpha_axis, devices):
    """The block program, compiled over ``devices`` (``studies.devices.sharded``: a
    leading axis of independent blocks split over them). A block runs the points of a chunk one after another with
    ``lax.scan``: each point starts from the last converged sites in the walk (warm) or
    from the initial sites (cold); a warm run that diverges or stops at ``max_iters``
    unconverged is redone cold, and the point reports the cold run (its count and flags).

    Why a scan over ``run_pure`` rather than ``vmap``: on CPU the Cholesky and
    triangular solves are LAPACK calls made matrix by matrix even when batched, a
    vmapped ``while_loop`` runs every point for as many iterations as the slowest one,
    and the model's ``lax.cond`` (√W form vs signed √W form) becomes a ``select``
    that evaluates both branches — together several times the work. The scan keeps each point's
    cost equal to a single ``bnlab.infer`` call, compiled once per chunk length. On an
    accelerator those costs are small beside a kernel launch per matrix and step, and
    ``batching="vmap"`` (``batched``) is the better form."""
    key = (engine, extra, names, trace_length(max_iters), with_test, alpha_axis)
    return sharded(_SOLVERS.get(key, lambda: _build_solver(*key)), devices, 4, key, export=True)


def _build_solver(engine, extra, names, length, with_test, alpha_axis):

    def solve_point(theta, start, use_start, base, X, y, alpha, rho, tol, backtrack, accelerate,
                    max_iters, Xs, ys):
        params = point_params(base, names, theta)
        settings = Settings(point_alpha(names, theta, alpha) if alpha_axis else alpha, rho, tol,
                            backtrack, accelerate)
        cold = engine.cold_sites(params, X.shape[0])

        def run(sites):
            return engine.run_pure(params, X, y, settings, max_iters, sites, length)

        def attempt(carry):          # 1st: warm (if any); 2nd, only after a warm run
            k, _ = carry               # that diverged or stopped at max_iters: cold.
            warm = use_start & (k == 0)  # One run_pure in the program.
            return k + 1, run(Sites(jnp.where(warm, start.nat1, cold.nat1),
                                    jnp.where(warm, start.prec, cold.prec)))

        def again(carry):            # not converged: diverged, or stalled at the cap
            k, result = carry
            return (k == 0) | ((k == 1) & use_start & ~result[3])

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


def resolve_batching(batching, devices) -> str:
    """``batching`` with "auto" made "vmap" on accelerators and "scan" on CPUs."""
    if batching not in BATCHINGS:
        raise ValueError(f"batching must be one of {BATCHINGS}, got {batching!r}")
    if batching == "auto":
        return "scan" if devices[0].platform == "cpu" else "vmap"
    return batching


def _points_per_program(spec, devices, workers=1) -> int:
    return spec.batch_points or points_per_program(spec.point_bytes, devices, workers)


def blocks_per_batch(site_runs, blocks, warm_start, devices, workers) -> int:
    """Blocks the scheduler hands to one vmapped call: as many as its programs hold at
    once (with warm starts a block's points run one after another, so a block holds
    one point; without, all of its points), over every device."""
    held = 1 if warm_start else max(len(b.points) for b in blocks)
    points = min((_points_per_program(r.spec, devices, workers) for r in site_runs), default=1)
    return max(1, points * len(devices) // held)


def site_solver(spec, devices):
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
    solve = site_solver(spec, devs)
    B = thetas.shape[0]
    rows = pad_to(list(range(B)), len(devs))
    out = solve(thetas[rows], nat1[rows], prec[rows], has[rows], np.asarray(bool(warm)),
                *spec.const)
    return {k: np.asarray(v)[:B] for k, v in out.items()}


class SiteRun:
    """One site-method run of a surface ('ep_like' also serving 'vi'): what solves its
    blocks and the converged sites of every grid point solved so far (warm starts)."""

    def __init__(self, spec, members, thetas, N, D):
        self.spec, self.members, self.run = spec, members, spec.run
        self.thetas = thetas
        self.cold = init_sites(N, D, xp=np)       # host arrays: no eager programs
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


def run_site_blocks(site_runs, blocks, warm_start, results, cancel, report, pool, batch,
                    devices, block_store):
    """Solve every run's blocks (``blocks``) in one pool and store each point's
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
                           cancelled=lambda: is_cancelled(cancel))
    return cancelled, len(done)


def open_store(path, site_runs, blocks, model, X, y, X_test, y_test, base, axes, methods,
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
