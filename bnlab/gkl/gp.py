"""G-KL for GP models: ``bnlab.infer(model, X, y, method="gkl", covariance=..., band=...)``
(Challis & Barber 2013, App. F: h_n = e_n, Σ = K).

The bound is optimised directly over (m, C) in the chosen covariance family
(``bnlab.gkl``); the result has the public fields of ``bnlab.InferenceResult`` so the
app and the surfaces treat it like any other method. With ``covariance="full"`` the
optimum is the natural-gradient VI (CVI) optimum: the same ELBO and the same q.

Ordering: banded and chevron structures are not permutation-invariant (§4.1.2), so by
default one-dimensional inputs are sorted (neighbours in x become neighbours in C);
``order="given"`` keeps the data order, an integer array sets it. ``result.order`` is
the permutation used; every reported quantity is in the caller's order.

``gkl_bound_at_optimum(params, X, y, model=..., covariance=...)`` is the pure version
for surfaces and learning: jit-able, vmap-able over ``params`` (a batched
``lax.while_loop``), and differentiable — its gradient with respect to the
hyperparameters is ∂B/∂θ at the optimal variational parameters held fixed (the
envelope theorem: the implicit terms vanish at a stationary point; this is [CB]
eq. 24, whose printed tr(CΣ⁻¹∂ΣΣ⁻¹C) should read tr(CΣ⁻¹∂ΣΣ⁻¹Cᵀ)).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from .. import cubature as cub
from ..methods.direct import DirectMethod
from .._runtime import exported
from .._runtime.compiled import CompiledCache
from ..results import Result, Trace, stop_reason
from .bound import kl_bound
from .fit import solve
from .prior import make_prior
from .structures import COVARIANCES, make_structure

__all__ = ["GKL", "infer_gkl", "GKLResult", "gkl_bound_at_optimum", "COVARIANCES"]

_RANKED = ("chevron", "subspace", "factor_analysis")


def _check_model(model):
    if getattr(model, "structure", None) != "full":
        raise ValueError(f"method 'gkl' needs a full GP model (bnlab.GP); got "
                         f"{type(model).__name__} with structure "
                         f"{getattr(model, 'structure', None)!r}")
    if model.num_latents != 1:
        raise ValueError(f"method 'gkl' supports single-latent likelihoods; "
                         f"{type(model.likelihood).__name__} has {model.num_latents} latents")


def _structure(covariance, band, rank):
    """``band`` also serves as K for chevron / subspace / FA when ``rank`` is not given
    (the app has one "band / rank K" control)."""
    if isinstance(covariance, str) and covariance in _RANKED and rank is None:
        rank = band
    return make_structure(covariance, band=band, rank=rank)


def _order(X, order):
    N = X.shape[0]
    if order is None or (isinstance(order, str) and order == "sorted"):
        return np.argsort(np.asarray(X[:, 0]), kind="stable") if X.shape[1] == 1 else np.arange(N)
    if isinstance(order, str):
        if order != "given":
            raise ValueError(f"order must be 'sorted', 'given' or a permutation, got {order!r}")
        return np.arange(N)
    perm = np.asarray(order)
    if perm.shape != (N,) or not np.array_equal(np.sort(perm), np.arange(N)):
        raise ValueError(f"order must be a permutation of range({N})")
    return perm


def _gp_prior(model, params, X):
    return make_prior(0.0, model.prior_covariance(params, X, X), None)


_COMPILED = CompiledCache(maxsize=16)


#: the programs of ``_build``, in its order
_PROGRAM_NAMES = ("run", "predict", "log_predictive", "summary")


def _compiled(model, structure, cubature, max_iters):
    """(run, predict, log_predictive, summary), jitted and shared by models with the same
    structure key (every number lives in ``params``), as ``engine.get_engine`` does;
    each called through its stored ``jax.export`` (``bnlab._runtime.exported``: the key
    describes the program completely — the structure's ``repr`` is its name and
    integers — so a new process neither traces nor lowers it)."""
    key = (model.structure_key(), structure, cubature, max_iters)

    def build():
        return tuple(_exported(jitted, ("gkl", key, name))
                     for name, jitted in zip(_PROGRAM_NAMES, _build(model, structure, cubature,
                                                                    max_iters)))
    return _COMPILED.get(key, build)


def _exported(jitted, program):
    def call(*args):
        return exported.call(jitted, program, args)
    return call


def _build(model, structure, cubature, max_iters):
    rule = cub.make_rule(cubature[0], int(cubature[1]), 1)

    def run(params, X, y, tol):
        prior = _gp_prior(model, params, X)
        return prior, solve(prior, structure, model.likelihood, params["likelihood"], y, rule,
                            max_iters=max_iters, tol=tol)

    def predict(params, X, prior, cov, mean_white, Xs):
        Ks = model.prior_covariance(params, X, Xs)
        A = solve_triangular(prior.chol, Ks, lower=True)            # L⁻¹K*
        G = solve_triangular(prior.chol.T, A, lower=False)           # K⁻¹K*
        kss = model.prior_variance(params, Xs)[:, 0, 0]
        var = kss - jnp.sum(A**2, 0) + jnp.sum(G * (cov @ G), 0)
        return A.T @ mean_white, var

    def log_predictive(params, X, prior, cov, mean_white, Xs, ys):
        mean, var = predict(params, X, prior, cov, mean_white, Xs)
        lik = model.likelihood
        return jax.vmap(lambda yn, m, v: lik.log_predictive(
            params["likelihood"], yn, m[None], v[None, None], rule))(ys, mean, var)

    def summary(prior, solution):
        """(dense S, posterior mean in the data's order of the run): one program for
        what the result keeps, which eager calls would compile op by op."""
        S = structure.covariance(solution.vparams["cov"], prior, solution.aux)
        return S, prior.chol @ solution.vparams["mean"]

    return jax.jit(run), jax.jit(predict), jax.jit(log_predictive), jax.jit(summary)


class GKLResult(Result):
    """The ``Result`` of ``bnlab.infer(..., method="gkl")``: its common fields
    (``log_marginal`` = the optimised bound B_KL, ``trace`` with the bound per L-BFGS
    iteration in ``energy``, PSD flags True — S = CᵀC is PSD by construction — and NaN
    for the site-method fields, ``mean``, ``cov`` (marginal variances), ``predict``,
    ``log_predictive``, ``n_iters`` (optimiser iterations, at most ``max_iters`` in all,
    the subspace structure's basis refreshes included), ``converged``, ``diverged``,
    ``stop_reason``, ``iterate``, ``method``) plus
    ``joint_covariance(i, j)``, ``posterior_covariance()`` (dense S), ``covariance``
    (the structure's name), ``structure`` and ``order``."""

    method = "gkl"

    def __init__(self, model, params, X, y, order, structure, prior, solution, compiled):
        self.model, self.params, self.X, self.y = model, params, X, y
        self.order, self.structure, self.covariance = order, structure, structure.name
        self._prior, self._solution = prior, solution
        _, self._predict, self._log_predictive, summary = compiled
        self._X_sorted = jax.device_put(np.asarray(X)[order])
        energy = np.asarray(solution.trace)
        energy = energy[np.isfinite(energy)]
        n = len(energy)
        nan, true = np.full(n, np.nan), np.ones(n, bool)
        self.trace = Trace(energy, nan, nan.copy(), true, true.copy(), nan.copy(), nan.copy(),
                           true.copy())
        self.n_iters = n
        self.log_marginal = float(solution.bound)
        self.converged = bool(solution.converged)
        self.diverged = bool(solution.diverged)
        self.stop_reason = ("diverged: non-finite bound or gradient" if self.diverged
                            else stop_reason(self.converged, False))
        self.iterate = n
        S, mean = summary(prior, solution)
        self._S = S
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        self._inverse = inverse
        self.mean = np.asarray(mean)[inverse]
        self.cov = np.diag(np.asarray(S))[inverse]

    def posterior_covariance(self) -> np.ndarray:
        """The dense posterior covariance S of f at the training inputs (caller's order)."""
        S = np.asarray(self._S)
        return S[np.ix_(self._inverse, self._inverse)]

    def joint_covariance(self, i: int, j: int) -> np.ndarray:
        """2×2 posterior covariance of (f_i, f_j) (training indices in the caller's order)."""
        N = len(self.order)
        for k in (i, j):
            if not (0 <= int(k) < N):
                raise ValueError(f"index {k} is out of range for {N} training points")
        idx = self._inverse[[int(i), int(j)]]
        return np.asarray(self._S)[np.ix_(idx, idx)]

    def _predict_points(self, Xs):
        """Latent predictive mean K*ᵀK⁻¹m and variance k** − K*ᵀK⁻¹K* + K*ᵀK⁻¹SK⁻¹K*
        ([CB] App. F.1)."""
        mean, var = self._predict(self.params, self._X_sorted, self._prior, self._S,
                                  self._solution.vparams["mean"], Xs)
        return np.asarray(mean), np.asarray(var)

    def _log_predictive_points(self, Xs, ys):
        return self._log_predictive(self.params, self._X_sorted, self._prior, self._S,
                                    self._solution.vparams["mean"], Xs, ys)


def infer_gkl(model, X, y, *, params, max_iters=200, tol=1e-8, cubature=("gauss_hermite", 20),
              covariance="full", band=None, rank=None, order=None, **unknown) -> GKLResult:
    """G-KL inference for a full GP (called by ``bnlab.infer(method="gkl")``, which has
    validated X and y). ``covariance`` ∈ ``COVARIANCES`` (aliases 'diagonal', 'fa');
    ``band`` = B for 'banded'; ``rank`` = K for 'chevron', 'subspace',
    'factor_analysis' (defaults to ``band``); ``order`` as in the module docstring."""
    if unknown:
        raise ValueError(f"unknown option(s) for method 'gkl': {', '.join(sorted(unknown))} "
                         f"(G-KL takes covariance, band, rank, order)")
    _check_model(model)
    structure = _structure(covariance, band, rank)
    X, y = np.asarray(X), np.asarray(y)         # ordered on the host: eager device
    perm = _order(X, order)                     # gathers would each compile a program
    compiled = _compiled(model, structure, tuple(cubature), int(max_iters))
    prior, solution = compiled[0](params, *jax.device_put((X[perm], y[perm], float(tol))))
    return GKLResult(model, params, *jax.device_put((X, y)), perm, structure, prior,
                     solution, compiled)


#: the largest prior variance / Gaussian noise ratio at which the structures optimised
#: in prior-whitened coordinates are run (``check_whitened_conditioning``)
WHITENED_MAX_RATIO = 1e11


def check_whitened_conditioning(model, params, options):
    """Refuses a covariance structure optimised in prior-whitened coordinates (all but
    'full', which precondition.py preconditions by the posterior for Gaussian noise)
    where the prior variance exceeds ``WHITENED_MAX_RATIO`` times the Gaussian noise:
    the bound's curvature there is I + σ²L_CᵀL_C/σ_n², and its optimiser starts at the
    prior, where the bound is about −½Nσ²/σ_n², which loosens its relative stopping
    test as much. At σ² = 1e12, σ_n² = 0.1 the subspace structure stopped 'converged'
    at −5e13 where log p(y) = −138.5; at σ² = 1e20 the banded, chevron and
    factor-analysis ones stopped at −1.8e7 … −5.6e9 (log p(y) = −230.6). Up to a
    ratio of 1e11 every structure reaches the closed form, in 300–3600 iterations
    from 1e9 (more than ``infer``'s default cap of 200: flagged unconverged there)."""
    covariance = options.get("covariance", "full")
    structure = _structure(covariance, options.get("band"), options.get("rank"))
    noise = model.likelihood.noise_variance(params["likelihood"])
    if noise is None or structure.preconditioned:
        return
    variance = model.largest_prior_variance(params)
    if variance / noise > WHITENED_MAX_RATIO:
        raise ValueError(
            f"Gaussian noise {noise:.3g} is too small for G-KL's {covariance!r} covariance "
            f"against a prior variance of {variance:.3g}: beyond a ratio of "
            f"{WHITENED_MAX_RATIO:g} its optimiser, in prior-whitened coordinates, stops "
            f"far from the optimum; use covariance='full' (preconditioned) or a noise above "
            f"{variance / WHITENED_MAX_RATIO:.1g}")


@partial(jax.jit, static_argnames=("model", "covariance", "band", "rank", "max_iters",
                                   "cubature"))
def gkl_bound_at_optimum(params, X, y, *, model, covariance="full", band=None, rank=None,
                         max_iters=500, tol=1e-9, cubature=("gauss_hermite", 20)):
    """The optimised G-KL bound max_{m, S} B_KL for hyperparameters ``params`` — pure.

    ``jax.vmap(lambda p: gkl_bound_at_optimum(p, X, y, model=model, covariance="banded",
    band=5))(stacked_params)`` evaluates a hyperparameter grid. One-dimensional inputs
    are sorted (as in ``infer``). ``jax.grad`` gives the exact gradient of the optimum
    (envelope theorem), provided the optimisation converged within ``max_iters``.
    """
    _check_model(model)
    structure = _structure(covariance, band, rank)
    X, y = jnp.asarray(X), jnp.asarray(y)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[1] == 1:
        perm = jnp.argsort(X[:, 0])
        X, y = X[perm], y[perm]
    rule = cub.make_rule(cubature[0], int(cubature[1]), 1)
    lik, lik_params = model.likelihood, params["likelihood"]
    prior = _gp_prior(model, params, X)
    frozen = jax.lax.stop_gradient
    sol = solve(frozen(prior), structure, lik, frozen(lik_params), y, rule,
                max_iters=max_iters, tol=tol)
    aux = structure.rebase(frozen(sol.aux), prior)
    return kl_bound(frozen(sol.vparams), prior, structure, aux, lik, lik_params, y, rule)


#: G-KL's record: what ``bnlab.infer`` and the surfaces run for ``method="gkl"``
#: (registered by ``bnlab.gkl``)
GKL = DirectMethod(name="gkl", description="Gaussian KL with a structured covariance (G-KL)",
                   infer=infer_gkl, bound_at_optimum=gkl_bound_at_optimum,
                   options=("covariance", "band", "rank", "order"),
                   bound_options=("covariance", "band", "rank"), energy="vfe",
                   check=check_whitened_conditioning)
