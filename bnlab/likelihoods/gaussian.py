"""Gaussian observation noise: fixed variance (``Gaussian``) or a second latent GP for
its log variance (``Heteroscedastic``)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .base import LOG2PI, Likelihood, _positive, log_softplus


#: the largest prior variance / noise ratio accepted (``Gaussian.check_scales``)
MAX_SIGNAL_TO_NOISE = 1e300
#: the most nats float64's rounding of the posterior mean may cost an energy that
#: evaluates (y − m)²/σ_n² (``Gaussian.check_energy``)
ENERGY_ROUNDING = 1e-6
#: those energies, as the refusal names them
ENERGY_NAMES = {"laplace": "Laplace's energy", "vfe": "the ELBO"}
#: the largest |log p(y)| bound accepted (``Gaussian.check_scales``)
MAX_LOG_EVIDENCE = 1e300
#: the largest prior variance / noise ratio at which pep_qn runs (``Gaussian.check_method``)
SECANT_CAVITY_MAX_RATIO = 1e4


class Gaussian(Likelihood):
    """y = f + ε, ε ~ N(0, σ²); ``params = {"noise": σ²}``. Every expectation is exact."""

    name = "gaussian"
    label = "Gaussian"
    log_concave = True
    gaussian_form = True
    exact_expectations = True      # closed forms; SLR of the linear E[y|f] by cubature
    constant_curvature = True      # site precision 1/σ_n² under every q

    def __init__(self, noise=0.1):
        self.noise, = _positive("Gaussian", noise=noise)

    def init_params(self):
        return {"noise": jnp.asarray(self.noise)}

    def check_scales(self, params, prior_variance, y):
        """Refuses a prior variance σ² more than ``MAX_SIGNAL_TO_NOISE`` times the noise
        σ_n² (the site precisions 1/σ_n² times the prior, I + KΛ̄, leave float64), and
        targets with ½‖y‖²/(Nσ² + σ_n²) > ``MAX_LOG_EVIDENCE``: since λ_max(K) ≤ tr K =
        Nσ², −log p(y) ≥ ½yᵀ(K + σ_n²I)⁻¹y ≥ that, beyond what the energies can hold."""
        noise = float(params["noise"])
        if prior_variance / noise > MAX_SIGNAL_TO_NOISE:
            raise ValueError(
                f"Gaussian noise {noise:.3g} against a prior variance of {prior_variance:.3g}: "
                f"their ratio exceeds {MAX_SIGNAL_TO_NOISE:g}, where the posterior's precision "
                f"(I + K/noise) leaves float64; raise the noise or lower the variance")
        scale = float(np.max(np.abs(y), initial=0.0))
        if scale == 0.0:
            return
        log_bound = (2 * np.log(scale) + np.log(np.sum((y / scale) ** 2)) - np.log(2.0)
                     - np.log(len(y) * prior_variance + noise))
        if log_bound > np.log(MAX_LOG_EVIDENCE):
            raise ValueError(
                f"y reaches {scale:.3g} against a prior variance of {prior_variance:.3g} and "
                f"Gaussian noise {noise:.3g}: log p(y) < −½‖y‖²/(Nσ² + noise) = "
                f"−10^{log_bound / np.log(10):.1f}, beyond {MAX_LOG_EVIDENCE:g} in size; "
                f"rescale y (and the variance and noise with its square)")

    def noise_variance(self, params):
        return float(params["noise"])

    def check_energy(self, params, y, energy):
        """Refuses the energies that evaluate (y − m)²/σ_n² at the posterior mean m
        (Laplace's, the ELBO) where float64's rounding of m, about ε·max|y| per point,
        costs them more than ``ENERGY_ROUNDING`` nats: N(ε·max|y|)²/σ_n². (Power) EP's
        energies take this likelihood's site in closed form and stay exact there."""
        if energy not in ("laplace", "vfe"):
            return
        noise = float(params["noise"])
        scale = float(np.max(np.abs(y), initial=0.0))
        rounding = len(y) * (np.finfo(float).eps * scale) ** 2     # cost × σ_n²
        with np.errstate(over="ignore"):
            cost = rounding / noise
        if cost > ENERGY_ROUNDING:
            size = f"{cost:.3g}" if np.isfinite(cost) else "more than 1e308"
            raise ValueError(
                f"Gaussian noise {noise:.3g} is too small for {ENERGY_NAMES[energy]} with y up "
                f"to {scale:.3g}: rounding the posterior mean to float64 costs it up to "
                f"{size} nats; use 'ep' or 'pep' (exact for a Gaussian likelihood) or "
                f"a noise above {rounding / ENERGY_ROUNDING:.1g}")

    def check_method(self, params, prior_variance, y, method):
        """Refuses pep_qn's site precision −P\\B(αB + P\\)⁻¹ (``Method.secant_cavity``)
        where σ²/σ_n² exceeds ``SECANT_CAVITY_MAX_RATIO``: with αB = −1/(v\\ + σ_n²/α)
        the sum αB + P\\ is of relative size σ_n²/(αv\\), v\\ ≤ σ² the cavity variance,
        so B's rounding and its secant noise (relative 1e-9, ``quasi_newton.SECANT_RTOL``
        squared) reach the site precision multiplied by αv\\/σ_n²: beyond 1e4 the
        iteration slows, stalls and then diverges. EP ('ep', 'pep'), whose site is this
        likelihood's own, is exact there."""
        if not method.secant_cavity:
            return
        noise = float(params["noise"])
        if prior_variance / noise > SECANT_CAVITY_MAX_RATIO:
            raise ValueError(
                f"Gaussian noise {noise:.3g} is too small for {method.name!r} against a prior "
                f"variance of {prior_variance:.3g}: its site precision −P\\B/(αB + P\\) "
                f"loses the digits of αB + P\\ beyond a ratio of {SECANT_CAVITY_MAX_RATIO:g}; "
                f"use 'ep' or 'pep' (exact for a Gaussian likelihood) or a noise above "
                f"{prior_variance / SECANT_CAVITY_MAX_RATIO:.1g}")

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

    def initial_site_precision(self, params):
        """1/σ_n², every method's fixed-point precision for a full GP."""
        return 1.0 / params["noise"]

    def power_ep_site(self, params, y, cavity_mean, cond_var, alpha):
        """With log Z = log N(y | m\\, v\\ + c + σ²/α) (c the sparse GP's K_nn − Q_nn), the
        site precision −H = −h/(α(1 + v\\h)) is 1/(σ² + αc) and J = (y − m\\)/(σ² + αc):
        the likelihood itself for a full GP, whatever the cavity. From log Z's
        derivatives 1 + v\\h = (c + σ²/α)/(v\\ + c + σ²/α) cancels wherever the noise
        is small against the cavity variance: at σ² = 1e-50 it was 0 and no site ever
        moved; at σ² = 1e-2 under a prior variance of 1e10 the sites wandered by 1e-6
        relative and EP never converged."""
        precision = 1.0 / (params["noise"] + alpha * cond_var[0, 0])
        return (y - cavity_mean[:1]) * precision, jnp.reshape(-precision, (1, 1))

    def exact_linearisation(self, params, mean):
        """μ = f's mean, A = 1, Ω = σ_n²: E[y|f] = f. From the moments, Ω = (C + σ_n²) −
        C·C⁻¹·C cancels wherever σ_n² is small against C (posterior linearisation's
        sites became rounding noise), and PL2's Hessian through Ω, 1/Ω², overflows
        where C is below 1e-154."""
        return mean[:1], jnp.ones((1, 1)), jnp.reshape(params["noise"], (1, 1))

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
