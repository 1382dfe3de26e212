"""Hyperparameter learning: joint optimisation of a method's energy, and the hybrid
VEM procedure of Li, John & Solin (2023, Algorithm 1).

Hyperparameters are optimised as logarithms (all of them are positive) with optax
Adam. Names follow the surface grid axes (``bnlab.hyperparameters``: "lengthscale",
"variance", "noise", …; with several latent functions the kernel names get a suffix
"_0", "_1", …), so the returned trajectories can be drawn on a surface.

**Joint** (``joint``): after every Adam step the sites are re-converged at the new θ
(warm started); the gradient is the derivative of the energy with the sites held
fixed. At a VI optimum the ELBO is stationary in the sites, and at an EP fixed point
so is the EP energy, so that partial derivative *is* the total derivative (R&W §3.6,
§5.5.2). The Laplace energy is not stationary in the sites (W depends on the mode,
R&W eq. 5.23's third-derivative term), so for Laplace-type energies the gradient is
taken through two undamped Newton steps started from the fixed sites: one Newton step
moves the mode with the exact implicit derivative (its Jacobian in the starting point
vanishes at the fixed point), the second evaluates W there.

**Hybrid** (``hybrid``, Algorithm 1): E-step = ``e_steps`` CVI natural-gradient steps
(ρ_E = 0.1) on the ELBO; M-step = ``m_steps`` Adam steps (ρ_M = 0.01) on the EP energy
with the VI sites held fixed (``stop_gradient``: Li et al. eq. 11 is not differentiated
through the E-step);
stop and revert when L_EP decreases between outer iterations, or when the parameters
stop changing (``np.allclose``). Settings from Li et al. App. D.2; the initial site
precision is the engine's 0.01 rather than the reference code's 1e−6.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import hyperparameters
from .._runtime.compiled import CompiledCache
from ..engine.loop import get_engine
from ..engine.state import make_settings
from ..infer import prepare_problem, validate_data, validate_settings

__all__ = ["LearningResult", "joint", "hybrid", "learnable", "objective_gradient"]

FIXED_BY_DEFAULT = ("df",)   # Student-t ν is fixed in Li et al. (2023, §5.3)


class LearningResult(NamedTuple):
    params: dict                  # learned hyperparameters (model.init_params() layout)
    sites: object                 # final sites (engine Sites)
    trajectory: dict              # name → (steps + 1, …) hyperparameter values
    objective: np.ndarray         # (steps + 1,) the objective at each recorded θ
    stop_reason: str              # "max_steps" | "converged" | "ep_decreased" | "diverged"
                                  # (alternated_ep: also "line_search_failed")
    elbo: np.ndarray | None = None    # hybrid only: the ELBO after each E-step


def learnable(model, params, learn=None):
    """(names, to_free, from_free): the learned hyperparameters as a dict of logs, named
    as a surface's axes are (``bnlab.hyperparameters.separate_names``: each name sets one
    entry). ``learn`` restricts them (default: every one except the Student-t degrees
    of freedom)."""
    choices = hyperparameters.separate_names(params)
    where = hyperparameters.locations(params)
    if learn is None:
        learn = [n for n in choices if where[n][0][2] not in FIXED_BY_DEFAULT]
    unknown = [n for n in learn if n not in choices]
    if unknown or not learn:
        raise ValueError(f"cannot learn {unknown or 'nothing'}; choose from {sorted(choices)}")
    names = list(learn)

    def to_free(p):
        return {n: jnp.log(jnp.asarray(hyperparameters.value(p, n), float)) for n in names}

    def from_free(free, base=params):
        return hyperparameters.assign(base, {n: jnp.exp(free[n]) for n in names})

    return names, to_free, from_free


def _unroll(engine):
    return 2 if engine.method.energy == "laplace" else 0


def _fixed_site_objective(engine, from_free, unroll):
    """The method's energy at fixed sites as a function of (log θ, base θ, sites, X, y,
    settings); Laplace-type energies through ``unroll`` undamped Newton steps."""
    def objective(free, base, sites, X, y, settings):
        params = from_free(free, base)
        state = engine.init_pure(params, X, y, settings, jax.lax.stop_gradient(sites))
        newton = settings._replace(rho=jnp.asarray(1.0))
        for _ in range(unroll):
            state, _ = engine.step_pure(params, X, y, newton, state)
        return state.energy
    return objective


def objective_gradient(model, X, y, method, params, sites, *, learn=None, alpha=1.0,
                       cubature=("gauss_hermite", 20)):
    """(energy, d energy / d log θ) at converged ``sites`` — the gradient ``joint`` uses."""
    X, y = validate_data(model, X, y)
    engine = get_engine(model, method, cubature)
    names, to_free, from_free = learnable(model, params, learn)
    objective = _fixed_site_objective(engine, from_free, _unroll(engine))
    settings = make_settings(alpha, 0.5, 1e-8)
    value, grad = jax.value_and_grad(objective)(to_free(params), params, sites, X, y, settings)
    return float(value), {k: np.asarray(v) for k, v in grad.items()}


_STEPS = CompiledCache(maxsize=16)


def _compiled_adam_step(engine, model, params, names, learning_rate):
    """(jit of one Adam step on log θ at fixed sites, the optimiser that initialises its
    state), shared by every ``joint`` call with the same engine, learned names and rate
    (the base θ is an argument)."""
    def build():
        import optax            # here, not at import: ``import bnlab`` stays light
        _, _, from_free = learnable(model, params, list(names))
        objective = _fixed_site_objective(engine, from_free, _unroll(engine))
        optimizer = optax.adam(learning_rate)

        def adam_step(free, opt_state, base, sites, X, y, settings):
            grad = jax.grad(objective)(free, base, sites, X, y, settings)
            updates, opt_state = optimizer.update(jax.tree_util.tree_map(jnp.negative, grad),
                                                  opt_state, free)
            return optax.apply_updates(free, updates), opt_state
        return jax.jit(adam_step), optimizer
    return _STEPS.get(("adam", engine, tuple(names), learning_rate), build)


def _compiled_hybrid_steps(model, params, names, cubature, e_steps, m_steps, m_rate):
    """jit of the hybrid E-step (``e_steps`` CVI steps), M-step (``m_steps`` Adam steps
    on the EP energy at fixed sites) and that energy, and the M-step's optimiser, shared
    across ``hybrid`` calls."""
    vi = get_engine(model, "vi", cubature)
    ep_like = get_engine(model, "ep_like", cubature)

    def build():
        import optax            # here, not at import: ``import bnlab`` stays light
        _, _, from_free = learnable(model, params, list(names))
        l_ep = _fixed_site_objective(ep_like, from_free, 0)
        optimizer = optax.adam(m_rate)

        def e_step(free, base, sites, X, y, settings):
            p = from_free(free, base)
            state = vi.init_pure(p, X, y, settings, sites)
            state = jax.lax.fori_loop(0, e_steps,
                                      lambda i, s: vi.step_pure(p, X, y, settings, s)[0], state)
            return state.sites, state.energy

        def m_step(free, opt_state, base, sites, X, y, settings):
            def body(carry, _):
                free, opt_state = carry
                grad = jax.grad(l_ep)(free, base, sites, X, y, settings)
                updates, opt_state = optimizer.update(
                    jax.tree_util.tree_map(jnp.negative, grad), opt_state, free)
                return (optax.apply_updates(free, updates), opt_state), None

            (free, opt_state), _ = jax.lax.scan(body, (free, opt_state), None, length=m_steps)
            return free, opt_state, l_ep(free, base, sites, X, y, settings)
        return jax.jit(e_step), jax.jit(m_step), jax.jit(l_ep), optimizer
    return _STEPS.get(("hybrid", vi, ep_like, tuple(names), e_steps, m_steps, m_rate), build)


def joint(model, X, y, method="vi", *, params=None, learn=None, steps=300, learning_rate=0.05,
          alpha=1.0, damping=0.5, max_iters=200, tol=1e-8, ftol=1e-7, xtol=1e-5,
          cubature=("gauss_hermite", 20)) -> LearningResult:
    """Maximise ``method``'s energy (ELBO for 'vi', EP energy for 'ep', Laplace for
    'laplace', …) jointly: Adam on log θ, sites re-converged between gradient steps.
    Stops after ``steps`` steps, or when the objective changes by less than
    ftol·(1 + |L|) and log θ by less than ``xtol``."""
    validate_settings(method, alpha, damping, max_iters, tol)
    X, y, params = prepare_problem(model, X, y, params)
    names, to_free, from_free = learnable(model, params, learn)
    engine = get_engine(model, method, cubature)
    settings = make_settings(alpha, damping, tol, True, True)  # as ``bnlab.infer``
    adam_step, optimizer = _compiled_adam_step(engine, model, params, names,
                                               float(learning_rate))

    free = to_free(params)
    state, _, _, _, diverged = engine.run(from_free(free), X, y, settings, max_iters=int(max_iters))
    if bool(diverged):
        raise ValueError(f"{method} diverged at the initial hyperparameters; "
                         f"try a smaller damping")
    opt_state = optimizer.init(free)
    history = [(free, float(state.energy))]
    reason = "max_steps"
    for _ in range(int(steps)):
        new_free, new_opt = adam_step(free, opt_state, params, state.sites, X, y, settings)
        new_state, _, _, _, div = engine.run(from_free(new_free), X, y, settings,
                                             max_iters=int(max_iters), sites=state.sites)
        if bool(div):           # the warm start left the basin: converge from scratch
            new_state, _, _, _, div = engine.run(from_free(new_free), X, y, settings,
                                                 max_iters=int(max_iters))
        if bool(div):
            reason = "diverged"
            break
        change = abs(float(new_state.energy) - history[-1][1])
        moved = max(float(jnp.max(jnp.abs(new_free[n] - free[n]))) for n in names)
        free, opt_state, state = new_free, new_opt, new_state
        history.append((free, float(state.energy)))
        if change < ftol * (1 + abs(history[-1][1])) and moved < xtol:
            reason = "converged"
            break
    return result_from_history(history, from_free, names, state.sites, reason)


def result_from_history(history, from_free, names, sites, reason, elbo=None):
    """A ``LearningResult`` from [(log θ dict, objective), …], the last entry learned."""
    trajectory = {n: np.stack([np.exp(np.asarray(f[n])) for f, _ in history]) for n in names}
    objective = np.array([v for _, v in history])
    params = jax.tree_util.tree_map(np.asarray, from_free(history[-1][0]))
    return LearningResult(params, sites, trajectory, objective, reason,
                          None if elbo is None else np.asarray(elbo))


def hybrid(model, X, y, *, params=None, learn=None, outer=10000, e_steps=20, m_steps=20,
           e_rate=0.1, m_rate=0.01, cubature=("gauss_hermite", 20)) -> LearningResult:
    """Li, John & Solin (2023) Algorithm 1: CVI E-steps on the ELBO, Adam M-steps on the
    EP energy with the sites held fixed; revert and stop when L_EP decreases."""
    for name, v in (("outer", outer), ("e_steps", e_steps), ("m_steps", m_steps)):
        if int(v) < 1:
            raise ValueError(f"{name} must be at least 1, got {v}")
    if not (0 < e_rate <= 1 and m_rate > 0):
        raise ValueError(f"e_rate must lie in (0, 1] and m_rate be positive, got {e_rate}, {m_rate}")
    X, y, params = prepare_problem(model, X, y, params)
    names, to_free, from_free = learnable(model, params, learn)
    vi = get_engine(model, "vi", cubature)
    e_settings = make_settings(1.0, e_rate, 1e-8)
    e_step, m_step, l_ep, optimizer = _compiled_hybrid_steps(
        model, params, names, cubature, int(e_steps), int(m_steps), float(m_rate))
    free = to_free(params)
    sites = vi.init_pure(from_free(free), X, y, e_settings).sites
    opt_state = optimizer.init(free)
    history = [(free, float(l_ep(free, params, sites, X, y, e_settings)))]
    elbo = [np.nan]
    reason = "max_steps"
    for k in range(int(outer)):
        new_sites, new_elbo = e_step(free, params, sites, X, y, e_settings)
        new_free, new_opt, value = m_step(free, opt_state, params, new_sites, X, y, e_settings)
        value = float(value)
        if not np.isfinite(value):
            reason = "diverged"
            break
        if k > 0 and value < history[-1][1]:
            reason = "ep_decreased"      # Algorithm 1: return λ(k−1), θ(k−1)
            break
        same = all(np.allclose(np.asarray(new_free[n]), np.asarray(free[n])) for n in names)
        free, opt_state, sites = new_free, new_opt, new_sites
        history.append((free, value))
        elbo.append(float(new_elbo))
        if same:
            reason = "converged"
            break
    return result_from_history(history, from_free, names, sites, reason, elbo)
