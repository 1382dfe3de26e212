"""A surface's grid points solved as one batch: ``batching="vmap"`` of ``bnlab.surface``.

One compiled program solves B grid points at once: a single ``lax.while_loop`` whose
body is the engine's step ``vmap``-ped over the points, with a per-point mask. A point
that has converged, diverged or reached ``max_iters`` keeps its state (its lane is
still computed — a batch has one shape — but its result is dropped), and the loop ends
when every point is done. Nothing leaves the device inside the loop: its condition is
a reduction over the mask. Each point's prior (K and its factor) is made once, before
the loop, and is neither carried nor selected. Decisions for the whole batch are
``lax.cond`` on a reduction over it, which stay branches under ``vmap``: a point's
starting state is made inside the loop (every point in the first iteration; later a
point whose warm run diverged or stopped at ``max_iters`` unconverged, from the
initial sites), so that it is traced once and costs nothing in the iterations that
need none; and the engine's own branches (Anderson mixing and its residual safeguard)
are ``engine.batch_axis.cond``, decided over the
active points. What still runs both branches for every point — the full GP's
``lax.cond`` between its √W and signed factorisations and the ``lax.switch`` of its
marginal variances (``posterior.full``), the signed factor's leaves
(``linalg.dense``) — is named, with its share, in benchmarks/README.md ("Batched
surfaces").

In float64 on an accelerator too (float32 sites do not settle); consumer GPUs run
float64 at 1/32 to 1/64 of their float32 rate, so a CPU serves better there.

Each point follows exactly the rules of the scan path (``site_runs._solver``): it
starts from the given warm-start sites or cold, a warm run that diverges or stops at
``max_iters`` unconverged is redone cold, the iteration count, converged / diverged
flags and PSD flag are its own run's (the cold one's after a redo), and the returned
state of a mean-only method has its marginal variances computed once at the end, as
``Engine.run_pure`` does. So a point's value differs from the scan
path's only by the rounding of batched against unbatched linear algebra (carried along
to within the convergence tolerance).

Two layouts of a group of blocks (``blocks``; B blocks of L points):

* **warm** (``warm_start=True``): a ``lax.scan`` along the L positions of the blocks,
  each position one batched solve of the B blocks' points, each point warm-started
  from the converged sites of its block's previous point — the scan path's walk, the
  B rows side by side instead of one after another. B points are in memory at a time.
* **cold** (``warm_start=False``): the B·L points as one batch (B·L in memory).

How many points one program holds comes from the device's free memory
(``points_per_program``); a group that does not fit is solved as several programs of
equal size (the last padded by repeating a point), so a grid of any size is split,
never refused.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..._runtime.compiled import CompiledCache
from ...engine import batch_axis
from ...engine.energies import energy as compute_energy
from ...sites import Sites, init_sites
from ...engine.state import Settings

__all__ = ["points_per_program", "solve_groups", "state_bytes", "free_bytes", "CPU_BYTES",
           "DEVICE_FRACTION", "BYTES_PER_STATE", "PAD_BYTES"]

#: the memory budget of one program on a CPU (no free-memory figure there): 2 GiB
CPU_BYTES = 2 << 30
#: the share of an accelerator's free memory one program may use
DEVICE_FRACTION = 0.6
#: one point's peak memory in the batched program, in units of its iterate's size
#: (``jax.eval_shape`` of the engine's state, prior factors included): the loop carries
#: the state, the step builds a proposal, a best iterate and the factorisation's
#: temporaries beside it. Measured with XLA's memory analysis of the compiled program
#: on this CPU (temporaries, arguments and outputs over B points' iterates): 3.0–3.6
#: for a full GP at n = 64 and 281 (laplace, ep, ep_like), 3.9–4.3 for a sparse GP
#: (M = 50, n = 281); taken with a margin.
BYTES_PER_STATE = 6.0

#: a lone block (the first column of a warm-started grid, whose rows wait for it) is
#: padded to the rows' batch, so that one compiled program serves both, where the
#: padded batch's iterates take at most this many bytes: there the padding's work is
#: small beside a compilation (a few seconds); above it the column gets its own
#: program of one lane, since on a CPU every padded lane costs a point's work
PAD_BYTES = 8 << 20

_PROGRAMS = CompiledCache(maxsize=16)
#: the name of the points' vmap axis (``engine.batch_axis``)
POINTS = "points"


def _pick(mask, new, old):
    """``new`` where ``mask`` (B,), else ``old``, leaf by leaf over (B, ...) pytrees."""
    def one(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)
    return jax.tree_util.tree_map(one, new, old)


def batched_points(engine, extra, names, with_test, alpha_axis):
    """solve(thetas (B, 2), start_nat1 (B, N, D), start_prec (B, N, D, D), use_start (B,),
    base, X, y, alpha, rho, tol, backtrack, accelerate, max_iters, Xs, ys) → dict of
    (B, ...) outputs, the fields of the scan path's ``solve_point``."""
    from .axes import point_alpha, point_params

    def solve(thetas, start_nat1, start_prec, use_start, base, X, y, alpha, rho, tol,
              backtrack, accelerate, max_iters, Xs, ys):
        def params(theta):
            return point_params(base, names, theta)

        def settings(theta):
            a = point_alpha(names, theta, alpha) if alpha_axis else alpha
            return Settings(a, rho, tol, backtrack, accelerate)

        def prepare(theta):
            return engine.structure.prepare(engine.model, params(theta), X)

        def begin(theta, prior, nat1, prec, warm):
            cold = engine.cold_sites(params(theta), X.shape[0])
            sites = Sites(jnp.where(warm, nat1, cold.nat1), jnp.where(warm, prec, cold.prec))
            state = engine.start_pure(params(theta), y, settings(theta), prior, sites)
            return state._replace(prior=None)

        def step(theta, prior, state, active):
            with batch_axis.over(POINTS, active):      # the step's branches: per batch
                out, info = engine.step_pure(params(theta), X, y, settings(theta),
                                             state._replace(prior=prior))
            return out._replace(prior=None), (info.converged, info.diverged,
                                              info.posterior_psd & info.cavity_psd)

        # the prior (K and its factor per point) never changes: it is made once, before
        # the loop, and stays out of the loop's carry and of every select (a select
        # would copy N×N per point and step)
        prior = jax.vmap(prepare)(thetas)
        B = thetas.shape[0]
        false = jnp.zeros(B, bool)
        blank = jax.tree_util.tree_map(
            lambda a: jnp.zeros(a.shape, a.dtype),
            jax.eval_shape(jax.vmap(begin), thetas, prior, start_nat1, start_prec, use_start))

        def restart(state, fresh, warm):
            """The points ``fresh`` at their starting state: warm or cold sites. Every
            point in the first iteration; later, a point whose warm run diverged or
            stalled at the cap, cold (the run the scan path makes after it, here in the
            same loop)."""
            new = jax.vmap(begin)(thetas, prior, start_nat1, start_prec, warm)
            return _pick(fresh, new, state)

        def cond(carry):
            return jnp.any(carry[5])

        def body(carry):
            state, n, converged, diverged, psd, active, warm, fresh = carry
            # one decision for the batch (a ``lax.cond`` on a reduction, not a select):
            # a starting state is made only in an iteration that needs one
            state = jax.lax.cond(jnp.any(fresh), restart, lambda s, *_: s, state, fresh, warm)
            new, (c, d, p) = jax.vmap(step, axis_name=POINTS)(thetas, prior, state, active)
            state = _pick(active, new, state)
            n = n + active
            converged = jnp.where(active, c, converged)
            diverged = jnp.where(active, d, diverged)
            psd = jnp.where(active, p, psd)
            redo = active & warm & (d | (~c & (n >= max_iters)))   # the scan path's rule
            active = (active & ~c & ~d & (n < max_iters)) | redo
            return (state, jnp.where(redo, 0, n), converged & ~redo, diverged & ~redo,
                    psd & ~redo, active, warm & ~redo, redo)

        start = jnp.broadcast_to(jnp.asarray(max_iters) > 0, (B,))
        zeros = jnp.zeros(B, jnp.asarray(max_iters).dtype)
        state, n, converged, diverged, psd, *_ = jax.lax.while_loop(
            cond, body, (blank, zeros, false, false, false, start, use_start, start))
        state = state._replace(prior=prior)
        if engine.mean_only and (extra or with_test):   # as ``Engine.run_pure``: the
            # marginals with variances once, at the end (what the outputs below read)
            state = state._replace(marginals=jax.vmap(engine._marginals)(prior, state.sites))
        out = {"energy": state.energy, "iterations": n, "converged": converged,
               "diverged": diverged, "psd": psd, "nat1": state.sites.nat1,
               "prec": state.sites.prec}

        def per_point(theta, state):
            p = params(theta)
            more = {kind: compute_energy(kind, engine.lik, engine.rule, p["likelihood"], y,
                                         state.marginals, state.sites, 1.0) for kind in extra}
            if with_test:
                more["lpd"] = jnp.mean(engine.log_predictive_pure(p, X, state, Xs, ys))
            return more

        if extra or with_test:
            out.update(jax.vmap(per_point)(thetas, state))
        return out

    return solve


