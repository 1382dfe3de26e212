"""The protocol of a global update: prior × sites → posterior marginals.

Every model structure (full, sparse, Markov) provides one ``GlobalUpdate``; the engine
reads only these fields, so a new structure is one more record, never a probe of which
functions a module happens to define.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

__all__ = ["GlobalUpdate"]


class GlobalUpdate(NamedTuple):
    """``prepare(model, params, X) -> prior`` factors what depends only on θ and X;
    ``marginals(prior, sites) -> Marginals`` gives the posterior marginals (mean,
    covariance of each site variable, conditional variance, log normaliser and a PD
    flag); ``predict(model, params, X, prior, sites, marginals, Xs)`` the latent mean
    and covariance at new inputs.

    Optional specialisations the engine uses when they exist:
    ``marginals_nonnegative`` may assume every site precision is ≥ 0 (a cheaper,
    better-conditioned factorisation); ``marginals_mean_only`` and
    ``marginals_mean_only_nonnegative`` skip the marginal variances for methods that
    read only the posterior mean (the Laplace family)."""
    prepare: Callable[..., Any]
    marginals: Callable[..., Any]
    predict: Callable[..., Any]
    marginals_nonnegative: Optional[Callable[..., Any]] = None
    marginals_mean_only: Optional[Callable[..., Any]] = None
    marginals_mean_only_nonnegative: Optional[Callable[..., Any]] = None
