"""The MCMC reference for the live view: posterior band and samples of latent pairs
from ``bnlab.studies.mcmc`` (the gold standard), when that module is installed."""
from __future__ import annotations

import numpy as np

from . import catalog


class MCMCReference:
    """Holds MCMC samples of the latent values at the training inputs for one problem."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.samples = None       # (S, N) samples of f₁ at the training inputs
        self.x = None

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
        from bnlab.studies import mcmc
        res = mcmc.ais(problem.model, problem.X, problem.y, params=problem.params,
                       num_temps=num_temps, num_chains=num_chains, seed=seed)
        D = problem.model.num_latents
        f = np.asarray(res.samples)[:, ::D]                  # latent f₁ at each input
        logw = np.asarray(res.log_weights, float)
        w = np.exp(logw - logw.max())
        self.weights = w / w.sum()
        self.samples, self.x = f, problem.x_plot
        self.log_z, self.log_z_se = res.log_z, res.log_z_se

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
