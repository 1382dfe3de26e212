"""Likelihoods p(y_n | f_n) for one observation and D latent values f_n ∈ R^D.

Each likelihood gives, as pure functions of its parameter dict:
- ``log_prob(params, y, f)`` — exact log density (no clipped links);
- ``conditional_moments(params, f)`` — E[y|f] and Cov[y|f] (for Gauss–Newton, Taylor
  and posterior linearisation; Wilkinson et al. 2023, eqs. 28–40);
- ``expected_log_prob`` — E_{N(m, C)}[log p(y|f)] (VI, eq. 13–15), closed form where
  one exists, cubature otherwise;
- ``log_expected_power`` — log E_{N(m, C)}[p(y|f)^α] (Power EP, eq. 21–22), closed
  form where one exists, log-sum-exp cubature otherwise;
- ``slr_moments`` — the statistical linear regression moments of E[y|f] under N(m, C)
  (posterior linearisation, eqs. 28–31), closed form where one exists (probit),
  cubature otherwise;
- ``validate_targets(y)`` — a ValueError that names the offending rows.

``predictive_moments(likelihood, params, mean, cov)`` evaluates E[y] and Var[y] at many
points in one compiled call (``predictive.py``).

Flags used by the engine: ``num_latents`` (D), ``log_concave`` (site precisions of
Laplace/VI/EP stay non-negative, which allows the fast B = I + W½KW½ factorisation),
``gaussian_form`` (p(y|f) = N(y | E[y|f], Cov[y|f]) exactly, eq. 33, so the residual
Gauss–Newton of eqs. 34–38 applies; otherwise the generalised GN of eqs. 39–40).
"""
from .base import Likelihood
from .bernoulli import Bernoulli
from .gaussian import Gaussian, Heteroscedastic
from .poisson import Poisson
from .predictive import predictive_moments
from .product import Product
from .robust import Laplace, StudentT

__all__ = ["Likelihood", "Gaussian", "Bernoulli", "Poisson", "StudentT", "Laplace",
           "Heteroscedastic", "Product", "LIKELIHOODS", "predictive_moments"]

#: name → a callable making the likelihood: with no argument (its defaults), or with its
#: hyperparameters (the keys of its ``init_params()``) as keywords. The lab offers every
#: entry (an entry added here included) and builds it from its controls that way.
LIKELIHOODS = {"bernoulli": Bernoulli, "probit": lambda: Bernoulli("probit"),
               "logit": lambda: Bernoulli("logit"), "gaussian": Gaussian, "poisson": Poisson,
               "student_t": StudentT, "laplace": Laplace, "heteroscedastic": Heteroscedastic,
               "product": Product}
