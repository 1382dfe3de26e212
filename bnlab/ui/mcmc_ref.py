"""The MCMC reference for the live view: posterior band and samples of latent pairs
from ``bnlab.mcmc`` (the gold standard), when that module is installed."""
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
            return "the MCMC gold standard (bnlab.mcmc) is not in this bnlab version yet"
        return None

    def compute(self, problem):
        reason = self.reason()
        if reason:
            raise ValueError(reason)
        from bnlab import mcmc
        samples = mcmc.sample_latents(problem.model, problem.X, problem.y, params=problem.params)
        f = np.asarray(samples)
        self.samples = f[..., 0] if f.ndim == 3 else f
        self.x = problem.x_plot

    def band(self):
        if self.samples is None:
            return None
        order = np.argsort(self.x)
        m, sd = self.samples.mean(0)[order], self.samples.std(0)[order]
        return {"x": self.x[order], "mean": m, "lower": m - 2 * sd, "upper": m + 2 * sd}

    def pair(self, i: int, j: int):
        if self.samples is None:
            return None
        return self.samples[:, [i, j]]
