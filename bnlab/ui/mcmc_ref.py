"""The MCMC reference for the live view: posterior band and samples of latent pairs
from ``bnlab.studies.mcmc`` (the gold standard), when that module is installed."""
from __future__ import annotations

import hashlib
from collections import OrderedDict

import jax
import numpy as np

from . import catalog

#: problems whose samples a session keeps: changing the method (or α, ρ …) rebuilds the
#: run but not the problem, and the reference must come back without resampling
CACHED_PROBLEMS = 4


def problem_key(problem) -> str:
    """A digest of what the exact posterior depends on: the model (its kernel,
    likelihood and structure), its hyperparameters (inducing inputs included) and the
    data."""
    leaves, tree = jax.tree_util.tree_flatten(problem.params)
    h = hashlib.sha256(f"{problem.model!r}|{tree}".encode())
    for a in (problem.X, problem.y, *leaves):
        h.update(np.ascontiguousarray(np.asarray(a, float)).tobytes())
    return h.hexdigest()


class MCMCReference:
    """Holds MCMC samples of the latent values at the training inputs for one problem,
    and the last few problems' samples (a method change recomputes nothing)."""

    def __init__(self):
        self._cache = OrderedDict()
        self.clear()

    def clear(self):
        self.samples = None       # (S, N) samples of f₁ at the training inputs
        self.x = None

    def recall(self, problem, num_temps=300, num_chains=64, seed=0) -> bool:
        """Show the kept samples of ``problem`` if it was sampled (True), else nothing."""
        key = (problem_key(problem), num_temps, num_chains, seed)
        if key not in self._cache:
            self.clear()
            return False
        self._cache.move_to_end(key)
        self.weights, self.samples, self.log_z, self.log_z_se = self._cache[key]
        self.x = problem.x_plot
        return True

    @staticmethod
    def reason() -> str | None:
        if not catalog.available()["mcmc"]:
            return "the MCMC gold standard (bnlab.studies.mcmc) is not in this bnlab version yet"
        return None

    def compute(self, problem, num_temps=300, num_chains=64, seed=0):
        """Annealed importance sampling with elliptical-slice transitions
        (``bnlab.studies.mcmc.ais``): weighted posterior samples of the latents."""
        reason = self.reason()
        if reason:
            raise ValueError(reason)
        if self.recall(problem, num_temps, num_chains, seed):
            return
        from bnlab.studies import mcmc
        res = mcmc.ais(problem.model, problem.X, problem.y, params=problem.params,
                       num_temps=num_temps, num_chains=num_chains, seed=seed)
        D = problem.model.num_latents
        f = np.asarray(res.samples)[:, ::D]                  # latent f₁ at each input
        logw = np.asarray(res.log_weights, float)
        w = np.exp(logw - logw.max())
        key = (problem_key(problem), num_temps, num_chains, seed)
        self._cache[key] = (w / w.sum(), f, float(res.log_z), float(res.log_z_se))
        while len(self._cache) > CACHED_PROBLEMS:
            self._cache.popitem(last=False)
        self.recall(problem, num_temps, num_chains, seed)

    def band(self):
        if self.samples is None:
            return None
        order = np.argsort(self.x)
        m = self.weights @ self.samples
        sd = np.sqrt(np.maximum(self.weights @ (self.samples - m) ** 2, 0.0))
        m, sd = m[order], sd[order]
        return {"x": self.x[order], "mean": m, "lower": m - 2 * sd, "upper": m + 2 * sd}

    def pair(self, i: int, j: int):
        if self.samples is None:
            return None
        draws = np.random.default_rng(0).choice(len(self.weights), 400, p=self.weights)
        return self.samples[draws][:, [i, j]]
