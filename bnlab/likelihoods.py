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

Flags used by the engine: ``num_latents`` (D), ``log_concave`` (site precisions of
Laplace/VI/EP stay non-negative, which allows the fast B = I + W½KW½ factorisation),
``gaussian_form`` (p(y|f) = N(y | E[y|f], Cov[y|f]) exactly, eq. 33, so the residual
Gauss–Newton of eqs. 34–38 applies; otherwise the generalised GN of eqs. 39–40).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, logsumexp, ndtr

from . import cubature
from .hyperparameters import check_keys, positive
from .special import inverse_mills_ratio, log_ndtr, ndtr_pair

__all__ = ["Likelihood", "Gaussian", "Bernoulli", "Poisson", "StudentT", "Laplace",
           "Heteroscedastic", "Product", "LIKELIHOODS"]

LOG2PI = float(np.log(2 * np.pi))
_HALF_LOG_2PI = 0.5 * LOG2PI
_SQRT_HALF = float(np.sqrt(0.5))


def _rows(mask, limit=10):
    idx = np.flatnonzero(mask)
    shown = ", ".join(str(i) for i in idx[:limit])
    return f"[{shown}{', …' if len(idx) > limit else ''}] ({len(idx)} in all)"


def _is_one(alpha):
    """True when α is the Python number 1 (static closed-form EP branch)."""
    return isinstance(alpha, (int, float)) and alpha == 1


def _value_grad_hessian(fn, x):
    """(f(x), ∇f(x), ∇²f(x)) in one pass (forward-over-reverse; the value and gradient
    come out as the pass's aux)."""
    def grad_and_value(z):
        value, grad = jax.value_and_grad(fn)(z)
        return grad, (value, grad)

    hess, (value, grad) = jax.jacfwd(grad_and_value, has_aux=True)(x)
    return value, grad, hess


def log_softplus(x):
    """log(softplus(x)) without underflow: softplus(x) = exp(x) in float64 below
    x ≈ −745, where log(softplus) would be −∞ (and its gradient NaN). For x < −20,
    log(log1p(eˣ)) = x − eˣ/2 + O(e²ˣ)."""
    small = x < -20.0
    safe = jnp.where(small, 0.0, x)          # keeps the unused branch's gradient finite
    return jnp.where(small, x - 0.5 * jnp.exp(x), jnp.log(jax.nn.softplus(safe)))


def _positive(name, **values):
    """Each value as a float, finite and positive (``hyperparameters.positive``)."""
    return [float(positive(f"{name} {key}", v)) for key, v in values.items()]


