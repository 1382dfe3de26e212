"""Two latent GPs multiplied: amplitude demodulation (``Product``)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .base import LOG2PI, Likelihood, _positive


class Product(Likelihood):
    """Amplitude demodulation (Turner & Sahani 2011; Wilkinson et al. 2023 eq. 73):
    y ~ N(f₁ · φ(f₂), σ²) with φ = softplus; ``params = {"noise": σ²}``."""

    name = "product"
    label = "Product / amplitude (2 latents)"
    num_latents = 2
    gaussian_form = True

    def __init__(self, noise=0.1):
        self.noise, = _positive("Product", noise=noise)

    def init_params(self):
        return {"noise": jnp.asarray(self.noise)}

    def log_prob(self, params, y, f):
        s2 = params["noise"]
        mu = f[0] * jax.nn.softplus(f[1])
        return -0.5 * (LOG2PI + jnp.log(s2) + (y - mu) ** 2 / s2)

    def conditional_moments(self, params, f):
        return jnp.reshape(f[0] * jax.nn.softplus(f[1]), (1,)), jnp.reshape(params["noise"], (1, 1))

    def sample(self, params, f, rng):
        f = np.asarray(f)
        return (f[:, 0] * np.logaddexp(0, f[:, 1])
                + np.sqrt(float(params["noise"])) * rng.standard_normal(len(f)))
