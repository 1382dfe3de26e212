"""``bnlab.gkl.fit``: G-KL inference for N(w|μ, Σ) Π_n φ_n(wᵀh_n) (Challis & Barber
2013) with a chosen covariance structure.

GP models are h_n = e_n, Σ = K (pass ``H=None``); Bayesian linear / logistic
regression is h_n = x_n (pass the design matrix). φ_n(f) = p(y_n | f) for any
single-latent bnlab likelihood (logistic and probit Bernoulli, Gaussian, Laplace,
Student-t, Poisson).

``solve`` is the pure core (jit / vmap over anything array-valued); ``fit`` validates
its inputs, runs a compiled ``solve`` and wraps the answer in a ``GKLFit``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import cubature as cub
from .._runtime import exported
from .._runtime.compiled import CompiledCache
from ..likelihoods import Likelihood
from .bound import kl_bound, site_precisions
from .optimise import maximise
from .precondition import preconditioner, to_white
from .prior import GaussianPrior, make_prior
from .structures import Structure, make_structure

__all__ = ["Solution", "GKLFit", "solve", "fit", "site_marginals"]


class Solution(NamedTuple):
    vparams: Any          # {"mean": m̃, "cov": structure parameters}
    aux: Any              # the structure's precomputed arrays (subspace: its basis)
    bound: jnp.ndarray
    trace: jnp.ndarray    # bound per iteration, NaN where unused (subspace: per outer step)
    n_iters: jnp.ndarray  # optimiser iterations, at most ``max_iters`` in all
    converged: jnp.ndarray  # every optimisation run stopped by its convergence test
    diverged: jnp.ndarray


def site_marginals(vparams, prior: GaussianPrior, structure: Structure, aux):
    """(m_n, s_n²) of q(wᵀh_n) for every site."""
    _, _, s2 = structure.terms(vparams["cov"], prior, aux)
    return prior.site_means(vparams["mean"]), s2


def solve(prior: GaussianPrior, structure: Structure, lik, lik_params, y, rule, *,
          max_iters: int, tol) -> Solution:
    """Maximise B_KL over (m, S) in the structure's family (pure). ``max_iters`` bounds
    the optimiser's iterations in all: a structure with outer steps (subspace: basis
    refreshes) shares it between them, each taking what the earlier ones left, and is
    converged only if every inner optimisation converged (the steps left without
    iterations have not). The best iterate over the outer steps is returned. A
    preconditioned structure (full), for a likelihood whose site precision is the same
    under every q (Gaussian), is optimised in the coordinates of precondition.py and its
    parameters returned in the prior-whitened ones; elsewhere the site precisions at the
    prior's marginals are not the posterior's (probit at σ² = 1e8: the bound stopped at
    −21.05 preconditioned by them, −13.85 whitened by the prior alone, VI −13.85)."""
    aux = structure.setup(prior)
    vparams = {"mean": jnp.zeros(prior.dim), "cov": structure.init(prior, aux)}

    def objective(aux):
        return lambda v: kl_bound(v, prior, structure, aux, lik, lik_params, y, rule)

    if structure.preconditioned and lik.constant_curvature:
        T = preconditioner(prior, lik, lik_params, y, rule)
        bound = objective(aux)
        r = maximise(lambda v: bound(to_white(v, T)), vparams, max_iters=max_iters, tol=tol,
                     dim=prior.dim)
        return Solution(to_white(r.params, T), aux, r.value, r.trace, r.n_iters, r.converged,
                        r.diverged)
    if not structure.outer_steps:
        r = maximise(objective(aux), vparams, max_iters=max_iters, tol=tol, dim=prior.dim)
        return Solution(r.params, aux, r.value, r.trace, r.n_iters, r.converged, r.diverged)

    best, traces, n_total = None, [], jnp.asarray(0)
    converged, diverged = jnp.asarray(True), jnp.asarray(False)
    for _ in range(structure.outer_steps):
        means, s2 = site_marginals(vparams, prior, structure, aux)
        gamma = site_precisions(lik, lik_params, y, means, s2, rule)
        cov, aux = structure.refresh(vparams["cov"], prior, aux, gamma)
        vparams = {"mean": vparams["mean"], "cov": cov}
        r = maximise(objective(aux), vparams, max_iters=max_iters, tol=tol, dim=prior.dim,
                     budget=max_iters - n_total)
        vparams, traces = r.params, traces + [r.trace]
        n_total, diverged = n_total + r.n_iters, diverged | r.diverged
        converged = converged & r.converged
        candidate = (r.params, aux, r.value)
        if best is None:
            best = candidate
        else:
            better = r.value > best[2]
            best = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), candidate, best)
    params, aux, value = best
    return Solution(params, aux, value, jnp.concatenate(traces), n_total, converged, diverged)


_SOLVERS = CompiledCache(maxsize=16)


def _compiled_solve(structure, lik, max_iters):
    """Compiled ``solve``, shared by likelihoods with the same structure key (their
    numbers live in ``lik_params``), called through its stored ``jax.export``
    (``bnlab._runtime.exported``: the key — the structure's name and integers, the
    likelihood's structure key, ``max_iters`` — describes the program completely, so a
    new process neither traces nor lowers it)."""
    key = (structure, lik.structure_key(), max_iters)

    def run(prior, lik_params, y, rule, tol):
        return solve(prior, structure, lik, lik_params, y, rule, max_iters=max_iters, tol=tol)

    jitted = _SOLVERS.get(key, lambda: jax.jit(run))
    return lambda *args: exported.call(jitted, ("gkl.fit", key), args)


class GKLFit:
    """Result of ``fit``: ``bound`` (the optimised B_KL, a lower bound on log Z),
    ``mean`` (m, (D,)), ``covariance()`` (dense S), ``marginal_variances()``,
    ``site_marginals()`` ((m_n, s_n²)), ``trace`` (bound per iteration), ``n_iters``,
    ``converged``, ``diverged``, ``structure``."""

    def __init__(self, solution: Solution, prior: GaussianPrior, structure: Structure):
        self.solution, self.prior, self.structure = solution, prior, structure
        self.bound = float(solution.bound)
        self.mean = np.asarray(prior.mean + prior.chol @ solution.vparams["mean"])
        trace = np.asarray(solution.trace)
        self.trace = trace[np.isfinite(trace)]
        self.n_iters = int(solution.n_iters)
        self.converged = bool(solution.converged)
        self.diverged = bool(solution.diverged)

    def covariance(self) -> np.ndarray:
        s = self.solution
        return np.asarray(self.structure.covariance(s.vparams["cov"], self.prior, s.aux))

    def marginal_variances(self) -> np.ndarray:
        return np.diag(self.covariance()).copy()

    def site_marginals(self):
        m, s2 = site_marginals(self.solution.vparams, self.prior, self.structure,
                               self.solution.aux)
        return np.asarray(m), np.asarray(s2)

    def __repr__(self):
        status = "converged" if self.converged else ("diverged" if self.diverged else
                                                     "not converged")
        return (f"GKLFit({self.structure!r}, bound={self.bound:.6g}, "
                f"iterations={self.n_iters}, {status})")


def _validate(prior_mean, prior_cov, H, likelihood, y, max_iters, tol):
    if not isinstance(likelihood, Likelihood):
        raise ValueError(f"likelihood must be a bnlab likelihood, got {likelihood!r}")
    if likelihood.num_latents != 1:
        raise ValueError(f"G-KL needs a single-latent likelihood (φ_n(wᵀh_n)); "
                         f"{type(likelihood).__name__} has {likelihood.num_latents} latents")
    cov = np.asarray(prior_cov, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or cov.shape[0] == 0:
        raise ValueError(f"prior_cov must be a square (D, D) matrix, got shape {cov.shape}")
    if not np.all(np.isfinite(cov)):
        raise ValueError("prior_cov has NaN or infinite entries")
    D = cov.shape[0]
    mean = np.asarray(prior_mean, dtype=float)
    if mean.ndim > 1 or (mean.ndim == 1 and mean.shape[0] != D) or not np.all(np.isfinite(mean)):
        raise ValueError(f"prior_mean must be a finite scalar or a ({D},) vector, "
                         f"got shape {mean.shape}")
    if H is not None:
        H = np.asarray(H, dtype=float)
        if H.ndim != 2 or H.shape[1] != D:
            raise ValueError(f"H must be an (N, {D}) matrix of projections h_n, got shape "
                             f"{H.shape}")
        if not np.all(np.isfinite(H)):
            raise ValueError("H has NaN or infinite entries")
    N = D if H is None else H.shape[0]
    y = likelihood.validate_targets(y)
    if y.shape[0] != N:
        raise ValueError(f"y has {y.shape[0]} entries but there are {N} sites "
                         f"({'D, as H is None' if H is None else 'rows of H'})")
    if int(max_iters) < 1:
        raise ValueError(f"max_iters must be at least 1, got {max_iters}")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be positive, got {tol}")
    return mean, cov, H, y


def fit(prior_mean, prior_cov, H, likelihood, y, covariance="full", *, band=None, rank=None,
        lik_params=None, cubature=("gauss_hermite", 20), max_iters=1000, tol=1e-9) -> GKLFit:
    """G-KL approximation N(m, S) of p(w) ∝ N(w|μ, Σ) Π_n p(y_n | wᵀh_n).

    ``H`` (N, D) has h_n as rows (``None``: h_n = e_n, the GP case); ``covariance`` is
    one of ``structures.COVARIANCES`` with ``band`` (banded) or ``rank`` (chevron,
    subspace, factor_analysis); ``lik_params`` defaults to ``likelihood.init_params()``;
    ``cubature`` = (rule, order) for likelihoods without a closed-form expectation.
    Gradients by autodiff; L-BFGS (optimise.py).
    """
    mean, cov, H, y = _validate(prior_mean, prior_cov, H, likelihood, y, max_iters, tol)
    structure = make_structure(covariance, band=band, rank=rank)
    prior = make_prior(jnp.asarray(mean), jnp.asarray(cov), None if H is None else jnp.asarray(H))
    if lik_params is None:
        lik_params = likelihood.init_params()
    rule = cub.make_rule(cubature[0], int(cubature[1]), 1)
    run = _compiled_solve(structure, likelihood, int(max_iters))
    solution = run(prior, lik_params, jnp.asarray(y), rule, jnp.asarray(float(tol)))
    return GKLFit(solution, prior, structure)
