"""G-KL: Gaussian Kullback–Leibler approximate inference with constrained covariances
(Challis & Barber, JMLR 2013).

- ``fit(prior_mean, prior_cov, H, likelihood, y, covariance=..., band=, rank=)`` — the
  general model N(w|μ, Σ) Π_n φ_n(wᵀh_n) (GP: ``H=None``; regression: H = X);
- ``structures`` — full, mean-field, banded, chevron, subspace, factor-analysis and
  "optimal" parameterisations of S (``COVARIANCES``);
- ``jaakkola_jordan`` — the local logistic bound the G-KL bound dominates (§5.1.2).

For GP models use ``bnlab.infer(model, X, y, method="gkl", covariance=...)``
(``bnlab.gkl.gp``): ``GKL`` is the family's record, registered here in
``bnlab.methods.DIRECT``, through which ``infer`` and the surfaces run it.
"""
from ..methods.registry import register
from .bound import kl_bound, site_expectations, site_precisions
from .fit import GKLFit, Solution, fit, solve
from .local_bound import jaakkola_jordan
from .prior import GaussianPrior, make_prior
from .structures import COVARIANCES, make_structure
from .gp import GKL

register(GKL, built_in=True)

__all__ = ["fit", "solve", "GKLFit", "Solution", "kl_bound", "site_expectations",
           "site_precisions", "jaakkola_jordan", "GaussianPrior", "make_prior", "COVARIANCES",
           "make_structure", "GKL"]