def _warm_program(solve):
    """thetas (B, L, 2), start sites (B, ...), start_ok (B,), warm (), *const → (B, L, ...):
    a scan along the L positions of B blocks, each point warm-started from its block's
    previous converged point (the scan path's walk, B blocks side by side)."""
    def blocks(thetas, start_nat1, start_prec, start_ok, warm, *const):
        def body(carry, theta):
            nat1, prec, ok = carry
            out = solve(theta, nat1, prec, ok & warm, *const)
            good = out["converged"] & ~out["diverged"]
            return (_pick(good, out["nat1"], nat1), _pick(good, out["prec"], prec),
                    ok | good), out

        _, outs = jax.lax.scan(body, (start_nat1, start_prec, start_ok),
                               jnp.swapaxes(thetas, 0, 1))
        return jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), outs)
    return blocks


def _cold_program(solve, num_latents):
    """thetas (P, 2), *const → (P, ...): P independent points from the initial sites."""
    def points(thetas, base, X, *const):
        P = thetas.shape[0]
        cold = init_sites(X.shape[0], num_latents)
        nat1 = jnp.broadcast_to(cold.nat1, (P,) + cold.nat1.shape)
        prec = jnp.broadcast_to(cold.prec, (P,) + cold.prec.shape)
        return solve(thetas, nat1, prec, jnp.zeros(P, bool), base, X, *const)
    return points


