"""One inference run driven step by step through the engine's step API, and the plot
data derived from its state. No Panel here: the UI components only render what
``Runner.snapshot()`` returns, so everything is testable without a browser."""
from __future__ import annotations

import threading

import jax
import numpy as np

import bnlab
from bnlab.likelihoods import predictive_moments
from bnlab.methods import DIRECT

from .problem import Problem

__all__ = ["Runner", "DirectRunner", "make_runner", "ellipse_points"]


#: iterations with an unchanged energy after which a run is stopped as stalled: a
#: fixed point the method's own test does not recognise must not show as "running"
STALL_ITERS = 50

#: why a run stopped (``_Run.stop_reason``), as the status line words it
STOP_REASONS = {
    "converged": "converged",
    "diverged_posterior": "diverged: a step gave a posterior that is not positive definite",
    "diverged_cavity": "diverged: a step needed a cavity that is not positive definite "
                       "(its energy is undefined)",
    "diverged_nonfinite": "diverged: a step produced non-finite values (the iteration blew up)",
    "cap": "stopped at the iteration cap, not converged",
    "stalled": f"stopped: the energy has not moved for {STALL_ITERS} iterations although "
               "the method's convergence test has not fired",
}


class _Run:
    """What both runners share: a lock around the run's state, the iteration cap, why
    the run stopped, and the plot data of its latest state, computed once per state
    (``_compute_snapshot``)."""

    def __init__(self, max_iters: int | None = None):
        self._lock = threading.Lock()
        self._cache = None
        self.max_iters = max_iters

    def set_cap(self, max_iters: int | None):
        """A new iteration cap for this run (a run stopped at the old one may go on)."""
        with self._lock:
            self.max_iters, self._cache = max_iters, None

    def stop_reason(self) -> str | None:
        """A key of ``STOP_REASONS``, or None while the run may go on. Derived from what
        the engine reports per step (its converged and diverged flags, the PSD checks
        of the rejected step) and the cap, so every method family says the same."""
        if self.diverged:
            return ("diverged_posterior" if not self.posterior_psd[-1] else
                    "diverged_cavity" if not self.cavity_psd[-1] else "diverged_nonfinite")
        if self.converged:
            return "converged"
        if self.max_iters is not None and self.iteration >= self.max_iters:
            return "cap"
        tail = np.asarray(self.energy[-STALL_ITERS - 1:])
        if len(tail) > STALL_ITERS and np.all(np.isfinite(tail)) and \
                np.ptp(tail) <= 1e-12 * (1.0 + abs(tail[-1])):
            return "stalled"
        return None

    def snapshot(self) -> dict:
        """Plain-numpy data for every plot of the live view."""
        with self._lock:
            if self._cache is None:
                self._cache = self._compute_snapshot()
            return self._cache


