"""Counts with an exponential link."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from .base import Likelihood, _rows


class Poisson(Likelihood):
    """Counts y ∈ {0, 1, …} with rate exp(f): log p = y f − e^f − log y!."""

    name = "poisson"
    label = "Poisson"
    log_concave = True

    def log_prob(self, params, y, f):
        return y * f[0] - jnp.exp(f[0]) - gammaln(y + 1.0)

    def conditional_moments(self, params, f):
        rate = jnp.exp(f[:1])
        return rate, jnp.reshape(rate, (1, 1))

    def expected_log_prob(self, params, y, mean, cov, rule):
        # E[e^f] = exp(m + v/2) exactly
        return y * mean[0] - jnp.exp(mean[0] + 0.5 * cov[0, 0]) - gammaln(y + 1.0)

    def validate_targets(self, y):
        y = super().validate_targets(y)
        bad = (y < 0) | (y != np.round(y))
        if bad.any():
            raise ValueError(f"Poisson likelihood needs non-negative integer counts; rows "
                             f"{_rows(bad)} have values such as {np.unique(y[bad])[:5].tolist()}")
        return y

    def sample(self, params, f, rng):
        return rng.poisson(np.exp(np.asarray(f[:, 0]))).astype(float)
