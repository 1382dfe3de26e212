"""Heavy-tailed noise for data with outliers: Student-t and Laplace."""
from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.special import gammaln, logsumexp, ndtr

from ..special import log_ndtr
from .base import Likelihood, _positive


class StudentT(Likelihood):
    """Robust regression: y = f + σ t_ν; ``params = {"scale": σ, "df": ν}`` (ν given).
    Not log-concave: EP and Newton sites may get negative precisions (Jylänki et al. 2011).
    The tilted integrals of EP/PEP are peaked when σ is small against the cavity's
    spread: use a high cubature order there (see ``cubature.log_expectation_exp``)."""

    name = "student_t"
    label = "Student-t (robust)"

    def __init__(self, df=4.0, scale=0.1):
        self.df, self.scale = _positive("StudentT", df=df, scale=scale)

    def init_params(self):
        return {"df": jnp.asarray(self.df), "scale": jnp.asarray(self.scale)}

    def log_prob(self, params, y, f):
        nu, s = params["df"], params["scale"]
        z2 = (y - f[0]) ** 2 / (nu * s**2)
        return (gammaln(0.5 * (nu + 1)) - gammaln(0.5 * nu) - 0.5 * jnp.log(nu * jnp.pi * s**2)
                - 0.5 * (nu + 1) * jnp.log1p(z2))

    def conditional_moments(self, params, f):
        nu, s = params["df"], params["scale"]
        var = jnp.where(nu > 2, s**2 * nu / jnp.where(nu > 2, nu - 2, 1.0), jnp.inf)
        return f[:1], jnp.reshape(var, (1, 1))

    def sample(self, params, f, rng):
        return f[:, 0] + float(params["scale"]) * rng.standard_t(float(params["df"]), len(f))


class Laplace(Likelihood):
    """y = f + ε with ε ~ Laplace(0, b): log p = −log 2b − |y − f|/b (log-concave, not
    twice differentiable at y = f: the Newton Hessian is 0 there)."""

    name = "laplace"
    label = "Laplace (robust)"
    log_concave = True

    def __init__(self, scale=0.1):
        self.scale, = _positive("Laplace", scale=scale)

    def init_params(self):
        return {"scale": jnp.asarray(self.scale)}

    def log_prob(self, params, y, f):
        b = params["scale"]
        return -jnp.log(2 * b) - jnp.abs(y - f[0]) / b

    def conditional_moments(self, params, f):
        return f[:1], jnp.reshape(2 * params["scale"] ** 2, (1, 1))

    def expected_log_prob(self, params, y, mean, cov, rule):
        # E|X| for X ~ N(μ, s²): s√(2/π) e^{−μ²/2s²} + μ(1 − 2Φ(−μ/s))  (folded normal)
        b, mu, s = params["scale"], y - mean[0], jnp.sqrt(cov[0, 0])
        e_abs = s * jnp.sqrt(2 / jnp.pi) * jnp.exp(-0.5 * (mu / s) ** 2) + mu * (1 - 2 * ndtr(-mu / s))
        return -jnp.log(2 * b) - e_abs / b

    def log_expected_power(self, params, y, mean, cov, alpha, rule):
        # E[exp(−c|X|)], X ~ N(μ, s²), c = α/b:
        #   e^{c²s²/2 − cμ} Φ(μ/s − cs) + e^{c²s²/2 + cμ} Φ(−μ/s − cs)
        b, mu, s = params["scale"], y - mean[0], jnp.sqrt(cov[0, 0])
        c = alpha / b
        a1 = 0.5 * (c * s) ** 2 - c * mu + log_ndtr(mu / s - c * s)
        a2 = 0.5 * (c * s) ** 2 + c * mu + log_ndtr(-mu / s - c * s)
        return -alpha * jnp.log(2 * b) + logsumexp(jnp.stack([a1, a2]))

    def log_expected_power_in_closed_form(self, alpha):
        return True

    def sample(self, params, f, rng):
        return f[:, 0] + rng.laplace(0.0, float(params["scale"]), len(f))
