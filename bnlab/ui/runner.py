"""One inference run driven step by step through the engine's step API, and the plot
data derived from its state. No Panel here: the UI components only render what
``Runner.snapshot()`` returns, so everything is testable without a browser."""
from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np

from bnlab.engine import Settings, get_engine
from bnlab.inference import validate_settings

from .problem import Problem

__all__ = ["Runner", "band_function", "ellipse_points"]

_BAND_FNS: dict = {}


def band_function(engine):
    """jit(params, X, state, Xs) → latent mean/cov and predictive E[y], Var[y] at Xs
    (compiled once per engine)."""
    if engine not in _BAND_FNS:
        def bands(params, X, state, Xs):
            mean, cov = engine.predict_pure(params, X, state, Xs)
            ey, vy = jax.vmap(lambda m, C: engine.lik.predictive_moments(
                params["likelihood"], m, C, engine.rule))(mean, cov)
            return mean, cov, ey, vy
        _BAND_FNS[engine] = jax.jit(bands)
    return _BAND_FNS[engine]


class Runner:
    """A site-method run: ``reset()``, ``step(k)``, ``snapshot()`` (thread-safe)."""

    def __init__(self, problem: Problem, method: str, *, alpha=1.0, rho=0.5, tol=1e-8,
                 cubature_order=20, options=()):
        if method == "gkl":
            raise ValueError("G-KL has no site steps; it is not available in the live view yet")
        validate_settings(method, alpha, rho, 1, tol)
        self.problem, self.method = problem, method
        self.engine = get_engine(problem.model, method, ("gauss_hermite", int(cubature_order)),
                                 tuple(options))
        self.settings = Settings(jnp.asarray(float(alpha)), jnp.asarray(float(rho)),
                                 jnp.asarray(float(tol)))
        self._bands = band_function(self.engine)
        self._lock = threading.Lock()
        self.reset()
        # compile the step now (once per engine and data shape), not on the first click
        jax.block_until_ready(self.engine.step(problem.params, problem.X, problem.y,
                                               self.settings, self.state))

    # -- driving --------------------------------------------------------------------
    def reset(self):
        p = self.problem
        with self._lock:
            self.state = self.engine.init(p.params, p.X, p.y, self.settings)
            self.iteration = 0
            self.energy = [float(self.state.energy)]
            self.posterior_psd, self.cavity_psd, self.max_change = [True], [True], [np.nan]
            self.diverged = self.converged = False
            self._cache = None

    def step(self, k: int = 1) -> int:
        """Up to k iterations (fewer when the run has diverged or converged); returns
        the number taken. A non-PSD posterior is recorded, the run stops there."""
        p = self.problem
        taken = 0
        with self._lock:
            for _ in range(k):
                if self.diverged:
                    break
                self.state, info = self.engine.step(p.params, p.X, p.y, self.settings, self.state)
                info = jax.device_get(info)
                self.iteration += 1
                taken += 1
                self.energy.append(float(info.energy))
                self.posterior_psd.append(bool(info.posterior_psd))
                self.cavity_psd.append(bool(info.cavity_psd))
                self.max_change.append(float(info.max_change))
                self.diverged = not bool(info.accepted) or not np.isfinite(info.energy)
                self.converged = bool(info.accepted) and float(info.max_change) < float(self.settings.tol)
            self._cache = None
        return taken

    # -- plot data ------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Plain-numpy data for every plot of the live view."""
        with self._lock:
            if self._cache is None:
                self._cache = self._compute_snapshot()
            return self._cache

    def _compute_snapshot(self):
        p, st = self.problem, self.state
        mean, cov, ey, vy = jax.device_get(self._bands(p.params, p.X, st, p.Xs))
        D = mean.shape[1]
        bands = {}
        for d in range(D):
            sd = np.sqrt(np.maximum(cov[:, d, d], 0.0))
            bands[f"f{d + 1}"] = {"x": p.xs_plot, "mean": mean[:, d],
                                  "lower": mean[:, d] - 2 * sd, "upper": mean[:, d] + 2 * sd}
        if p.likelihood in ("probit", "logit"):
            prob = 0.5 * (np.asarray(ey) + 1.0)
            predictive = {"x": p.xs_plot, "mean": prob, "lower": prob, "upper": prob,
                          "kind": "probability"}
        else:
            sd = np.sqrt(np.maximum(vy, 0.0))
            predictive = {"x": p.xs_plot, "mean": ey, "lower": ey - 2 * sd, "upper": ey + 2 * sd,
                          "kind": "y"}
        sites = jax.device_get(st.sites)
        order = np.argsort(p.x_plot)
        its = np.arange(len(self.energy))
        return {
            "data": {"x": p.x_plot, "y": np.asarray(p.y)},
            "bands": bands,
            "predictive": predictive,
            "trace": {"iteration": its, "energy": np.asarray(self.energy)},
            "psd": {"iteration": its, "posterior_psd": np.asarray(self.posterior_psd),
                    "cavity_psd": np.asarray(self.cavity_psd)},
            "sites": {"x": p.x_plot[order], "nat1": np.asarray(sites.nat1)[order, 0],
                      "prec": np.asarray(sites.prec)[order, 0, 0]},
            "status": {"iteration": self.iteration, "energy": self.energy[-1],
                       "converged": self.converged, "diverged": self.diverged,
                       "max_change": self.max_change[-1]},
        }

    # -- two-point view -------------------------------------------------------------
    def joint(self, i: int, j: int):
        """Mean (2,) and covariance (2, 2) of (f₁(x_i), f₁(x_j)) under the current q."""
        from bnlab.models.full import FullPrior
        from bnlab.models.joint import joint_covariance
        with self._lock:
            st = self.state
            if not isinstance(st.prior, FullPrior):
                raise ValueError("the two-point view needs the full GP model")
            D = st.sites.nat1.shape[1]
            C = np.asarray(joint_covariance(st.prior, st.sites, i, j))[np.ix_([0, D], [0, D])]
            m = np.asarray(st.marginals.mean)[[i, j], 0]
        return m, C

    def joint_view(self, i: int, j: int) -> dict:
        """Plot data for the two-point view: mean, covariance, 2σ ellipse, correlation."""
        m, C = self.joint(i, j)
        corr = C[0, 1] / np.sqrt(C[0, 0] * C[1, 1]) if C[0, 0] * C[1, 1] > 0 else np.nan
        return {"indices": (int(i), int(j)), "mean": m, "cov": C, "corr": float(corr),
                "ellipse": ellipse_points(m, C)}


def ellipse_points(mean, cov, scale=2.0, n=120):
    """Points on {f : (f − m)ᵀ C⁻¹ (f − m) = scale²} (the scale-σ contour of N(m, C))."""
    w, V = np.linalg.eigh(np.asarray(cov))
    t = np.linspace(0, 2 * np.pi, n)
    circle = np.stack([np.cos(t), np.sin(t)], 1)
    return np.asarray(mean) + scale * (circle * np.sqrt(np.maximum(w, 0.0))) @ V.T
