"""Choosing inducing (pseudo-) inputs Z for sparse GPs.

Both rules are pure JAX functions of (X, M, seed), so they run inside a jitted
``prepare`` when a ``SparseGP`` was given ``num_inducing`` instead of Z:

- ``random_subset``: M distinct training inputs drawn uniformly (BT25 App. C.1 uses
  this for the Snelson set);
- ``kmeans``: Lloyd's algorithm started from a random subset (BT25 App. C.1 uses
  k-means elsewhere; Hensman et al. 2013). An empty cluster keeps its centre.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["INDUCING_INITS", "random_subset", "kmeans", "initial_inducing", "check_num_inducing"]

INDUCING_INITS = ("kmeans", "random")
KMEANS_ITERS = 25


def check_num_inducing(num_inducing, num_data=None):
    if int(num_inducing) != num_inducing or num_inducing < 1:
        raise ValueError(f"num_inducing must be a positive integer, got {num_inducing!r}")
    if num_data is not None and num_inducing > num_data:
        raise ValueError(f"num_inducing = {num_inducing} exceeds the number of data points "
                         f"({num_data}); give Z explicitly with inducing=Z")


def random_subset(X, num_inducing: int, seed: int = 0):
    """M rows of X drawn without replacement."""
    check_num_inducing(num_inducing, X.shape[0])
    idx = jax.random.choice(jax.random.PRNGKey(seed), X.shape[0], (num_inducing,), replace=False)
    return X[idx]


def kmeans(X, num_inducing: int, seed: int = 0, iters: int = KMEANS_ITERS):
    """Cluster centres after ``iters`` Lloyd iterations from a random subset of X."""
    centres0 = random_subset(X, num_inducing, seed)
    x2 = jnp.sum(X**2, 1)

    def lloyd(_, C):
        d2 = x2[:, None] - 2 * X @ C.T + jnp.sum(C**2, 1)[None, :]
        onehot = jax.nn.one_hot(jnp.argmin(d2, 1), num_inducing, dtype=X.dtype)
        counts = onehot.sum(0)
        sums = onehot.T @ X
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], C)

    return jax.lax.fori_loop(0, iters, lloyd, centres0)


def initial_inducing(X, num_inducing: int, method: str = "kmeans", seed: int = 0):
    """Z by ``method`` ∈ {"kmeans", "random"}."""
    if method == "kmeans":
        return kmeans(X, num_inducing, seed)
    if method == "random":
        return random_subset(X, num_inducing, seed)
    raise ValueError(f"inducing_init must be one of {INDUCING_INITS}, got {method!r}")
