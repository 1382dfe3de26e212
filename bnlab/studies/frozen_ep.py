"""EP hyperparameter learning with frozen sites — the EP baseline of Li, John & Solin
(2023), Table 1, as GPy 1.10 runs it.

The paper's EP column is ``GPy.models.GPClassification(..., inference_method=EP())``
followed by one ``model.optimize()`` (L-BFGS-B, at most 10 000 iterations, θ started at
ℓ = σ² = 1; App. D.2 and the authors' ``bayesian_benchmarks/models/ep/models.py``).
GPy's EP resets its approximation when an optimisation starts, runs EP once at the
first θ the optimiser evaluates, and from then on keeps the sites *and* their
normalisers Z̃ᵢ frozen: every later objective value is the log marginal likelihood of a
Gaussian regression on the pseudo-observations μ̃ = ν̃/τ̃ with noise variances 1/τ̃,

    L(θ) = Σᵢ log Z̃ᵢ + log N(μ̃ | 0, K_θ + diag(1/τ̃))          (R&W eq. 3.65),

and the model predicts from that regression at the optimiser's last θ (nothing re-runs
EP at the end). Reproducing the paper's EP column needs exactly this (breast cancer:
−0.141 ± 0.018 against its −0.140 ± 0.020; EP re-converged at every θ gives −0.076),
and its Table 7 ("EP (new init.)", App. D.4) starts the same procedure from the hybrid
method's θ. ``bnlab.studies.learning.joint(method="ep")`` is EP learning with the sites
re-converged at every θ; both are offered.

Σᵢ log Z̃ᵢ is taken as the EP energy at the first θ minus the Gaussian term there, so L
equals the converged EP energy at θ₀ and moves only through the Gaussian term. The
Gaussian term uses B = I + S½KS½ (S = diag τ̃; R&W §3.6), stable for any τ̃ > 0:
log N = −½ bᵀB⁻¹b − ½ log|B| + ½ Σ log τ̃ − (n/2) log 2π with b = ν̃/√τ̃.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from scipy.optimize import minimize

from .._runtime.compiled import CompiledCache
from ..engine.loop import get_engine
from ..engine.state import make_settings
from ..infer import InferenceResult, infer, validate_data
from .learning import LearningResult, learnable, result_from_history

__all__ = ["alternated_ep", "frozen_site_gaussian_term"]


def frozen_site_gaussian_term(K, nat1, prec):
    """log N(ν̃/τ̃ | 0, K + diag(1/τ̃)) for site natural parameters ν̃ = nat1, τ̃ = prec
    (both (n,), τ̃ > 0), in the B = I + S½KS½ form of R&W §3.6."""
    s = jnp.sqrt(prec)
    B = jnp.eye(K.shape[0]) + s[:, None] * K * s[None, :]
    L = jnp.linalg.cholesky(B)
    c = jax.scipy.linalg.solve_triangular(L, nat1 / s, lower=True)
    return (-0.5 * c @ c - jnp.sum(jnp.log(jnp.diag(L))) + 0.5 * jnp.sum(jnp.log(prec))
            - 0.5 * K.shape[0] * jnp.log(2 * jnp.pi))


_OBJECTIVES = CompiledCache(maxsize=8)


def _compiled_objective(model, params, names):
    """jit(value_and_grad) of the Gaussian term as a function of (log θ, base θ, X, ν̃, τ̃),
    compiled once per model structure and learned names (every number is an argument)."""
    def build():
        _, _, from_free = learnable(model, params, list(names))

        def term(free, base, X, nat1, prec):
            return frozen_site_gaussian_term(
                model.prior_covariance(from_free(free, base), X, X), nat1, prec)
        return jax.jit(jax.value_and_grad(term))
    return _OBJECTIVES.get((model.structure_key(), tuple(names)), build)


def alternated_ep(model, X, y, *, params=None, learn=None, damping=0.5, max_iters=1000,
                  tol=1e-8, max_opt_iters=10000, cubature=("gauss_hermite", 20)
                  ) -> tuple[LearningResult, InferenceResult]:
    """EP once at the starting θ, then L-BFGS-B on L(θ) with the sites frozen (module
    docstring). Returns the learning result (``trajectory`` / ``objective``: θ and L at
    the start and after every L-BFGS-B iteration; ``stop_reason`` "converged",
    "max_steps" or "line_search_failed") and the frozen-site posterior at the learned
    θ, whose ``predict`` / ``log_predictive`` are the baseline's predictions. That
    posterior's ``log_marginal`` is the EP energy of the frozen sites at the learned θ
    (cavities recomputed), not L, which keeps GPy's Z̃ᵢ from θ₀: read L from
    ``objective``. ``cubature`` is EP's rule where the likelihood has no closed form."""
    if model.num_latents != 1 or model.structure != "full":
        raise ValueError("alternated_ep needs a full GP with one latent function "
                         f"(got structure={model.structure!r}, {model.num_latents} latents)")
    X, y = validate_data(model, X, y)
    params = model.init_params() if params is None else params
    names, to_free, from_free = learnable(model, params, learn)
    start = infer(model, X, y, method="ep", params=params, damping=damping,
                  max_iters=max_iters, tol=tol, cubature=cubature)
    if not start.converged:
        status = "diverged" if start.diverged else f"did not converge in {max_iters} iterations"
        raise ValueError(f"alternated_ep: EP at the starting hyperparameters {status}; "
                         "try a smaller damping or more iterations")
    nat1 = start.sites.nat1[:, 0]
    prec = start.sites.prec[:, 0, 0]

    objective = _compiled_objective(model, params, names)

    def value_and_grad(free):
        return objective(free, params, X, nat1, prec)

    free0 = to_free(params)
    constant = start.log_marginal - float(value_and_grad(free0)[0])
    v0, unflatten = ravel_pytree(free0)             # L-BFGS-B works on one flat vector
    seen = {}                                        # point → L(θ), for the trajectory

    def negative(v):
        value, grad = value_and_grad(unflatten(jnp.asarray(v)))
        seen[np.asarray(v, float).tobytes()] = constant + float(value)
        return -float(value), -np.asarray(ravel_pytree(grad)[0])

    def record(v):                                   # after every L-BFGS-B iteration
        key = np.asarray(v, float).tobytes()
        if key not in seen:
            negative(v)
        history.append((unflatten(jnp.asarray(v)), seen[key]))

    history = [(free0, start.log_marginal)]
    opt = minimize(negative, np.asarray(v0), jac=True, method="L-BFGS-B", callback=record,
                   options={"maxiter": int(max_opt_iters)})
    reason = ("converged" if opt.success else
              "max_steps" if opt.nit >= int(max_opt_iters) else "line_search_failed")
    learned = result_from_history(history, from_free, names, start.sites, reason)
    return learned, _frozen_posterior(model, X, y, learned.params, start.sites, cubature)


def _frozen_posterior(model, X, y, params, sites, cubature):
    """The posterior of the frozen sites under ``params`` (no EP iteration)."""
    engine = get_engine(model, "ep", cubature)
    settings = make_settings(1.0, 0.5, 1e-8)
    state, trace, n, _, _ = engine.run(params, X, y, settings, max_iters=0, sites=sites)
    return InferenceResult(engine, params, X, y, state, trace, n, False, False, "ep", settings)
