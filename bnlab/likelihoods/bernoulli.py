"""Binary classification with labels ±1: probit and logit links."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from .. import cubature
from ..special import inverse_mills_ratio, log_ndtr, ndtr_pair
from .base import _HALF_LOG_2PI, _SQRT_HALF, Likelihood, _is_one, _rows


#: the largest prior variance at which pep_qn runs on the probit link
#: (``Bernoulli.check_method``)
PROBIT_SECANT_CAVITY_MAX_VARIANCE = 20.0
#: the largest prior variance at which the ELBO's methods run on the probit link
#: (``Bernoulli.check_method``)
PROBIT_ELBO_MAX_VARIANCE = 1e10


class Bernoulli(Likelihood):
    """Binary labels y ∈ {−1, +1}: p(y|f) = Φ(y f) (probit) or σ(y f) (logit)."""

    name = "bernoulli"
    log_concave = True

    def __init__(self, link="probit", expectations="cubature"):
        """``expectations``: how E[log p] and log E[p^α] under a Gaussian are computed —
        "cubature" (the caller's rule; Gauss–Hermite misses the bend of the link when
        the Gaussian is wide: 20 nodes are off by 0.09–9 nats in E[log Φ] at √v = 150)
        or "panels" (``cubature.panel_expectation``, ~1e-9 relative at any width, several
        times the cost per site: for surfaces reaching large σ², where VI's ELBO is
        biased)."""
        if link not in ("probit", "logit"):
            raise ValueError(f"Bernoulli: link must be 'probit' or 'logit', got {link!r}")
        if expectations not in ("cubature", "panels"):
            raise ValueError("Bernoulli: expectations must be 'cubature' or 'panels', "
                             f"got {expectations!r}")
        self.link, self.expectations = link, expectations

    @property
    def label(self) -> str:
        return f"Bernoulli, {self.link} link"

    def _log_cdf(self, z):
        return log_ndtr(z) if self.link == "probit" else jax.nn.log_sigmoid(z)

    def log_prob(self, params, y, f):
        return self._log_cdf(y * f[0])

    def conditional_moments(self, params, f):
        """E[y|f] = p − q and Var[y|f] = 4pq with p = P(y = 1|f), q = P(y = −1|f) each
        from the link (q as Φ(−f) or σ(−f), not 1 − p, which rounds to 0 beyond
        f ≈ 8.3 for probit and made the Gauss–Newton and Taylor residuals 0/0 at large
        prior variances; for probit both from one erfc, ``special.ndtr_pair``)."""
        if self.link == "probit":
            p, q = ndtr_pair(f[0])
        else:
            p, q = jax.nn.sigmoid(f[0]), jax.nn.sigmoid(-f[0])
        return jnp.reshape(p - q, (1,)), jnp.reshape(4 * p * q, (1, 1))

    def slr_moments(self, params, mean, cov, rule):
        """Probit: in closed form, with z = m/√(1 + C) (ν(f) = 2Φ(f) − 1; R&W eq. 3.82
        for E[Φ(f)], Stein's lemma for Q):
        μ = 2Φ(z) − 1,  Q = 2C φ(z)/√(1 + C),  S = 1 − μ² = 4Φ(z)Φ(−z)
        (ν² + Var[y|f] = (p − q)² + 4pq = 1). Exact where the 20-node rule is good to
        ≈ 1e-7 at unit variance and misses the link's bend under a wide Gaussian; and
        it costs one erf or erfc and one exp per site instead of 20 of each. S is taken
        as t(2 − t), t = erfc(|z|/√2) = 1 − |μ|, for |z| ≥ 1 (no cancellation in the
        tail) and as 1 − erf(z/√2)² below (differentiable twice at z = 0, which |z|
        is not). Logit: the caller's rule."""
        if self.link != "probit":
            return super().slr_moments(params, mean, cov, rule)
        scale = jnp.sqrt(1.0 + cov[0, 0])
        z = mean[0] / scale
        central = jnp.abs(z) < 1.0
        z_central, z_tail = jnp.where(central, z, 0.0), jnp.where(central, 1.0, z)
        erf = jax.lax.erf(z_central * _SQRT_HALF)
        t = jax.lax.erfc(jnp.abs(z_tail) * _SQRT_HALF)
        mu = jnp.where(central, erf, jnp.sign(z_tail) * (1.0 - t))
        S = jnp.where(central, 1.0 - erf * erf, t * (2.0 - t))
        Q = 2.0 * cov[0, 0] * jnp.exp(-0.5 * z * z - _HALF_LOG_2PI) / scale
        return jnp.reshape(mu, (1,)), jnp.reshape(Q, (1, 1)), jnp.reshape(S, (1, 1))

    #: where log Φ(z) and log σ(z) bend (z = y f): they are flat beyond +6, nearly
    #: quadratic (probit) or linear (logit) beyond −6 and change on a unit scale between
    BENDS = (-6.0, 0.0, 6.0)

    def expected_log_prob(self, params, y, mean, cov, rule):
        """E[log p(y|f)]: the caller's rule, or the panel rule in z = y f."""
        if self.expectations == "panels":
            return cubature.panel_expectation(self._log_cdf, y * mean[0], cov[0, 0], self.BENDS)
        return super().expected_log_prob(params, y, mean, cov, rule)

    def expected_log_prob_mean_gradient(self, params, y, mean, cov, rule):
        """Probit under the caller's rule: Σ w_i y φ(y f_i)/Φ(y f_i), the same derivative
        of the rule's sum as autodiff's, by ``special.inverse_mills_ratio`` (an erfc and an
        exp per node; autodiff also evaluates log Φ's log)."""
        if self.link != "probit" or self.expectations != "cubature":
            return super().expected_log_prob_mean_gradient(params, y, mean, cov, rule)
        return cubature.expectation(lambda f: y * inverse_mills_ratio(y * f), rule, mean, cov)

    def increasing_direction(self, y):
        return jnp.reshape(y, (1,))          # α log p(y|f) increases with y f

    def log_prob_bound(self, params, y, f):
        """With z = y f: log Φ(z) ≤ −½ min(z, 0)² (Φ(z) ≤ ½e^(−z²/2) for z < 0), within
        1.84 + log(1 + |z|) of it (Mills: Φ(z) ≥ φ(z)|z|/(1 + z²), and log Φ(−1) = −1.84);
        log σ(z) ≤ min(z, 0), within log 2. No erfc and no log (``log_ndtr`` costs both)."""
        z = jnp.minimum(y * f[0], 0.0)
        return -0.5 * z * z if self.link == "probit" else z

    def log_expected_power(self, params, y, mean, cov, alpha, rule):
        """log E[p(y|f)^α]: closed form for probit at α = 1 (R&W eq. 3.82,
        ∫ Φ(y f) N(f|m, v) df = Φ(y m / √(1 + v))), else the caller's rule or the panel
        rule in z = y f."""
        if self.link == "probit" and _is_one(alpha):
            return log_ndtr(y * mean[0] / jnp.sqrt(1.0 + cov[0, 0]))
        if self.expectations == "panels":
            return cubature.panel_log_expectation_exp(lambda z: alpha * self._log_cdf(z),
                                                      y * mean[0], cov[0, 0], self.BENDS)
        return super().log_expected_power(params, y, mean, cov, alpha, rule)

    def log_expected_power_in_closed_form(self, alpha):
        """The probit closed form at α = 1 and the panel rule (whose nodes move with
        the mean) are differentiated as they are."""
        return (self.link == "probit" and _is_one(alpha)) or self.expectations == "panels"

    def predictive_moments(self, params, mean, cov, rule):
        """Probit: p = Φ(m/√(1 + v)) (R&W eq. 3.82), as in ``conditional_moments``
        with q = Φ(−m/√(1 + v)) from the same erfc, not 1 − p."""
        if self.link == "probit":
            p, q = ndtr_pair(mean[0] / jnp.sqrt(1.0 + cov[0, 0]))
            return p - q, 4 * p * q
        return super().predictive_moments(params, mean, cov, rule)

    def check_method(self, params, prior_variance, y, method):
        """Probit: refuses pep_qn's site precision −P\\B(αB + P\\)⁻¹ (``Method.
        secant_cavity``) above a prior variance of ``PROBIT_SECANT_CAVITY_MAX_VARIANCE``.
        With the tilted curvature h in place of B, 1 + v\\h is the tilted over the cavity
        variance, which falls to about 1/(1 + v\\) for a cavity on the wrong side of the
        link (Φ(y f) = P(y(f + ε) > 0), ε of variance 1), so αB + P\\ keeps only that
        share of P\\, and B's secant estimate, whose error is of the order of the step
        (log Z is not quadratic, unlike a Gaussian's), is not that accurate: on six
        sets of 10–30 points pep_qn's energy is up to 6e-3 nats from EP's at σ² = 20,
        2e-2 at 30 after up to 160 iterations, and it diverges from σ² = 50. That is at
        α = 1; a smaller power weighs B less against P\\: at σ² = 20 pep_qn is within
        3e-5 nats of 'pep' at α = 0.5 and 1e-7 at α = 0.1 and 1e-3 on the same sets,
        so one limit serves every α. The logit link, whose tail is not Gaussian, is
        within 3e-3 of EP at σ² = 50 and is not refused.

        Probit, too: refuses the methods whose energy is the ELBO (G-KL's bound
        included) above a prior variance of ``PROBIT_ELBO_MAX_VARIANCE``. Their
        E_q[log Φ(yf)] is a Gauss–Hermite sum, blind beyond its outermost node to the
        wrong-side tail, where log Φ(yf) ≈ −f²/2 grows with the scale of q; on ten
        overlapping points VI's converged ELBO with 20 nodes against 100 differed by
        4e-3 nats at σ² = 1e4, 1.2e-2 at 1e8, 0.3 at 1e12 and 36 at 1e16 (20 nodes
        unconverged after 8000 iterations), and at 1e50 20 nodes 'converged' at −204.0
        (100 nodes: −16.1 at 1e16). The logit link was not measured."""
        if self.link != "probit":
            return
        if method.energy == "vfe" and prior_variance > PROBIT_ELBO_MAX_VARIANCE:
            raise ValueError(
                f"prior variance {prior_variance:.3g} is too large for {method.name!r} with a "
                f"probit likelihood: its ELBO's Gauss–Hermite expectation of log Φ(yf) "
                f"misses the wrong-side tail beyond a variance of "
                f"{PROBIT_ELBO_MAX_VARIANCE:g}; use 'ep' (its moments in closed form) or a "
                f"variance up to {PROBIT_ELBO_MAX_VARIANCE:g}")
        if not method.secant_cavity:
            return
        if prior_variance > PROBIT_SECANT_CAVITY_MAX_VARIANCE:
            raise ValueError(
                f"prior variance {prior_variance:.3g} is too large for {method.name!r} with "
                f"a probit likelihood: its site precision −P\\B/(αB + P\\) needs αB + P\\, "
                f"about 1/(1 + variance) of P\\, to more digits than the secant B holds "
                f"beyond a variance of {PROBIT_SECANT_CAVITY_MAX_VARIANCE:g}; use 'ep' or 'pep' "
                f"(the same fixed point, the tilted moments in closed form) or a variance "
                f"up to {PROBIT_SECANT_CAVITY_MAX_VARIANCE:g}")

    def validate_targets(self, y):
        y = super().validate_targets(y)
        bad = ~np.isin(y, (-1.0, 1.0))
        if bad.any():
            vals = np.unique(y[bad])[:5].tolist()
            hint = " (labels in {0, 1}? map them with y = 2*y - 1)" if set(np.unique(y)) <= {0.0, 1.0} else ""
            raise ValueError(f"Bernoulli likelihood needs labels in {{-1, 1}}; rows {_rows(bad)} "
                             f"have values such as {vals}{hint}")
        return y

    def sample(self, params, f, rng):
        p = ndtr(f[:, 0]) if self.link == "probit" else jax.nn.sigmoid(f[:, 0])
        return np.where(rng.uniform(size=len(f)) < np.asarray(p), 1.0, -1.0)

    def __repr__(self):
        extra = "" if self.expectations == "cubature" else f", expectations={self.expectations!r}"
        return f"Bernoulli(link={self.link!r}{extra})"
