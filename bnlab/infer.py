"""``bnlab.infer``: the public entry point — a model, data and a method name in, one
result (posterior marginals, energy, per-iteration trace) out — and the checks of what
enters it (``validate_data``, ``validate_settings``).

The package binds the function ``infer`` over this module's name, so ``bnlab.infer``
and ``from bnlab import infer`` are the function; the module's other names are imported
from it (``from bnlab.infer import Stepper, MAX_ITERS``). ``import bnlab.infer as m``
binds the function too (Python reads ``m`` as the attribute ``bnlab.infer``)."""
from __future__ import annotations

import jax
import numpy as np

from .engine.loop import get_engine
from .engine.state import State, make_settings
from .results import Result, Trace, stop_reason
from .methods.registry import DIRECT, check_method_name, resolve
from .checks import real_number
from .model import validate_inputs
from .posterior import full, joint

__all__ = ["infer", "Stepper", "InferenceResult", "validate_settings", "check_max_iters",
           "validate_data", "prepare_problem", "MAX_ITERS", "MAX_TARGET"]


MAX_ITERS = 100_000
"""The most iterations ``infer`` runs: far beyond any method's convergence here, and
the trace it may hold (a few numbers per iteration) stays in megabytes."""


MAX_TARGET = 1e150
"""The largest |y| accepted: a likelihood's log density holds (y − f)², finite in float64
only below about 1.3e154 (and log p(y) of Gaussian data scaled by 1e160 is below
−1e308: no float64 holds it)."""


def check_max_iters(max_iters) -> int:
    """``max_iters`` as an int in [1, ``MAX_ITERS``] (an integral float such as 1e4 is
    accepted; a fraction, string or bool is a TypeError)."""
    value = real_number("max_iters", max_iters)
    if not value.is_integer():
        raise TypeError(f"max_iters must be an integer, got {max_iters!r}")
    if not 1 <= value <= MAX_ITERS:
        raise ValueError(f"max_iters must be an integer from 1 to {MAX_ITERS} "
                         f"(MAX_ITERS of the module bnlab.infer), got {max_iters!r}")
    return int(value)


def validate_settings(method, alpha, damping, max_iters, tol):
    check_method_name(method)
    alpha = real_number("alpha", alpha)
    if not (np.isfinite(alpha) and 0 < alpha <= 1):
        raise ValueError(f"alpha (the Power-EP power) must lie in (0, 1], got {alpha}")
    if method == "ep" and alpha != 1:
        raise ValueError(f"method 'ep' is Power EP with α = 1; for α = {alpha} use method='pep'")
    damping = real_number("damping", damping)
    if not (np.isfinite(damping) and 0 < damping <= 1):
        raise ValueError(f"damping ρ must lie in (0, 1], got {damping}")
    check_max_iters(max_iters)
    tol = real_number("tol", tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be positive, got {tol}")


def validate_data(model, X, y, name="X", width=None):
    """The data as ``infer``, the ``Stepper`` and the studies take them: (X, y) as JAX float
    arrays, X as (N, d) (a vector is one column), y as (N,), finite and in the
    likelihood's domain. ValueError, naming the offending rows, otherwise; so a caller
    can check data before building anything (``bnlab.validate_data``). ``name`` and
    ``width``: test inputs (``name="X_test"``) must have the training inputs' columns."""
    X = validate_inputs(X, name, width)
    y = model.likelihood.validate_targets(y)
    largest = float(np.max(np.abs(y), initial=0.0))
    if largest > MAX_TARGET:
        raise ValueError(f"y reaches {largest:.3g} in absolute value, beyond {MAX_TARGET:g}: "
                         f"the likelihoods square their targets, which overflows float64 "
                         f"(and so would log p(y)); rescale y (and a noise scale with it)")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} entries")
    # device_put, not jnp.asarray: outside a trace jnp.asarray compiles a staging
    # program per shape (JAX ≥ 0.8), which a first process pays for every data set
    return jax.device_put(X), jax.device_put(y)


def check_resolution(model, params, y, method, options=None):
    """The likelihood's checks that float64 resolves ``method``'s energy for these
    targets (``Likelihood.check_energy``; the heuristic fix's energy is its base's, a
    direct family's its bound's, ``DirectMethod.energy``), the method at this prior
    variance (``Likelihood.check_method``: a site method's iteration, and the energy's
    cubature, which G-KL's bound shares with VI's ELBO) and a direct family's own
    (``DirectMethod.check``, given its ``options``)."""
    lik_params, y = params["likelihood"], np.asarray(y)
    if method in DIRECT:
        if DIRECT[method].energy is not None:
            model.likelihood.check_energy(lik_params, y, DIRECT[method].energy)
            model.likelihood.check_method(lik_params, model.largest_prior_variance(params), y,
                                          DIRECT[method])
        if DIRECT[method].check is not None:
            DIRECT[method].check(model, params, dict(options or {}))
        return
    record = resolve(method, base=dict(options or {}).get("base", "vi"))[0]
    model.likelihood.check_energy(lik_params, y, record.energy)
    model.likelihood.check_method(lik_params, model.largest_prior_variance(params), y, record)


