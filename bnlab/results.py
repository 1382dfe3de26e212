"""What every method family answers with: ``Result`` (what ``bnlab.infer`` returns, site
methods and G-KL alike), its per-iteration ``Trace`` and the words ``stop_reason`` gives
for why a run stopped. Neutral ground below the engine and G-KL, so that neither family
imports the other's machinery for them, and the lab, the surfaces and scripts never ask
which family produced a result."""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from .model import validate_inputs

__all__ = ["Result", "Trace", "stop_reason"]


class Trace(NamedTuple):
    """Per-iteration records (arrays of the run's trace length; unused tail NaN/False)."""
    energy: Any
    step_size: Any
    max_change: Any
    posterior_psd: Any
    cavity_psd: Any
    min_site_precision: Any
    min_cavity_precision: Any
    accepted: Any                  # False: rejected (diverged, or by the step control)

    @property
    def psd(self):
        """One PSD flag per iteration: posterior and every cavity positive definite."""
        return self.posterior_psd & self.cavity_psd


def stop_reason(converged, diverged, posterior_psd=True, cavity_psd=True) -> str:
    """Why a run stopped, in words, from its outcome and the PSD flags of its last
    step (which describe the rejected proposal of a diverged run): "converged",
    "diverged: …" (which check failed) or "max_iters" (the iteration cap)."""
    if converged:
        return "converged"
    if diverged:
        if not posterior_psd:
            return "diverged: the posterior covariance is not positive definite"
        if not cavity_psd:
            return "diverged: a cavity is not positive definite"
        return "diverged: non-finite sites, mean or energy"
    return "max_iters"


class Result:
    """The outcome of one inference run.

    Fields every method sets: ``method``, ``model``, ``params``, ``X``, ``y``,
    ``log_marginal`` (the method's approximation of log p(y|θ)), ``trace``
    (per-iteration energy, step size, site change and PSD flags), ``n_iters``,
    ``converged``, ``diverged``, ``stop_reason`` ("converged", "diverged: …" saying which
    check failed, or "max_iters"), ``iterate`` (the iteration whose state the result
    holds) and the posterior marginals ``mean`` and ``cov`` at the training inputs.
    Methods: ``predict``, ``log_predictive``, ``joint_covariance``; a family provides
    ``_predict_points`` and ``_log_predictive_points`` on validated arrays."""

    def predict(self, X_test):
        """Latent predictive mean and variance at X_test ((Ns,) each for one latent;
        (Ns, D) and (Ns, D, D) for D latents)."""
        return self._predict_points(self._test_inputs(X_test))

    def log_predictive(self, X_test, y_test, reduce="mean"):
        """log ∫ p(y*|f*) q(f*) df* per test point (``reduce="none"``) or their mean."""
        Xs = self._test_inputs(X_test)
        ys = jax.device_put(self.model.likelihood.validate_targets(y_test))
        if Xs.shape[0] != ys.shape[0]:
            raise ValueError(f"X_test has {Xs.shape[0]} rows but y_test has {ys.shape[0]}")
        lpd = np.asarray(self._log_predictive_points(Xs, ys))
        return float(lpd.mean()) if reduce == "mean" else lpd

    def _test_inputs(self, X_test):
        """X_test validated, and checked with the training inputs against the kernels'
        float64 limits (a periodic kernel's phase between a test and a training input)."""
        Xs = validate_inputs(X_test, "X_test", width=self.X.shape[1])
        self.model.check_inputs(self.params, np.concatenate([np.asarray(self.X), Xs]))
        return jax.device_put(Xs)

    def __repr__(self):
        status = "converged" if self.converged else ("diverged" if self.diverged else
                                                     "not converged")
        return (f"{type(self).__name__}(method={self.method!r}, "
                f"log_marginal={self.log_marginal:.6g}, iterations={self.n_iters}, {status})")
