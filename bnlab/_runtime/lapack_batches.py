"""Batched LAPACK calls on the CPU in slices small enough to run on their own thread.

jaxlib 0.10 splits a batched LAPACK call (Cholesky, eigh, triangular solve, LU, QR …)
larger than a few hundred kilobytes over XLA's intra-op thread pool, from inside a
task of that same pool, and blocks until its pieces are done. When every worker of the
pool is such a waiting call, no worker is left to run the pieces and the process hangs
for good: two surface blocks solved side by side on two cores, or a single program with
two independent batched factorisations, is enough. Every worker then sleeps in
``BlockingCounter::Wait`` and the caller in ``BlockUntilReady``, at 0 % CPU. jaxlib 0.9.2
hangs the same way (on eigh); jaxlib 0.11.2 does not (a public report says 0.11.1
removed that path from its public builds). So the slicing is applied below
``FIXED_IN``, the first jaxlib seen not to hang.

On the CPU each such primitive's batch is lowered as a loop over slices of at most
``SLICE_BYTES`` of its first operand, each slice one LAPACK call below the size at
which jaxlib splits it; a single matrix of any size is one call, as before (jaxlib
does not split one matrix). The values are those of the batched call: the same LAPACK
routine on the same matrices. ``install`` is called by ``bnlab.configure``
(``configure``), before bnlab compiles anything; with a newer jaxlib it leaves JAX as
it is."""
from __future__ import annotations

import math
import re

#: the most bytes of a primitive's first operand one LAPACK call gets (jaxlib 0.10
#: split calls from 256 KiB for Cholesky and below that for eigh; the smallest
#: batched eigh seen to hang had 200 KiB)
SLICE_BYTES = 32 * 1024

#: the first jaxlib seen not to deadlock (see above)
FIXED_IN = (0, 11, 2)

_installed = False


def needed(jaxlib_version: str | None = None) -> bool:
    """Whether this jaxlib (``jaxlib.version.__version__`` unless given) predates
    ``FIXED_IN``."""
    if jaxlib_version is None:
        from jaxlib.version import __version__ as jaxlib_version
    release = tuple(int(p) for p in re.findall(r"\d+", jaxlib_version)[:3])
    return release < FIXED_IN


def _primitives():
    from jax._src.lax import linalg
    names = ("cholesky_p", "eigh_p", "triangular_solve_p", "lu_p", "geqrf_p",
             "householder_product_p", "ormqr_p", "svd_p", "eig_p", "schur_p",
             "hessenberg_p", "tridiagonal_p", "tridiagonal_solve_p")
    return [getattr(linalg, n) for n in names if hasattr(linalg, n)]


def slice_length(item_bytes: int) -> int:
    """How many batch items one call takes: as many as fit in ``SLICE_BYTES``, at
    least one."""
    return max(1, SLICE_BYTES // max(1, item_bytes))


def _sliced_rule(prim, rule):
    """``rule`` for a batch that fits one slice; otherwise a loop over slices."""
    import jax
    import jax.numpy as jnp
    from jax._src.interpreters import mlir

    core_ndim = 1 if prim.name == "tridiagonal_solve" else 2

    def lowering(ctx, *operands, **params):
        first = ctx.avals_in[0]
        batch = first.shape[:max(0, first.ndim - core_ndim)]
        size = math.prod(batch)
        item_bytes = math.prod(first.shape[len(batch):]) * first.dtype.itemsize
        step = slice_length(item_bytes)
        if size <= step:
            return rule(ctx, *operands, **params)

        def looped(*args):
            flat = [a.reshape((size,) + a.shape[len(batch):]) for a in args]
            pad = -size % step
            flat = [jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]) if pad else a
                    for a in flat]
            sliced = [a.reshape((-1, step) + a.shape[1:]) for a in flat]
            out = jax.lax.map(lambda xs: prim.bind(*xs, **params), sliced)
            unslice = lambda o: o.reshape((-1,) + o.shape[2:])[:size].reshape(
                batch + o.shape[2:])
            return [unslice(o) for o in out] if prim.multiple_results else unslice(out)

        return mlir.lower_fun(looped, multiple_results=prim.multiple_results)(ctx, *operands)

    return lowering


def install() -> bool:
    """Replace the CPU lowering of every batched LAPACK primitive by the sliced one
    (once per process); False if this jaxlib does not need it or has no such registry
    to patch."""
    global _installed
    if _installed:
        return True
    if not needed():
        return False
    from jax._src.interpreters import mlir
    cpu = getattr(mlir, "_platform_specific_lowerings", {}).get("cpu")
    if cpu is None:
        return False
    for prim in _primitives():
        entry = cpu.get(prim)
        if entry is not None:
            mlir.register_lowering(prim, _sliced_rule(prim, entry.rule), platform="cpu",
                                   inline=entry.inline)
    _installed = True
    return True
