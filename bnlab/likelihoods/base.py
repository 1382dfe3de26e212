"""The ``Likelihood`` protocol and the helpers its families share."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import cubature
from .._runtime.configure import ensure_configured
from ..checks import check_keys, positive


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


def _positive(name, **values):
    """Each value as a float, finite and positive (``checks.positive``)."""
    return [float(positive(f"{name} {key}", v)) for key, v in values.items()]


def log_softplus(x):
    """log(softplus(x)) without underflow: softplus(x) = exp(x) in float64 below
    x ≈ −745, where log(softplus) would be −∞ (and its gradient NaN). For x < −20,
    log(log1p(eˣ)) = x − eˣ/2 + O(e²ˣ)."""
    small = x < -20.0
    safe = jnp.where(small, 0.0, x)          # keeps the unused branch's gradient finite
    return jnp.where(small, x - 0.5 * jnp.exp(x), jnp.log(jax.nn.softplus(safe)))


class Likelihood:
    """Base class. Subclasses define ``log_prob`` and ``conditional_moments``.

    A likelihood's hyperparameters are the keys of ``init_params()``, and its
    constructor takes each as a keyword (``Gaussian(noise=σ²)``) with a default: the lab
    builds one from its controls that way, with no table of its own."""

    name = "likelihood"
    label = "likelihood"           # what the lab calls it
    num_latents = 1
    log_concave = False
    gaussian_form = False
    exact_expectations = False     # every Gaussian expectation the methods take of it
                                   # (E[log p], log E[p^α], the SLR moments) is exact
                                   # whatever the cubature rule, so its order is moot
    constant_curvature = False     # E_q[log p(y|f)] is quadratic in f: its site precision
                                   # −2∂E/∂s² is the same under every q

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

    def check_scales(self, params, prior_variance, y):
        """ValueError where float64 cannot hold the problem with this prior variance and
        these targets; nothing by default."""

    def check_energy(self, params, y, energy: str):
        """ValueError where float64 cannot resolve the energy ``energy`` (a
        ``Method.energy`` kind) for these targets; nothing by default."""

    def check_method(self, params, prior_variance, y, method):
        """ValueError where float64 cannot resolve the iteration or the energy of
        ``method`` (a ``Method`` record, or a direct family's ``DirectMethod``, whose
        ``energy`` and ``name`` it reads alike) at this prior variance; nothing by
        default."""

    def noise_variance(self, params):
        """The variance of the Gaussian noise added to every latent, where the observation
        model is that (the ``constant_curvature`` likelihoods), for the refusals that
        weigh it against the prior (``GP.check_conditioning``, G-KL's
        ``check_whitened_conditioning``); None by default."""
        return None

    def initial_site_precision(self, params):
        """The site precision a cold start takes (``Engine.cold_sites``), or None for
        ``sites.initial_precision`` of the prior variance."""
        return None

    def power_ep_site(self, params, y, cavity_mean, cond_var, alpha):
        """Power EP's site targets (J, H) at the cavity in closed form, where the tilted
        moments determine the site without the cavity's variance; None (the default)
        takes them from log Z's derivatives (``methods.power_ep``)."""
        return None

    def exact_linearisation(self, params, mean):
        """(μ (1,), A (1, D), Ω (1, 1)) of the statistical linear regression of E[y|f]
        where it does not depend on q, because E[y|f] is linear in f and Cov[y|f]
        constant (the regression is then the likelihood itself); None (the default):
        from ``slr_moments`` (``methods.linearisation.slr``)."""
        return None

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
        ensure_configured()             # bnlab's settings (float64) before its numerics
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
