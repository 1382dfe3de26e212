"""Counts with an exponential link."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, logsumexp

from .base import Likelihood, _rows


#: the largest count accepted. The posterior of f at a count y has width about 1/√y
#: around log y, where float64's spacing is δ ≈ 1.1e-16·log y: log p(y|f) varies by
#: y δ²/2 between neighbouring floats, 2.6e-9 at 1e20 but 1.6e123 at 1e150 (where
#: Laplace's energy came out at −1.5e124 against −6.0e4)
MAX_COUNT = 1e20
#: counts from which log y! − y log y + y is Stirling's series (``_stirling_remainder``)
STIRLING_FROM = 100.0


def _stirling_remainder(y):
    """s(y) = log y! − y log y + y, for y ≥ 0: Stirling's series ½log(2πy) + 1/(12y) −
    1/(360y³) + 1/(1260y⁵) − 1/(1680y⁷) from ``STIRLING_FROM`` on (its next term is
    below 1e-21 there), else the difference itself (at most 14 digits cancel there,
    an error under 1e-13; 0 log 0 = 0)."""
    big = jnp.maximum(y, STIRLING_FROM)
    inv, inv2 = 1.0 / big, 1.0 / (big * big)
    series = (0.5 * jnp.log(2 * jnp.pi * big)
              + inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680))))
    small = jnp.minimum(y, STIRLING_FROM)
    direct = gammaln(small + 1.0) - jax.scipy.special.xlogy(small, small) + small
    return jnp.where(y >= STIRLING_FROM, series, direct)


def _log_poisson(y, f):
    """log p(y | f) = y f − e^f − log y! as −y φ(f − log y) − s(y), φ(d) = e^d − 1 − d ≥ 0
    and s the Stirling remainder: y f and log y! are each of size y log y and cancel
    to the order of log y (at a count of 1e150 the direct form is rounding error of
    size 1e136), while here each term is of the result's size. At y = 0 it is −e^f."""
    d = f - jnp.log(jnp.where(y > 0, y, 1.0))
    phi = jnp.expm1(d) - d
    return jnp.where(y > 0, -y * phi - _stirling_remainder(y), -jnp.exp(f))


class Poisson(Likelihood):
    """Counts y ∈ {0, 1, …} with rate exp(f): log p = y f − e^f − log y!, evaluated
    without cancellation at large counts (``_log_poisson``)."""

    name = "poisson"
    label = "Poisson"
    log_concave = True

    def log_prob(self, params, y, f):
        return _log_poisson(y, f[0])

    def conditional_moments(self, params, f):
        rate = jnp.exp(f[:1])
        return rate, jnp.reshape(rate, (1, 1))

    def expected_log_prob(self, params, y, mean, cov, rule):
        # E[e^f] = exp(m + v/2): y m − e^{m + v/2} − log y! = log p(y | m + v/2) − yv/2
        half = 0.5 * cov[0, 0]
        return _log_poisson(y, mean[0] + half) - y * half

    def log_expected_power(self, params, y, mean, cov, alpha, rule):
        return self._tilted(y, mean, cov, alpha, rule)[0]

    def log_expected_power_derivatives(self, params, y, mean, cov, alpha, rule):
        """Power EP's (log Z, g, h) from the tilted distribution's mean μ and variance
        σ²: g = (μ − m)/v and h = (σ² − v)/v², the rule centred on the tilted density
        (``_tilted``)."""
        log_z, shift, tilted_var = self._tilted(y, mean, cov, alpha, rule)
        v = cov[0, 0]
        return log_z, jnp.reshape(shift / v, (1,)), jnp.reshape((tilted_var - v) / (v * v),
                                                                (1, 1))

    def _tilted(self, y, mean, cov, alpha, rule):
        """(log Z, μ − m, σ²) of the tilted density N(f | m, v) p(y | f)^α, by the caller's
        rule centred at its mode f̂ with its curvature's variance s² = v / (1 + w): an
        adaptive Gauss–Hermite rule (Liu & Pierce 1994). The tilted density has width
        about 1/√(αy) around log y; the plain rule on N(m, v) does not resolve it (at
        a count of 10 under N(0, 1), Gauss–Hermite-20 is 0.6 % off in log Z; at 1e4
        every node's weight underflowed and each site's update failed). The mode
        solves (f − m)/v = α(y − eᶠ): with w = αv e^f̂, f̂ = m + αvy − w and w + log w
        = log(αv) + m + αvy, solved for log w by Newton's method (the left side is
        convex and increasing in log w, so the iteration settles from any start)."""
        m, v = mean[0], cov[0, 0]
        x = jnp.log(alpha * v) + m + alpha * v * y

        def newton(_, u):
            return u - (u + jnp.exp(u) - x) / (1.0 + jnp.exp(u))

        u = jax.lax.fori_loop(0, 40, newton, jnp.where(x > 1.0, jnp.log(jnp.maximum(x, 1.0)), x))
        w = jnp.exp(u)
        s2 = v / (1.0 + w)
        # offsets from the cavity mean, d = f − m, without subtracting m back out
        d = (alpha * v * y - w) + jnp.sqrt(s2) * rule.points[:, 0]
        f = m + d
        t = rule.points[:, 0]
        log_terms = (alpha * _log_poisson(y, f)
                     - 0.5 * d * d / v - 0.5 * jnp.log(v) + 0.5 * t * t + 0.5 * jnp.log(s2))
        log_z = logsumexp(log_terms, b=rule.weights)
        s = jnp.exp(log_terms - log_z) * rule.weights
        shift = s @ d
        return log_z, shift, s @ (d - shift) ** 2

    def validate_targets(self, y):
        """Non-negative integers up to ``MAX_COUNT``."""
        y = super().validate_targets(y)
        bad = (y < 0) | (y != np.round(y))
        if bad.any():
            raise ValueError(f"Poisson likelihood needs non-negative integer counts; rows "
                             f"{_rows(bad)} have values such as {np.unique(y[bad])[:5].tolist()}")
        big = y > MAX_COUNT
        if big.any():
            raise ValueError(f"Poisson counts above {MAX_COUNT:g} (rows {_rows(big)}, up to "
                             f"{y.max():.3g}) cannot be fitted in float64: the posterior of f "
                             f"there has width 1/√y, below float64's spacing at f ≈ log y")
        return y

    def sample(self, params, f, rng):
        return rng.poisson(np.exp(np.asarray(f[:, 0]))).astype(float)
