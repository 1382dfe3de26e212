"""Branches that stay branches when the step is ``vmap``-ped over grid points.

Under ``jax.vmap`` a ``lax.cond`` whose predicate differs between the points becomes a
``select``: both branches run for every point. The batched surfaces
(``bnlab.studies.surfaces.batched``) vmap the engine's step over a named axis and say so here
(``over``), with each point's *active* flag (a converged or diverged point's lane is
still computed, its result dropped); ``cond`` then decides for the whole batch: the
false branch alone where no active point takes the true one, the true branch alone
where every active point does, and both (with a select) only where they differ. The
decision is a ``psum`` over the named axis, which is the same for every point, so the
``lax.cond`` that reads it stays a branch under ``vmap``. Outside a batched surface
(``infer``, the scan path) ``cond`` is ``lax.cond``.
"""
from __future__ import annotations

import contextlib
import threading

import jax
import jax.numpy as jnp

__all__ = ["over", "cond", "current"]

_LOCAL = threading.local()


@contextlib.contextmanager
def over(axis_name: str, active):
    """While tracing inside ``jax.vmap(..., axis_name=axis_name)``: ``active`` is this
    point's flag (a traced bool) saying its result will be kept."""
    previous = getattr(_LOCAL, "axis", None)
    _LOCAL.axis = (axis_name, active)
    try:
        yield
    finally:
        _LOCAL.axis = previous


def current():
    """(axis name, active flag) of the batched step being traced, or None."""
    return getattr(_LOCAL, "axis", None)


def cond(pred, true_fn, false_fn, *operands):
    """``lax.cond(pred, true_fn, false_fn, *operands)``; inside ``over``, one decision
    for the batch (module docstring): a branch runs for every point only where an
    active point needs it."""
    axis = current()
    if axis is None:
        return jax.lax.cond(pred, true_fn, false_fn, *operands)
    name, active = axis
    takes = jax.lax.psum((pred & active).astype(jnp.int32), name)
    live = jax.lax.psum(jnp.asarray(active).astype(jnp.int32), name)

    def both(*ops):
        return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b),
                                      true_fn(*ops), false_fn(*ops))

    path = jnp.where(takes == 0, 0, jnp.where(takes == live, 1, 2))
    return jax.lax.switch(path, [false_fn, true_fn, both], *operands)
