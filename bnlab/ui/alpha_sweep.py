"""The α explorer's data: Power EP converged at every α of a grid from near VI (α → 0)
to EP (α = 1), and VI itself, computed once per problem in one compiled program, so
that the page can show any α (the slider, ▶) from stored results.

The program runs the engine's whole iteration (``Stepper.engine.run_pure``, the loop
``bnlab.infer`` runs) for each α in turn under ``lax.scan``, then EP's and VI's runs,
and predicts each posterior's band at the plotting grid. A scan rather than a ``vmap``
over α: on a CPU a vmapped while-loop runs every α for as many iterations as the
slowest one and evaluates both branches of every ``lax.cond``; the scan costs what the
separate runs cost, in one dispatch (benchmarks/README.md, "α explorer").

Each α's result is what ``bnlab.infer(method="pep", alpha=α)`` returns at the same
settings (``tests/ui/test_ui_alpha_explorer.py`` checks it), with the lab's stop words:
converged, diverged (why, from the last step's PSD flags, as ``Runner.stop_reason``
says it), stalled (the energy unchanged for ``STALL_ITERS`` iterations, read off the
trace) or stopped at the cap.

``AlphaSweepModel`` is the α explorer's model (no Panel): the sweep it holds, the α
shown and ▶'s play from VI to EP."""
from __future__ import annotations

import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
import param

import bnlab

from .runner import STALL_ITERS, STOP_REASONS
from .settings import LabSettings

__all__ = ["ALPHAS", "MAX_ITERS", "alpha_sweep", "surprising_point", "sweep_note", "diverged",
           "AlphaSweepModel"]

#: 21 powers log-spaced from 10⁻³ to 1, each rounded to two significant figures so that
#: the grid holds the round values a lesson quotes (10⁻³, 0.25, 0.5, 1: the α tour's)
ALPHAS = tuple(float(f"{a:.2g}") for a in np.logspace(-3, 0, 21))
MAX_ITERS = 300
TOL = 1e-6
#: the runs' trace arrays: a power of two ≥ ``MAX_ITERS``
TRACE_LENGTH = 1 << (MAX_ITERS - 1).bit_length()


def diverged(stop) -> bool:
    return stop is not None and stop.startswith("diverged")


@functools.lru_cache(maxsize=8)
def _program(pep, ep, vi, trace_length: int):
    """The compiled sweep for these engines (``get_engine`` shares them between sessions,
    so every problem of the same structure and sizes reuses the program)."""

    def solve(engine, params, X, y, settings, Xs):
        state, trace, n, converged, diverged_ = engine.run_pure(
            params, X, y, settings, MAX_ITERS, None, trace_length)
        mean, cov = engine.predict_pure(params, X, state, Xs)
        last = jnp.maximum(n - 1, 0)
        return {"energy": state.energy, "trace": trace.energy, "iterations": n,
                "converged": converged, "diverged": diverged_,
                "posterior_psd": trace.posterior_psd[last], "cavity_psd": trace.cavity_psd[last],
                "mean": mean[:, 0], "var": cov[:, 0, 0],
                "marginals": state.marginals, "sites": state.sites}

    def sweep(params, X, y, Xs, alphas, settings):
        def at(carry, alpha):
            return carry, solve(pep, params, X, y, settings._replace(alpha=alpha), Xs)

        _, powers = jax.lax.scan(at, None, alphas)
        return powers, solve(ep, params, X, y, settings, Xs), solve(vi, params, X, y,
                                                                     settings, Xs)

    return jax.jit(sweep)


def _stop(run: dict) -> str:
    """The run's ``STOP_REASONS`` key, derived as ``Runner.stop_reason`` derives it."""
    if run["diverged"]:
        return ("diverged_posterior" if not run["posterior_psd"] else
                "diverged_cavity" if not run["cavity_psd"] else "diverged_nonfinite")
    if run["converged"]:
        return "converged"
    energies = np.asarray(run["trace"])[:int(run["iterations"])]
    for k in range(STALL_ITERS, len(energies)):
        tail = energies[k - STALL_ITERS:k + 1]
        if np.all(np.isfinite(tail)) and np.ptp(tail) <= 1e-12 * (1.0 + abs(tail[-1])):
            return "stalled"
    return "cap"


def _band(problem, run: dict) -> dict:
    sd = 2 * np.sqrt(np.maximum(np.asarray(run["var"]), 0.0))
    mean = np.asarray(run["mean"])
    return {"x": problem.xs_plot, "mean": mean, "lower": mean - sd, "upper": mean + sd}


def _result(problem, run: dict) -> dict:
    stop = _stop(run)
    return {"energy": np.nan if diverged(stop) else float(run["energy"]), "stop": stop,
            "iterations": int(run["iterations"]), "band": _band(problem, run),
            "state": (run["marginals"], run["sites"])}