def prepare_problem(model, X, y, params=None, *, check_scales=True):
    """(X, y, params): validated data (``validate_data``) and the hyperparameters —
    ``params``, or the model's own — checked against the model and the input width,
    and (``check_scales``) against what float64 holds (``GP.check_scales``). A surface
    turns the last off: its base hyperparameters need not lie on its grid, whose
    corners it checks instead."""
    X, y = validate_data(model, X, y)
    params = model.init_params() if params is None else params
    model.check_params(params, X.shape[1])
    if check_scales:
        model.check_scales(params, X, y)
    return X, y, params


class InferenceResult(Result):
    """The ``Result`` of a site method (``bnlab.infer``), with its ``sites`` and engine ``state``.

    Attributes: ``log_marginal`` (the method's approximation of log p(y|θ)), ``trace``
    (per-iteration energy, step size, site change and PSD flags), ``mean``/``cov``
    (posterior marginals at the training inputs), ``sites``, ``n_iters``,
    ``converged``, ``diverged`` (a step produced a non-PD posterior — or, with
    ``trace.posterior_psd`` True, non-finite values — and was rejected: the result is
    the best valid iterate seen, ``bnlab.engine``), ``stop_reason`` ("converged",
    "diverged: …" saying which check failed, or "max_iters"; ``bnlab.results.stop_reason``) and
    ``iterate`` (the iteration whose state the result holds: ``n_iters`` unless the run
    diverged or its last steps were rejected)."""

    def __init__(self, engine, params, X, y, state: State, trace: Trace, n_iters,
                 converged, diverged, method, settings):
        self.engine, self.params, self.X, self.y = engine, params, X, y
        self.state, self.method, self.settings = state, method, settings
        n = int(n_iters)
        self.n_iters = n
        self.trace = Trace(*(np.asarray(t)[:n] for t in trace))
        self.converged = bool(converged)
        self.diverged = bool(diverged)
        last = (self.trace.posterior_psd[-1], self.trace.cavity_psd[-1]) if n else (True, True)
        self.stop_reason = stop_reason(self.converged, self.diverged, *last)
        self.iterate = int(state.iteration)
        self.log_marginal = float(state.energy)
        self.sites = state.sites
        # on the host: eager device ops would each compile a program
        mean = np.asarray(state.marginals.mean)
        cov = np.asarray(state.marginals.cov) + np.asarray(state.marginals.cond_var)
        D = mean.shape[1]
        self.mean = mean if D > 1 else mean[:, 0]
        self.cov = cov if D > 1 else cov[:, 0, 0]

    @property
    def model(self):
        return self.engine.model

    def _predict_points(self, Xs):
        mean, cov = (np.asarray(a) for a in self.engine.predict(self.params, self.X,
                                                                self.state, Xs))
        if mean.shape[1] == 1:
            return mean[:, 0], cov[:, 0, 0]
        return mean, cov

    def joint_covariance(self, i: int, j: int) -> np.ndarray:
        """Posterior covariance of (f(x_i), f(x_j)), a (2D, 2D) matrix (latents of x_i
        first) — what the lab's cross-covariance ellipses draw. Full GPs use their
        factorisation; Markov GPs have the same posterior, computed densely here."""
        structure = self.engine.model.structure
        if structure == "full":
            prior = self.state.prior
        elif structure == "markov":
            prior = full.prepare(self.engine.model, self.params, self.X)
        else:
            raise ValueError(f"joint_covariance is not available for {structure!r} models")
        return np.asarray(joint.joint_covariance(prior, self.state.sites, i, j))

    def _log_predictive_points(self, Xs, ys):
        return self.engine.log_predictive(self.params, self.X, self.state, Xs, ys)