class Runner(_Run):
    """A site-method run: ``reset()``, ``step(k)``, ``snapshot()`` (thread-safe)."""

    def __init__(self, problem: Problem, method: str, *, alpha=1.0, rho=0.5, tol=1e-8,
                 backtrack=True, accelerate=True, cubature_order=20, options=(),
                 max_iters: int | None = None):
        if method in DIRECT:
            raise ValueError(f"{method} has no site steps: use DirectRunner (make_runner does)")
        self.problem, self.method, self.alpha = problem, method, float(alpha)
        self.cubature = ("gauss_hermite", int(cubature_order))
        self.stepper = bnlab.Stepper(problem.model, problem.X, problem.y, method, alpha=alpha,
                                     damping=rho, tol=tol, backtracking=backtrack,
                                     acceleration=accelerate, params=problem.params,
                                     cubature=self.cubature, **dict(options))
        super().__init__(max_iters)
        self.reset()
        # compile the step now (once per engine and data shape), not on the first click
        jax.block_until_ready(self.stepper.step(self.state))

    # -- driving --------------------------------------------------------------------
    def reset(self):
        with self._lock:
            self.state = self.stepper.init()
            self.iteration = 0
            self.energy = [float(self.state.energy)]
            self.posterior_psd, self.cavity_psd, self.max_change = [True], [True], [np.nan]
            self.accepted = [True]      # the proposal became the iterate (its PSD flags
            self.diverged = self.converged = False      # describe the proposal either way)
            self.rejected, self.step_size = 0, float(self.state.step_size)  # step control
            self.step_sizes = [self.step_size]
            self._cache = None

    def step(self, k: int = 1) -> int:
        """Up to k iterations (fewer when the run has diverged or reached its cap);
        returns the number taken. A non-PSD posterior is recorded, the run stops there.
        A converged run may still be stepped (the Step button): each step re-tests."""
        taken = 0
        with self._lock:
            for _ in range(k):
                if self.diverged or (self.max_iters is not None
                                     and self.iteration >= self.max_iters):
                    break
                self.state, info = self.stepper.step(self.state)
                info = jax.device_get(info)
                self.iteration += 1
                taken += 1
                self.energy.append(float(info.energy))
                self.posterior_psd.append(bool(info.posterior_psd))
                self.cavity_psd.append(bool(info.cavity_psd))
                self.max_change.append(float(info.max_change))
                self.accepted.append(bool(info.accepted))
                self.rejected += int(not info.accepted and not info.diverged)
                self.step_size = float(self.state.step_size)
                self.step_sizes.append(self.step_size)
                self.diverged = bool(info.diverged)
                self.converged = bool(info.converged)
            self._cache = None
        return taken

    # -- plot data ------------------------------------------------------------------
    def _compute_snapshot(self):
        p, st = self.problem, self.state
        mean, cov = self.stepper.predict(st, p.Xs)
        ey, vy = predictive_moments(p.model.likelihood, p.params["likelihood"], mean, cov,
                                    self.cubature)
        mean, cov, ey, vy, sites = jax.device_get((mean, cov, ey, vy, st.sites))
        return _assemble(self, mean, cov, ey, vy, np.asarray(sites.nat1)[:, 0],
                         np.asarray(sites.prec)[:, 0, 0])

    # -- one point's local picture ---------------------------------------------------
    def local(self, i: int) -> dict:
        """q(fᵢ), the cavity and the tilted distribution at data point ``i`` under the
        current iterate (``bnlab.studies.tilted_marginal``), at the run's α: Power EP's
        own, α = 1 (EP's) for the methods without one, whose sites define a cavity all
        the same. A ValueError for two-latent likelihoods."""
        from bnlab.studies import tilted_marginal
        with self._lock:
            st = self.state
        p = self.problem
        return tilted_marginal(p.model.likelihood, p.params["likelihood"], p.y[i],
                               st.marginals, st.sites, int(i), self.alpha)

    # -- two-point view -------------------------------------------------------------
    def joint(self, i: int, j: int):
        """Mean (2,) and covariance (2, 2) of (f₁(x_i), f₁(x_j)) under the current q
        (``Stepper.joint_covariance``: full GP models only, a ValueError otherwise)."""
        with self._lock:
            st = self.state
            D = st.sites.nat1.shape[1]
            C = self.stepper.joint_covariance(st, i, j)[np.ix_([0, D], [0, D])]
            m = np.asarray(st.marginals.mean)[[i, j], 0]
        return m, C

    def joint_view(self, i: int, j: int) -> dict:
        """Plot data for the two-point view: mean, covariance, 2σ ellipse, correlation."""
        m, C = self.joint(i, j)
        corr = C[0, 1] / np.sqrt(C[0, 0] * C[1, 1]) if C[0, 0] * C[1, 1] > 0 else np.nan
        return {"indices": (int(i), int(j)), "mean": m, "cov": C, "corr": float(corr),
                "ellipse": ellipse_points(m, C)}


def _shown_energy(run) -> float:
    """The energy of the iterate on screen: a diverged run ends with its rejected step
    (energy NaN), so the last energy that is not NaN (−∞ is a legitimate value)."""
    if not run.diverged:
        return run.energy[-1]
    return next((e for e in reversed(run.energy) if not np.isnan(e)), np.nan)


def _assemble(run, mean, cov, ey, vy, nat1, prec) -> dict:
    """Plain-numpy plot data from predictions at the plotting grid (latent mean (Ns, D),
    covariance blocks (Ns, D, D), predictive E[y], Var[y]) and the sites."""
    p = run.problem
    bands = {}
    for d in range(mean.shape[1]):
        sd = np.sqrt(np.maximum(cov[:, d, d], 0.0))
        bands[f"f{d + 1}"] = {"x": p.xs_plot, "mean": mean[:, d],
                              "lower": mean[:, d] - 2 * sd, "upper": mean[:, d] + 2 * sd}
    if isinstance(p.model.likelihood, bnlab.likelihoods.Bernoulli):   # E[y] of ±1 labels
        prob = 0.5 * (np.asarray(ey) + 1.0)
        predictive = {"x": p.xs_plot, "mean": prob, "lower": prob, "upper": prob,
                      "kind": "probability"}
    else:
        sd = np.sqrt(np.maximum(vy, 0.0))
        predictive = {"x": p.xs_plot, "mean": ey, "lower": ey - 2 * sd, "upper": ey + 2 * sd,
                      "kind": "y"}
    order = np.argsort(p.x_plot)
    its = np.arange(len(run.energy))
    return {
        "data": {"x": p.x_plot, "y": np.asarray(p.y)},
        "bands": bands,
        "predictive": predictive,
        "trace": {"iteration": its, "energy": np.asarray(run.energy),
                  "step_size": np.asarray(run.step_sizes, float),
                  "max_change": np.asarray(run.max_change, float)},
        "psd": {"iteration": its, "posterior_psd": np.asarray(run.posterior_psd),
                "cavity_psd": np.asarray(run.cavity_psd), "accepted": np.asarray(run.accepted)},
        "sites": {"x": p.x_plot[order], "nat1": np.asarray(nat1)[order],
                  "prec": np.asarray(prec)[order]},
        "status": {"iteration": run.iteration, "energy": _shown_energy(run),
                   "converged": run.converged, "diverged": run.diverged,
                   "last_step_psd": bool(run.posterior_psd[-1]),
                   "last_step_cavity_psd": bool(run.cavity_psd[-1]),
                   "max_change": run.max_change[-1], "rejected": run.rejected,
                   "step_size": run.step_size, "first_step_size": run.step_sizes[0],
                   "stop": run.stop_reason(),
                   "max_iters": run.max_iters},
    }