def alpha_sweep(problem, settings: LabSettings, alphas=ALPHAS) -> dict:
    """Power EP converged at each α of ``alphas`` (the last must be 1: EP), and VI, at
    the sidebar's damping, step control, acceleration and cubature: per α the converged
    energy (NaN where diverged), the stop reason, the iterations, the ±2σ band of the
    first latent at the plotting grid and the state (marginals, sites) that the
    per-point picture needs."""
    alphas = tuple(float(a) for a in alphas)
    if alphas[-1] != 1.0 or min(alphas) <= 0:
        raise ValueError(f"the α grid must lie in (0, 1] and end at EP's α = 1, got {alphas}")
    p = problem

    def stepper(method):
        return bnlab.Stepper(p.model, p.X, p.y, method, damping=settings.rho,
                             tol=TOL, backtracking=settings.backtrack,
                             acceleration=settings.accelerate, params=p.params,
                             cubature=("gauss_hermite", int(settings.cubature_order)))

    pep, ep, vi = (stepper(m) for m in ("pep", "ep", "vi"))
    program = _program(pep.engine, ep.engine, vi.engine, TRACE_LENGTH)
    powers, ep_run, vi_run = jax.device_get(program(pep.params, pep.X, pep.y, jnp.asarray(p.Xs),
                                                    jnp.asarray(alphas[:-1]), pep.settings))
    runs = [_result(p, jax.tree_util.tree_map(lambda a, k=k: a[k], powers))
            for k in range(len(alphas) - 1)] + [_result(p, ep_run)]
    return {"alpha": alphas, "energy": [r["energy"] for r in runs],
            "stop": [r["stop"] for r in runs], "iterations": [r["iterations"] for r in runs],
            "bands": [r["band"] for r in runs], "states": [r["state"] for r in runs],
            "vi": _result(p, vi_run), "problem": p, "rho": settings.rho,
            "x_label": p.x_label, "data": {"x": p.x_plot, "y": np.asarray(p.y)}}


def surprising_point(sweep: dict) -> int:
    """The data point farthest from EP's posterior mean (α = 1, else the largest α
    that did not diverge): an outlier, a misclassified label: where α shows."""
    k = max((k for k, st in enumerate(sweep["stop"]) if not diverged(st)), default=None)
    if k is None:
        return 0
    y = np.asarray(sweep["problem"].y, float)
    return int(np.argmax(np.abs(y - np.asarray(sweep["states"][k][0].mean[:, 0]))))


def sweep_note(sweep: dict) -> str:
    """The damping the sweep ran at (the sidebar's, where the pair has its own), and what
    its plots leave out, and why (numbers and fixed words only)."""
    lines = [f"Every run at the sidebar's damping ρ = {sweep['rho']:g}"]
    for st in sorted({st for st in sweep["stop"] if diverged(st)}):
        alphas = ", ".join(f"{a:g}" for a, s in zip(sweep["alpha"], sweep["stop"]) if s == st)
        lines.append(f"<b class='bn-bad'>diverged</b> at α = {alphas}: "
                     f"{STOP_REASONS[st].removeprefix('diverged: ')}; no energy or band is drawn")
    unconverged = [f"{a:g}" for a, s in zip(sweep["alpha"], sweep["stop"])
                   if s in ("cap", "stalled")]
    if unconverged:
        lines.append(f"<b class='bn-warn'>not converged</b> within {MAX_ITERS} iterations at "
                     f"α = {', '.join(unconverged)}: drawn at their last iterate")
    if diverged(sweep["vi"]["stop"]):
        lines.append("<b class='bn-bad'>VI diverged</b>: no VI line or band")
    return "<br>".join(lines)


class AlphaSweepModel(param.Parameterized):
    """The α explorer's model: one sweep of the sidebar's problem (``compute``), the α
    shown (``index``, its number in ``ALPHAS``) and ▶, which plays α from the grid's
    first value, next to VI, to EP, one ``advance`` per frame of the view's clock.
    Each play carries a generation number, as the Live page's runs do: Pause, a new
    play or a new sweep draws a new number, and a frame of an older one moves nothing,
    so no order of clicks leaves two plays going."""

    index = param.Integer(default=ALPHAS.index(0.5), bounds=(0, len(ALPHAS) - 1))
    playing = param.Boolean(default=False)
    computing = param.Boolean(default=False, doc="a sweep is being computed")

    def __init__(self, settings: LabSettings, **params):
        super().__init__(**params)
        self.settings = settings
        self.sweep = None
        self.closed = False
        self._generation = 0
        self._lock = threading.Lock()          # a frame's test and move against Pause

    def compute(self, problem) -> bool:
        """Every α of the grid for ``problem`` (ValueError as ``alpha_sweep`` raises it);
        False if the page closed meanwhile (the sweep is dropped)."""
        self.pause()
        self.computing = True
        try:
            sweep = alpha_sweep(problem, self.settings)
        finally:
            self.computing = False
        if self.closed:
            return False
        self.sweep = sweep
        return True

    def play(self) -> int | None:
        """▶ from the grid's first α; the play's generation (None without a sweep)."""
        if self.sweep is None:
            return None
        self.pause()
        with self._lock:
            self._generation += 1
            generation = self._generation
        self.index, self.playing = 0, True
        return generation

    def advance(self, generation: int):
        """One frame of the play numbered ``generation``: the next α; nothing if that
        play was paused or replaced. The last α ends it."""
        with self._lock:
            if generation != self._generation or self.sweep is None:
                return
            k = min(self.index + 1, len(ALPHAS) - 1)
            self.index = k
        if k == len(ALPHAS) - 1:
            self.pause(generation)

    def pause(self, generation: int | None = None):
        """End the current play (its later frames move nothing); with ``generation``,
        only if that play is still the current one (a new ▶ may have replaced it)."""
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            self._generation += 1
        self.playing = False

    def close(self):
        """The page is gone: ▶ stops, a sweep under way is dropped when it ends."""
        self.closed = True
        self.pause()
        self.sweep = None
