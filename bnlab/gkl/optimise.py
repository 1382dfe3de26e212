"""Maximise the bound with L-BFGS (optax's ``lbfgs`` with a zoom line search that
enforces the strong Wolfe conditions), as a pure ``lax.while_loop`` — jit-able and
vmap-able over hyperparameters.

L-BFGS is the paper's choice for the non-concave cases (FA, Student-t: §6.1, §6.2)
and, on the concave structures, converges to the unique maximum; the prior
preconditioning of structures.py keeps the problem well conditioned, which is what
a quasi-Newton method needs. Stopping: the bound changed by at most
tol·(1 + |B|) over one iteration *and* the largest gradient entry is below
√tol·(1 + |B|)/D; ``budget`` (at most ``max_iters``, the trace's length) bounds the
work. A non-finite bound stops the run as diverged, at the last finite iterate.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Maximised", "maximise"]


class Maximised(NamedTuple):
    params: Any
    value: jnp.ndarray        # the bound at ``params``
    trace: jnp.ndarray        # (max_iters,) bound after each iteration, NaN after the end
    n_iters: jnp.ndarray
    converged: jnp.ndarray
    diverged: jnp.ndarray


def _max_abs(tree):
    return jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in jax.tree_util.tree_leaves(tree)
                              if x.size]))


def maximise(objective, params0, *, max_iters: int, tol, dim: int, memory: int = 20,
             budget=None) -> Maximised:
    """Maximise ``objective(params)`` from ``params0`` (a pytree of arrays) in at most
    ``budget`` iterations (a run-time value; default ``max_iters``, which is static: the
    trace's length)."""
    import optax                # here, not at import: ``import bnlab`` stays light
    budget = max_iters if budget is None else budget
    negative = lambda p: -objective(p)
    opt = optax.lbfgs(memory_size=memory,
                      linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=40))
    value_and_grad = optax.value_and_grad_from_state(negative)
    value0 = objective(params0)

    def cond(carry):
        i, _, _, _, _, done, _ = carry
        return (i < jnp.minimum(budget, max_iters)) & ~done

    def body(carry):
        i, params, state, value, trace, _, _ = carry
        neg_value, grad = value_and_grad(params, state=state)
        updates, new_state = opt.update(grad, state, params, value=neg_value, grad=grad,
                                        value_fn=negative)
        new_params = optax.apply_updates(params, updates)
        new_value = -optax.tree_utils.tree_get(new_state, "value")
        new_grad = optax.tree_utils.tree_get(new_state, "grad")
        finite = jnp.isfinite(new_value) & jnp.isfinite(_max_abs(new_grad))
        scale = 1.0 + jnp.abs(new_value)
        small_change = jnp.abs(new_value - value) <= tol * scale
        small_grad = _max_abs(new_grad) <= jnp.sqrt(tol) * scale / dim
        keep = lambda new, old: jax.tree_util.tree_map(
            lambda a, b: jnp.where(finite, a, b), new, old)
        params_out = keep(new_params, params)
        value_out = jnp.where(finite, new_value, value)
        trace = trace.at[i].set(value_out)
        done = ~finite | (small_change & small_grad)
        return (i + 1, params_out, keep(new_state, state), value_out, trace, done,
                ~finite)

    carry = (jnp.asarray(0), params0, opt.init(params0), value0,
             jnp.full(max_iters, jnp.nan), ~jnp.isfinite(value0), ~jnp.isfinite(value0))
    n, params, _, value, trace, done, diverged = jax.lax.while_loop(cond, body, carry)
    return Maximised(params, value, trace, n, done & ~diverged, diverged)
