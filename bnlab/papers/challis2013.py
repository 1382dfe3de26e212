"""The synthetic Bayesian logistic-regression problem of Challis & Barber (2013, §6.2),
and the test log predictive density used in its Tables 2–4.

w_tr ~ N(0, I_D); covariates x = M x₀ with x₀ ~ N(0, I) and M = I + a sparse matrix
with one N(0, 1) entry per row (in a uniformly random column); every dimension is then
rescaled to unit variance (training statistics, applied to the test rows too); labels
y_n ∈ {±1} with p(y_n = 1) = σ(w_trᵀx_n). The model's prior N(0, I) and logistic
likelihood match the generator. Training rows are drawn before the test rows, so the
training set does not depend on N_test.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import cubature as cub
from ..likelihoods import Bernoulli

__all__ = ["LogisticProblem", "synthetic_logistic", "test_log_predictive", "CB_TABLE3"]

# [CB] Table 3 (D = 250, mean over 10 data sets): B/N_trn per (N, K) and structure
CB_TABLE3 = {
    (125, 13): {"chevron": -1.08, "banded": -1.05, "subspace": -2.93, "factor_analysis": -1.08},
    (125, 25): {"chevron": -1.05, "banded": -1.00, "subspace": -2.11, "factor_analysis": -1.06},
    (1250, 13): {"chevron": -0.41, "banded": -0.41, "subspace": -0.60, "factor_analysis": -0.40},
    (1250, 25): {"chevron": -0.40, "banded": -0.40, "subspace": -0.52, "factor_analysis": -0.39},
}


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
    def draw(n):
        Z = rng.standard_normal((n, D)) @ M.T
        return Z, rng.uniform(size=n)

    (X, u), (X_test, u_test) = draw(N), draw(N_test)
    scale = X.std(axis=0)
    X, X_test = X / scale, X_test / scale
    y, y_test = (np.where(v < 1.0 / (1.0 + np.exp(-Z @ w)), 1.0, -1.0)
                 for Z, v in ((X, u), (X_test, u_test)))
    return LogisticProblem(X, y, X_test, y_test, w)


def test_log_predictive(mean, cov, X_test, y_test, order=20):
    """(1/N_tst) Σ log ⟨σ(y* wᵀx*)⟩_{q(w) = N(mean, cov)} (Gauss–Hermite on wᵀx*)."""
    lik, rule = Bernoulli("logit"), cub.make_rule("gauss_hermite", order, 1)
    X_test = jnp.asarray(X_test)
    m, v = X_test @ jnp.asarray(mean), jnp.sum((X_test @ jnp.asarray(cov)) * X_test, 1)
    lpd = jax.vmap(lambda y, a, b: lik.log_predictive({}, y, a[None], b[None, None], rule))(
        jnp.asarray(y_test), m, v)
    return float(jnp.mean(lpd))