def _program(engine, extra, names, with_test, alpha_axis, warm, devices):
    """The jitted program of one layout, its leading (batch) axis split over
    ``devices`` (``studies.devices.sharded``, each device one vmapped share), called
    through its stored ``jax.export``: the key (the engine's, the outputs, the grid's
    names, the layout) describes the program completely, so a new process neither
    traces nor lowers it."""
    from ..devices import sharded
    key = ("vmap", engine, extra, names, with_test, alpha_axis, warm)

    def build():
        solve = batched_points(engine, extra, names, with_test, alpha_axis)
        return _warm_program(solve) if warm else _cold_program(solve, engine.model.num_latents)

    fn = _PROGRAMS.get(key, build)
    return sharded(fn, devices, 4 if warm else 1, key, mapped=False, export=True)


def state_bytes(engine, X, y, base, names) -> int:
    """Bytes of one grid point's iterate (``Engine.init_pure``'s state, prior included)."""
    from .axes import point_params
    from ...engine.state import make_settings
    theta = jnp.ones(len(names))
    shape = jax.eval_shape(lambda: engine.init_pure(point_params(base, names, theta), X, y,
                                                    make_settings()))
    return int(sum(math.prod(a.shape) * a.dtype.itemsize
                   for a in jax.tree_util.tree_leaves(shape)))


def free_bytes(device) -> int:
    """What one program may use on ``device``: ``DEVICE_FRACTION`` of its free memory
    (``Device.memory_stats``), or ``CPU_BYTES`` where there is no such figure."""
    try:
        stats = device.memory_stats()
    except Exception:                  # noqa: BLE001 (a backend without the statistic)
        stats = None
    if not stats or "bytes_limit" not in stats:
        return CPU_BYTES
    return int(DEVICE_FRACTION * max(0, stats["bytes_limit"] - stats.get("bytes_in_use", 0)))


def points_per_program(per_point: int, devices, workers: int = 1) -> int:
    """Grid points one program may hold on each device: the device's budget
    (``free_bytes``) shared by ``workers`` programs in flight, over ``BYTES_PER_STATE``
    times one point's iterate; at least 1."""
    budget = min(free_bytes(d) for d in devices) // max(1, int(workers))
    return max(1, int(budget // max(1, BYTES_PER_STATE * per_point)))


def _sizes(count: int, cap: int, lanes: int, multiple: int) -> tuple[int, int]:
    """(programs, items per program) for ``count`` items: one program of
    max(count, ``lanes``) items (the scheduler's usual batch, so that a smaller last
    batch reuses its compiled program) where that fits in ``cap``, else programs of
    ``cap`` items (the last padded); a multiple of ``multiple`` (the devices)."""
    cap = max(multiple, cap - cap % multiple)
    size = min(cap, max(count, lanes))
    size = -(-size // multiple) * multiple
    return -(-count // size), size


def solve_groups(engine, spec, thetas, nat1, prec, has, warm, devices, cap,
                 lanes=0) -> dict:
    """Solve B blocks (``site_runs.solve_site_blocks``' arguments) with the vmapped
    programs: ``cap`` points per device and program, padded to ``lanes`` blocks (the
    scheduler's batch; a lone block only up to ``PAD_BYTES``), split into programs of
    one size where they do not fit. Returns numpy arrays (B, L, ...)."""
    B, L = thetas.shape[:2]
    ndev = len(devices)
    program = _program(engine, spec.extra, spec.names, spec.with_test, spec.alpha_axis,
                       bool(warm), devices)
    if warm:                            # B blocks, one point of each in memory at once
        items, args = B, lambda idx: (thetas[idx], nat1[idx], prec[idx], has[idx],
                                      np.asarray(True)) + tuple(spec.const)
        if B == 1 and lanes * spec.point_bytes > PAD_BYTES:
            lanes = 1                   # the first column alone: its own program
    else:                               # B·L independent points
        flat = thetas.reshape(B * L, -1)
        items, args = B * L, lambda idx: (flat[idx],) + tuple(spec.const)
        lanes = lanes * L
    programs, size = _sizes(items, cap * ndev, lanes, ndev)
    outs = []
    for k in range(programs):
        idx = np.minimum(np.arange(k * size, (k + 1) * size), items - 1)
        out = program(*args(idx))
        keep = min(size, items - k * size)
        outs.append({f: np.asarray(v)[:keep] for f, v in out.items()})
    out = {f: np.concatenate([o[f] for o in outs]) for f in outs[0]}
    if not warm:
        out = {f: v.reshape((B, L) + v.shape[1:]) for f, v in out.items()}
    return out
