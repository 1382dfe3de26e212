"""The Compare page's pair, without Panel: two methods on the same problem, each at its
own α and ρ, run to their stop (``run_pair``), and what its table says of each run."""
from __future__ import annotations

from typing import NamedTuple

from bnlab.methods import REGISTRY

from .alpha_sweep import MAX_ITERS
from .runner import STOP_REASONS, Runner
from .settings import LabSettings


def method_alpha(method: str, settings: LabSettings, alpha=None) -> float:
    """The α ``method`` runs at: ``alpha`` (default the sidebar's α) for the methods
    that take one (``LabSettings.takes_alpha``), whatever the sidebar's own method is;
    1 for the others."""
    if not settings.takes_alpha(method):
        return 1.0
    return float(settings.alpha if alpha is None else alpha)


def converge(problem, method, settings: LabSettings, alpha=None, rho=None,
             max_iters=MAX_ITERS) -> Runner:
    """A Runner at (α, ρ) of its own (``method_alpha``; ρ default the sidebar's),
    stepped until it stops: converged, diverged, stalled or at ``max_iters``."""
    r = Runner(problem, method, alpha=method_alpha(method, settings, alpha),
               rho=settings.rho if rho is None else rho, tol=1e-6,
               backtrack=settings.backtrack, accelerate=settings.accelerate,
               cubature_order=settings.cubature_order,
               options=settings.options_for(method),
               max_iters=max_iters)
    while r.stop_reason() is None:
        r.step(1)
    return r


def status_word(run) -> str:
    """converged / diverged (how) / not converged (cap or stalled), for tables."""
    stop = run.stop_reason()
    return {"converged": "converged", "cap": f"not converged ({run.iteration} iterations)",
            "stalled": "stalled (not converged)"}.get(stop, (STOP_REASONS.get(stop) or "running"))


def alpha_cell(method: str, alpha: float | None) -> str:
    """The table's α: the one that ran (``alpha``; None for a method without one), "1
    (EP)" for Power EP's energy at its fixed α (the ep record), "—" for the others."""
    if alpha is not None:
        return f"{alpha:g}"
    return "1 (EP)" if REGISTRY[method].energy == "pep" else "—"


class PairRun(NamedTuple):
    """One side of the pair: its label, method, the α it ran at (None for a method
    without α), its ρ and its run, stopped."""
    label: str
    method: str
    alpha: float | None
    rho: float
    runner: Runner


def run_pair(problem, settings: LabSettings, sides) -> list[PairRun]:
    """Each side, (method, α, ρ), run to its stop on ``problem`` (α as ``method_alpha``
    gives it); the second of two equal methods is labelled "(B)". A ValueError names
    the method that could not run."""
    runs = []
    for method, alpha, rho in sides:
        alpha = method_alpha(method, settings, alpha)
        try:
            runner = converge(problem, method, settings, alpha=alpha, rho=rho)
        except ValueError as exc:
            raise ValueError(f"{method}: {exc}") from exc
        label = method if all(r.label != method for r in runs) else f"{method} (B)"
        runs.append(PairRun(label, method, alpha if settings.takes_alpha(method) else None,
                            rho, runner))
    return runs