class Likelihood:
    """Base class. Subclasses define ``log_prob`` and ``conditional_moments``."""

    name = "likelihood"
    num_latents = 1
    log_concave = False
    gaussian_form = False

    def init_params(self) -> dict:
        return {}

    def check_params(self, params, where: str = "params['likelihood']"):
        """``params`` (keys as ``init_params()``): every value a finite positive number
        (each likelihood here is parametrised by variances, scales and degrees of freedom)."""
        check_keys(where, params, self.init_params())
        for key, value in params.items():
            positive(f"{where}[{key!r}]", value)

    # --- the model -----------------------------------------------------------------
    def log_prob(self, params, y, f):
        raise NotImplementedError

    def conditional_moments(self, params, f):
        """(E[y|f] with shape (1,), Cov[y|f] with shape (1, 1))."""
        raise NotImplementedError

    # --- expectations under a Gaussian N(mean, cov) of f_n ---------------------------
    def expected_log_prob(self, params, y, mean, cov, rule):
        return cubature.expectation(lambda f: self.log_prob(params, y, f), rule, mean, cov)

    def expected_log_prob_mean_gradient(self, params, y, mean, cov, rule):
        """∇_m ``expected_log_prob`` (the rule's derivative): the quasi-Newton secant's
        gradient at the previous mean."""
        return jax.grad(lambda m: self.expected_log_prob(params, y, m, cov, rule))(mean)

    def increasing_direction(self, y):
        """A direction u (D,) along which log p(y|f) increases, or None
        (``cubature.log_expectation_exp``)."""
        return None

    def log_prob_bound(self, params, y, f):
        """An upper bound of log p(y|f) within a few units of it, cheaper to evaluate:
        the log-sum-exp shift at the top node along ``increasing_direction``
        (``cubature.log_expectation_exp``). log p itself unless a likelihood knows one."""
        return self.log_prob(params, y, f)

    def _log_power_and_bound(self, params, y, alpha):
        """α log p(y|·) and its upper bound α ``log_prob_bound``, the cubature passes'
        integrand and shift."""
        return (lambda f: alpha * self.log_prob(params, y, f),
                lambda f: alpha * self.log_prob_bound(params, y, f))

    def log_expected_power(self, params, y, mean, cov, alpha, rule):
        logg, bound = self._log_power_and_bound(params, y, alpha)
        return cubature.log_expectation_exp(logg, rule, mean, cov,
                                            self.increasing_direction(y), bound)

    def log_expected_power_in_closed_form(self, alpha) -> bool:
        """Whether ``log_expected_power`` is a closed form at this α (a trace-time
        decision), rather than the caller's rule."""
        return False

    def log_expected_power_derivatives(self, params, y, mean, cov, alpha, rule):
        """(log Z, ∇_m log Z, ∇²_m log Z) of Z(m) = E_{N(m, cov)}[p(y|f)^α], Power EP's
        (log Z, g, h): a closed form differentiated by autodiff, else the caller's rule
        with the Gaussian identities (``cubature.log_expectation_exp_derivatives``:
        more accurate than differentiating the rule's sum, and one evaluation of
        log p per node)."""
        if self.log_expected_power_in_closed_form(alpha):
            return _value_grad_hessian(
                lambda m: self.log_expected_power(params, y, m, cov, alpha, rule), mean)
        logg, bound = self._log_power_and_bound(params, y, alpha)
        return cubature.log_expectation_exp_derivatives(logg, rule, mean, cov,
                                                        self.increasing_direction(y), bound)

    def slr_moments(self, params, mean, cov, rule):
        """The moments of the statistical linear regression of ν(f) = E[y|f] under
        N(mean, cov) (posterior linearisation, Wilkinson et al. 2023 eqs. 28–31):
        μ = E[ν] (1,), Q = E[(f − m)(ν − μ)ᵀ] (D, 1) and S = E[(ν − μ)(ν − μ)ᵀ + Cov[y|f]]
        (1, 1), by the caller's rule; a likelihood with a closed form overrides this."""
        f = cubature.sigma_points(rule, mean, cov)
        nu, S = jax.vmap(lambda f_: self.conditional_moments(params, f_))(f)   # (P,1), (P,1,1)
        w = rule.weights
        mu = w @ nu
        dnu = nu - mu
        Q = jnp.einsum("p,pd,pk->dk", w, f - mean, dnu)
        return mu, Q, jnp.einsum("p,pa,pb->ab", w, dnu, dnu) + jnp.tensordot(w, S, 1)

    def log_predictive(self, params, y, mean, cov, rule):
        """log ∫ p(y|f) N(f | mean, cov) df."""
        return self.log_expected_power(params, y, mean, cov, 1.0, rule)

    def predictive_moments(self, params, mean, cov, rule):
        """E[y] and Var[y] under ∫ p(y|f) N(f | mean, cov) df (law of total variance)."""
        def moments(f):
            mu, S = self.conditional_moments(params, f)
            return jnp.stack([mu[0], S[0, 0] + mu[0] ** 2])
        m1, m2 = cubature.expectation(moments, rule, mean, cov)
        return m1, m2 - m1**2

    # --- input checking --------------------------------------------------------------
    def validate_targets(self, y) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"{self.name} likelihood: y must be a vector, got shape {y.shape}")
        bad = ~np.isfinite(y)
        if bad.any():
            raise ValueError(f"{self.name} likelihood: y has NaN or infinite values at rows "
                             f"{_rows(bad)}")
        return y

    def sample(self, params, f, rng: np.random.Generator) -> np.ndarray:
        """Draw y ~ p(y | f) for latent rows f (N, D) — used for synthetic data sets."""
        raise NotImplementedError

    def structure_key(self):
        """What fixes the compiled computation (the type and any discrete option)."""
        return (type(self), getattr(self, "link", None), getattr(self, "expectations", None))

    def __repr__(self):
        return f"{type(self).__name__}({self.init_params()})"


class Gaussian(Likelihood):
    """y = f + ε, ε ~ N(0, σ²); ``params = {"noise": σ²}``. Every expectation is exact."""

    name = "gaussian"
    log_concave = True
    gaussian_form = True

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


class Poisson(Likelihood):
    """Counts y ∈ {0, 1, …} with rate exp(f): log p = y f − e^f − log y!."""

    name = "poisson"
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


class StudentT(Likelihood):
    """Robust regression: y = f + σ t_ν; ``params = {"scale": σ, "df": ν}`` (ν given).
    Not log-concave: EP and Newton sites may get negative precisions (Jylänki et al. 2011).
    The tilted integrals of EP/PEP are peaked when σ is small against the cavity's
    spread: use a high cubature order there (see ``cubature.log_expectation_exp``)."""

    name = "student_t"

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


class Heteroscedastic(Likelihood):
    """Input-dependent noise (Goldberg et al. 1997; Wilkinson et al. 2023 eq. 72):
    y ~ N(f₁, φ(f₂)²) with φ = softplus; two latent GPs."""

    name = "heteroscedastic"
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


class Product(Likelihood):
    """Amplitude demodulation (Turner & Sahani 2011; Wilkinson et al. 2023 eq. 73):
    y ~ N(f₁ · φ(f₂), σ²) with φ = softplus; ``params = {"noise": σ²}``."""

    name = "product"
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


LIKELIHOODS = {"gaussian": Gaussian, "bernoulli": Bernoulli, "probit": lambda: Bernoulli("probit"),
               "logit": lambda: Bernoulli("logit"), "poisson": Poisson, "student_t": StudentT,
               "laplace": Laplace, "heteroscedastic": Heteroscedastic, "product": Product}
