"""The order in which a surface's grid points are solved, and the scheduler that solves
independent blocks of them at the same time.

A *block* is a run of grid points solved one after another inside one compiled program
(``lax.scan``), each point warm-started from the converged sites of the point before it.
With warm starts the grid is walked as a comb: first the first column, top to bottom
(one chain), then every row from its first point to its end. Rows depend only on the
column, so they are independent of each other and run in parallel: several at once in
one call over every JAX device (``studies.devices``), from one or more threads
(``ThreadPool``: XLA releases the GIL while it computes) or as tasks of a Dask cluster
(``dask_blocks``). On a CPU a Cholesky factorisation is one LAPACK call on one
core however the points are batched (see ``site_runs._solver``), so concurrent blocks
are how a surface uses more than one core.

Every block is padded to the same length (by repeating its last point, which then
converges in one iteration from its own solution), so one compiled program serves all
of them.

A surface with several site-method runs (Laplace, EP, the shared VI / EP-like run)
schedules all their blocks in one pool (``for_runs``): a run's first column, which its
rows wait for, then overlaps other runs' rows instead of leaving workers idle.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["Block", "plan_blocks", "for_runs", "padded", "run_blocks", "default_workers",
           "ThreadPool", "CANCEL_GRACE_S", "is_cancelled"]

#: after a cancel, how long the blocks already running may take to finish (their values
#: are kept) before the caller gets control back without them: a cancel must work even
#: when a block never returns (jaxlib 0.10's batched-LAPACK deadlock was one way, now
#: avoided: ``bnlab._runtime.lapack_batches``)
CANCEL_GRACE_S = 2.0
#: how often a wait for running blocks looks at the cancel flag
_POLL_S = 0.2


class Block(NamedTuple):
    points: np.ndarray   # flat (row-major) grid indices, in the order they are solved
    source: int          # flat index whose converged sites start the block, or −1 (cold)
    after: int           # index of the block that must finish first, or −1
    run: int = 0         # which site-method run of the surface solves it


def default_workers(devices=None) -> int:
    """Threads sending blocks: one per core, at most 8; given the devices they feed, one
    per core and device on a CPU (each LAPACK call keeps one core busy) and one on an
    accelerator, which sends a batch to every device at once (an iteration there is
    bound by kernel launches, and more threads only contend for them:
    benchmarks/README.md, devices.py)."""
    cores = max(1, min(8, os.cpu_count() or 1))
    if devices is None:
        return cores
    if devices[0].platform != "cpu":
        return 1
    return max(1, cores // len(devices))


def _chain(points, chunk, source, after, blocks):
    """Append ``points`` as consecutive blocks of ≤ chunk points, each continuing from
    the last point of the one before."""
    for start in range(0, len(points), chunk):
        part = np.asarray(points[start:start + chunk])
        blocks.append(Block(part, source, after))
        source, after = int(part[-1]), len(blocks) - 1
    return blocks


def plan_blocks(shape, chunk: int, warm_start: bool) -> list[Block]:
    """Blocks covering a (rows × columns) grid once; see the module docstring."""
    n_rows, n_cols = shape
    flat = np.arange(n_rows * n_cols).reshape(shape)
    blocks: list[Block] = []
    if not warm_start:
        return [Block(flat.ravel()[i:i + chunk], -1, -1) for i in range(0, flat.size, chunk)]
    _chain(flat[:, 0], chunk, -1, -1, blocks)
    column_block = {int(p): b for b, blk in enumerate(blocks) for p in blk.points}
    for r in range(n_rows):
        if n_cols > 1:
            first = int(flat[r, 0])
            _chain(flat[r, 1:], chunk, first, column_block[first], blocks)
    return blocks


def for_runs(blocks: list[Block], runs: int) -> list[Block]:
    """One plan per run, concatenated: run r's copy of block i is entry r·len(blocks) + i
    and waits only for blocks of its own run."""
    size = len(blocks)
    return [b._replace(run=r, after=b.after + r * size if b.after >= 0 else -1)
            for r in range(runs) for b in blocks]


def padded(points: np.ndarray, length: int) -> np.ndarray:
    """``points`` extended to ``length`` by repeating its last entry."""
    return np.concatenate([points, np.full(length - len(points), points[-1])])


class ThreadPool:
    """Tasks in this process's threads: XLA releases the GIL while it computes."""

    def __init__(self, workers: int):
        self.slots = max(1, int(workers))
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="bnlab-surface")

    def submit(self, fn, *args):
        return self._pool.submit(fn, *args)

    @staticmethod
    def share(value):
        return value

    @staticmethod
    def result(future):
        return future.result()

    @staticmethod
    def wait_first(futures, timeout=None):
        """The futures done within ``timeout`` seconds (empty if none)."""
        return wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)[0]

    @staticmethod
    def abandon(futures):
        """Stop waiting for running tasks: a thread cannot be interrupted, so each
        finishes (or not) on its own and its result is dropped."""

    def close(self):
        """No new tasks; returns without joining a thread still running an abandoned
        task (when ``run_blocks`` returns normally none is running)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_blocks(blocks: list[Block], task: Callable[[list[Block]], tuple],
               store: Callable[[list[Block], object], None], *, pool,
               cancelled: Callable[[], bool], batch: int = 1, done=frozenset()) -> bool:
    """Solve every block, respecting ``after``, and hand each result to ``store`` (in the
    calling thread, in completion order). Ready blocks of one run are grouped up to
    ``batch`` at a time (one group per device sweep, ``studies.devices``); ``task(group)``
    gives (fn, args) and ``pool`` (a ``ThreadPool`` or a Dask pool,
    ``dask_blocks``) runs fn(*args) with at most ``pool.slots`` groups in
    flight, so a cancel stops everything not started. Stops submitting once
    ``cancelled()`` (looked at while waiting too), keeps what the running groups
    return within ``CANCEL_GRACE_S`` and then abandons the rest; returns whether it
    was cancelled. Blocks in ``done`` (indices, e.g.
    read from a store) count as finished: they are neither solved nor stored."""
    children: dict[int, list[int]] = {}
    for b, blk in enumerate(blocks):
        children.setdefault(blk.after, []).append(b)
    ready: deque = deque()

    def release(parent):
        for b in children.get(parent, []):
            if b in done:
                release(b)
            else:
                ready.append(b)

    release(-1)
    cancelled_at = None          # time.monotonic() of the cancel, once seen
    running = {}
    while True:
        while ready and len(running) < pool.slots and cancelled_at is None:
            if cancelled():
                cancelled_at = time.monotonic()
                break
            group = [ready.popleft()]
            run = blocks[group[0]].run
            for b in [b for b in ready if blocks[b].run == run][:batch - 1]:
                ready.remove(b)
                group.append(b)
            fn, args = task([blocks[b] for b in group])
            running[pool.submit(fn, *args)] = group
        if not running:
            break
        for future in pool.wait_first(list(running), timeout=_POLL_S):
            group = running.pop(future)
            store([blocks[b] for b in group], pool.result(future))
            for b in group:
                release(b)
        if cancelled_at is None and cancelled():
            cancelled_at = time.monotonic()
        if running and cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_GRACE_S:
            pool.abandon(list(running))
            break
    return cancelled_at is not None


def is_cancelled(cancel) -> bool:
    """Whether ``cancel`` (None, a ``threading.Event`` or a callable) asks to stop."""
    if cancel is None:
        return False
    if isinstance(cancel, threading.Event):
        return cancel.is_set()
    return bool(cancel())