class Stepper:
    """One site-method run set up once — validated data, settings and hyperparameters,
    the compiled engine — and driven by whoever holds it: ``infer`` runs it to the end,
    the lab steps it live (``init``, then ``step`` per iteration). ``engine`` and
    ``settings`` are there for batched studies that compose the engine's pure
    functions."""

    def __init__(self, model, X, y, method="vi", *, alpha=1.0, damping=0.5, tol=1e-8,
                 backtracking=True, acceleration=True, params=None,
                 cubature=("gauss_hermite", 20), **options):
        if method in DIRECT:
            raise ValueError(f"{method!r} optimises q directly and has no site steps: "
                             f"use bnlab.infer(..., method={method!r})")
        validate_settings(method, alpha, damping, 1, tol)
        self.X, self.y, self.params = prepare_problem(model, X, y, params)
        check_resolution(model, self.params, self.y, method, options)
        self.method = method
        self.engine = get_engine(model, method, cubature, tuple(options.items()))
        self.settings = make_settings(alpha, damping, tol, backtracking, acceleration)

    @property
    def model(self):
        return self.engine.model

    def init(self) -> State:
        """The state before the first iteration (prior sites, their marginals and energy)."""
        return self.engine.init(self.params, self.X, self.y, self.settings)

    def step(self, state: State):
        """One iteration: (next state, ``StepInfo`` of energy, step size, PSD flags,
        convergence and divergence)."""
        return self.engine.step(self.params, self.X, self.y, self.settings, state)

    def predict(self, state: State, X_test):
        """Latent predictive mean (Ns, D) and covariance blocks (Ns, D, D) at X_test
        under the q of ``state`` (JAX arrays, latents kept as a dimension; a finished
        run's ``InferenceResult.predict`` gives the same numbers). Compiled once per
        engine, so a live view can draw its bands after every step."""
        Xs = validate_inputs(X_test, "X_test", width=self.X.shape[1])
        self.model.check_inputs(self.params, np.concatenate([np.asarray(self.X), Xs]))
        return self.engine.predict(self.params, self.X, state, jax.device_put(Xs))

    def joint_covariance(self, state: State, i: int, j: int) -> np.ndarray:
        """Posterior covariance of (f(x_i), f(x_j)) under the q of ``state``, a (2D, 2D)
        matrix (latents of x_i first): what the lab's two-point ellipses draw after every
        step. Read from the state's own factorisation of a full GP, so it agrees with
        the marginals to round-off. ValueError for other models: a sparse or Markov
        state holds no factorisation of the joint posterior, and a dense one costs
        O(N³) a call (``InferenceResult.joint_covariance`` builds it once for a finished
        Markov run)."""
        structure = self.model.structure
        if structure != "full":
            raise ValueError(f"the covariance of two points during a run needs the full GP "
                             f"model, not a {structure} one")
        return np.asarray(joint.joint_covariance(state.prior, state.sites, i, j))

    def run(self, max_iters=200) -> InferenceResult:
        """Iterate (compiled, one call) until converged, diverged or ``max_iters``."""
        max_iters = check_max_iters(max_iters)
        state, trace, n, converged, diverged = self.engine.run(
            self.params, self.X, self.y, self.settings, max_iters=max_iters)
        return InferenceResult(self.engine, self.params, self.X, self.y, state, trace, n,
                               converged, diverged, self.method, self.settings)


def infer(model, X, y, method="vi", *, alpha=1.0, damping=0.5, max_iters=200, tol=1e-8,
          backtracking=True, acceleration=True, params=None,
          cubature=("gauss_hermite", 20), **options) -> Result:
    """Run ``method`` on ``model`` to convergence, or for at most ``max_iters``
    iterations (an integer from 1 to ``MAX_ITERS``).

    ``backtracking``: for the methods that ascend the ELBO ('vi', 'vi_riemann',
    'ep_like'), reject a step that lowers it and halve the next step (``bnlab.engine``);
    for Laplace and its Gauss–Newton, quasi-Newton and Riemannian forms, shorten a step
    that lowers Ψ = log p(y|f) − ½fᵀK⁻¹f (``bnlab.engine.line_search``); False gives the
    fixed-step iteration (which can cycle or overshoot). Other methods ignore it.
    ``acceleration``: mix the site updates by Anderson acceleration
    (``bnlab.engine.anderson``) for 'vi' and 'ep_like' (with ``backtracking`` on: the ELBO
    guards a mixed step), 'ep', 'pep' and, when damped (ρ < 1), 'laplace' (a residual
    test guards it; ``Method.mixing``): the same fixed point in fewer
    iterations; False gives the papers' path.
    ``params`` overrides the model's hyperparameters (a dict like
    ``model.init_params()``, checked: finite positive values, an ARD lengthscale one per
    input column); ``cubature`` is (rule, order) for the expectations;
    ``options`` are method options (``base`` for 'heuristic', ``qn_damping`` ξ,
    ``covariance`` … for 'gkl').

    A site method (``bnlab.methods.REGISTRY``) runs as a ``Stepper``; a direct family
    (``bnlab.methods.DIRECT``, G-KL) through its record's ``infer``, which ignores
    ``alpha``, ``damping``, ``backtracking`` and ``acceleration``."""
    validate_settings(method, alpha, damping, max_iters, tol)
    direct = DIRECT.get(method)
    if direct is not None:
        X, y, params = prepare_problem(model, X, y, params)
        check_resolution(model, params, y, method, options)
        return direct.infer(model, X, y, params=params, max_iters=check_max_iters(max_iters),
                            tol=tol, cubature=cubature, **options)
    return Stepper(model, X, y, method, alpha=alpha, damping=damping, tol=tol,
                   backtracking=backtracking, acceleration=acceleration, params=params,
                   cubature=cubature, **options).run(max_iters)
