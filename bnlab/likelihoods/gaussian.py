"""Gaussian observation noise: fixed variance (``Gaussian``) or a second latent GP for
its log variance (``Heteroscedastic``)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .base import LOG2PI, Likelihood, _positive, log_softplus


class Gaussian(Likelihood):
    """y = f + ε, ε ~ N(0, σ²); ``params = {"noise": σ²}``. Every expectation is exact."""

    name = "gaussian"
    label = "Gaussian"
    log_concave = True
    gaussian_form = True
    exact_expectations = True      # closed forms; SLR of the linear E[y|f] by cubature

    def __init__(self, noise=0.1):
        self.noise, = _positive("Gaussian", noise=noise)

    def init_params(self):
        return {"noise": jnp.asarray(self.noise)}

    def log_prob(self, params, y, f):
        s2 = params["noise"]
        return -0.5 * (LOG2PI + jnp.log(s2) + (y - f[0]) ** 2 / s2)

    def conditional_moments(self, params, f):
        return f[:1], jnp.reshape(params["noise"], (1, 1))

    def expected_log_prob(self, params, y, mean, cov, rule):
        s2 = params["noise"]
        return -0.5 * (LOG2PI + jnp.log(s2) + ((y - mean[0]) ** 2 + cov[0, 0]) / s2)

    def log_expected_power(self, params, y, mean, cov, alpha, rule):
        # N(y|f,σ²)^α = (2πσ²)^{(1-α)/2} α^{-1/2} N(y | f, σ²/α)
        s2 = params["noise"]
        v = cov[0, 0] + s2 / alpha
        return (0.5 * (1 - alpha) * (LOG2PI + jnp.log(s2)) - 0.5 * jnp.log(alpha)
                - 0.5 * (LOG2PI + jnp.log(v) + (y - mean[0]) ** 2 / v))

    def log_expected_power_in_closed_form(self, alpha):
        return True

    def predictive_moments(self, params, mean, cov, rule):
        return mean[0], cov[0, 0] + params["noise"]

    def sample(self, params, f, rng):
        return f[:, 0] + np.sqrt(float(params["noise"])) * rng.standard_normal(len(f))


class Heteroscedastic(Likelihood):
    """Input-dependent noise (Goldberg et al. 1997; Wilkinson et al. 2023 eq. 72):
    y ~ N(f₁, φ(f₂)²) with φ = softplus; two latent GPs."""

    name = "heteroscedastic"
    label = "Heteroscedastic Gaussian (2 latents)"
    num_latents = 2
    gaussian_form = True

    def log_prob(self, params, y, f):
        log_sd = log_softplus(f[1])
        return -0.5 * (LOG2PI + 2 * log_sd + ((y - f[0]) * jnp.exp(-log_sd)) ** 2)

    def conditional_moments(self, params, f):
        return f[:1], jnp.reshape(jax.nn.softplus(f[1]) ** 2, (1, 1))

    def sample(self, params, f, rng):
        f = np.asarray(f)
        return f[:, 0] + np.logaddexp(0, f[:, 1]) * rng.standard_normal(len(f))