class DirectRunner(_Run):
    """A direct family (``bnlab.methods.DIRECT``; G-KL, Challis & Barber 2013) optimises
    (m, C) directly, so it has no site iterations to step through: the first ``step``
    solves the whole optimisation with ``bnlab.infer(method=...)`` and the energy trace
    is the optimiser's bound per iteration. Same interface as ``Runner``. Sites are not
    defined (shown empty)."""

    def __init__(self, problem: Problem, method: str, *, options=None, cubature_order=20,
                 tol=1e-8, max_iters=500):
        if type(problem.model) is not bnlab.GP or problem.model.num_latents != 1:
            raise ValueError(f"{method} needs the full GP model with a one-latent likelihood")
        self.problem, self.method = problem, method
        self.options = dict(options or {})
        self.cubature, self.tol = ("gauss_hermite", int(cubature_order)), tol
        super().__init__(max_iters)
        self.reset()

    def reset(self):
        with self._lock:
            self.result, self.iteration = None, 0
            self.energy, self.posterior_psd, self.cavity_psd = [np.nan], [True], [True]
            self.max_change, self.accepted = [np.nan], [True]
            self.diverged = self.converged = False
            self.rejected, self.step_size = 0, np.nan    # no site steps, no step control
            self.step_sizes = [np.nan]
            self._cache = None

    def step(self, k: int = 1) -> int:
        with self._lock:
            if self.result is not None:
                return 0
            p = self.problem
            opts = {k_: v for k_, v in self.options.items() if v is not None}
            self.result = r = bnlab.infer(p.model, np.asarray(p.X), np.asarray(p.y),
                                          method=self.method, params=p.params,
                                          max_iters=self.max_iters, tol=self.tol,
                                          cubature=self.cubature, **opts)
            n = r.n_iters
            self.energy = [np.nan] + list(np.asarray(r.trace.energy)[:n])
            self.posterior_psd = [True] + [not r.diverged] * n
            self.cavity_psd = [True] * (n + 1)
            self.accepted = [True] + [not r.diverged] * n
            self.max_change = [np.nan] * (n + 1)
            self.step_sizes = [np.nan] * (n + 1)
            self.iteration, self.converged, self.diverged = n, r.converged, r.diverged
            self._cache = None
            return n

    def stop_reason(self) -> str | None:
        """As for site runs; a solved direct run that neither converged nor diverged
        used up its ``max_iters`` optimiser iterations."""
        if self.result is None:
            return None
        return super().stop_reason() or "cap"

    def _compute_snapshot(self):
        p = self.problem
        N = len(p.x_plot)
        Ns = len(p.xs_plot)
        if self.result is None:   # before solving: the prior
            mean = np.zeros((Ns, 1))
            cov = np.asarray(p.model.prior_variance(p.params, p.Xs))
        else:
            m, v = self.result.predict(np.asarray(p.Xs))
            mean, cov = np.asarray(m)[:, None], np.asarray(v)[:, None, None]
        ey, vy = jax.device_get(predictive_moments(p.model.likelihood, p.params["likelihood"],
                                                   mean, cov, self.cubature))
        return _assemble(self, mean, cov, ey, vy, np.full(N, np.nan), np.full(N, np.nan))

    def local(self, i: int) -> dict:
        raise ValueError(f"{self.method} fits q directly: it has no sites, so no cavity or "
                         "tilted distribution to show")

    def joint(self, i: int, j: int):
        with self._lock:
            if self.result is None:
                raise ValueError(f"press run or step to solve {self.method} first")
            C = np.asarray(self.result.joint_covariance(i, j))
            m = np.asarray(self.result.mean)[[i, j]]
        return m, C

    joint_view = Runner.joint_view


def make_runner(problem: Problem, settings):
    """The runner for the settings' method (``LabSettings``)."""
    if settings.method in DIRECT:
        return DirectRunner(problem, settings.method,
                            options=settings.direct_options() if settings.structured() else {},
                            cubature_order=settings.cubature_order, max_iters=settings.max_iters)
    return Runner(problem, settings.method, alpha=settings.effective_alpha(), rho=settings.rho,
                  backtrack=settings.backtrack, accelerate=settings.accelerate,
                  cubature_order=settings.cubature_order,
                  options=settings.method_options(), max_iters=settings.max_iters)


def ellipse_points(mean, cov, scale=2.0, n=120):
    """Points on {f : (f − m)ᵀ C⁻¹ (f − m) = scale²} (the scale-σ contour of N(m, C))."""
    w, V = np.linalg.eigh(np.asarray(cov))
    t = np.linspace(0, 2 * np.pi, n)
    circle = np.stack([np.cos(t), np.sin(t)], 1)
    return np.asarray(mean) + scale * (circle * np.sqrt(np.maximum(w, 0.0))) @ V.T
