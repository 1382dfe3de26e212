"""The synthetic Bayesian logistic-regression problem of Challis & Barber (2013, §6.2),
and the test log predictive density used in its Tables 2–4.

w_tr ~ N(0, I_D); covariates x = M x₀ with x₀ ~ N(0, I) and M = I + a sparse matrix
with one N(0, 1) entry per row (in a uniformly random column); every dimension is then
rescaled to unit variance (training statistics, applied to the test rows too); labels
y_n ∈ {±1} with p(y_n = 1) = σ(w_trᵀx_n). The model's prior N(0, I) and logistic
likelihood match the generator.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import cubature as cub
from ..likelihoods import Bernoulli

__all__ = ["LogisticProblem", "synthetic_logistic", "test_log_predictive"]


class LogisticProblem(NamedTuple):
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    w_true: np.ndarray


def synthetic_logistic(D: int, N: int, N_test: int, seed: int = 0) -> LogisticProblem:
    if min(D, N, N_test) < 1:
        raise ValueError(f"D, N and N_test must be positive, got {D}, {N}, {N_test}")
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(D)
    M = np.eye(D)
    M[np.arange(D), rng.integers(0, D, D)] += rng.standard_normal(D)
    X = rng.standard_normal((N + N_test, D)) @ M.T
    X /= X[:N].std(axis=0)
    p = 1.0 / (1.0 + np.exp(-X @ w))
    y = np.where(rng.uniform(size=N + N_test) < p, 1.0, -1.0)
    return LogisticProblem(X[:N], y[:N], X[N:], y[N:], w)


def test_log_predictive(mean, cov, X_test, y_test, order=20):
    """(1/N_tst) Σ log ⟨σ(y* wᵀx*)⟩_{q(w) = N(mean, cov)} (Gauss–Hermite on wᵀx*)."""
    lik, rule = Bernoulli("logit"), cub.make_rule("gauss_hermite", order, 1)
    X_test = jnp.asarray(X_test)
    m, v = X_test @ jnp.asarray(mean), jnp.sum((X_test @ jnp.asarray(cov)) * X_test, 1)
    lpd = jax.vmap(lambda y, a, b: lik.log_predictive({}, y, a[None], b[None, None], rule))(
        jnp.asarray(y_test), m, v)
    return float(jnp.mean(lpd))
