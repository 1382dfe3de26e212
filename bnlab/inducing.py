"""Choosing inducing (pseudo-) inputs Z for sparse GPs.

Both rules are pure JAX functions of (X, M, seed), so they run inside a jitted
``prepare`` when a ``SparseGP`` was given ``num_inducing`` instead of Z:

- ``random_subset``: M distinct training inputs drawn uniformly (BT25 App. C.1 uses
  this for the Snelson set);
- ``kmeans``: Lloyd's algorithm from k-means++ seeding (Arthur & Vassilvitskii
  2007); BT25 App. C.1 uses k-means elsewhere, as do Hensman et al. (2013). An empty
  cluster keeps its centre.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

__all__ = ["INDUCING_INITS", "random_subset", "kmeans_plus_plus", "kmeans", "initial_inducing", "check_num_inducing"]

INDUCING_INITS = ("kmeans", "random")
KMEANS_ITERS = 25


def check_num_inducing(num_inducing, num_data=None):
    if int(num_inducing) != num_inducing or num_inducing < 1:
        raise ValueError(f"num_inducing must be a positive integer, got {num_inducing!r}")
    if num_data is not None and num_inducing > num_data:
        raise ValueError(f"num_inducing = {num_inducing} exceeds the number of data points "
                         f"({num_data}); give Z explicitly with inducing=Z")


@partial(jax.jit, static_argnums=(1, 2))
def random_subset(X, num_inducing: int, seed: int = 0):
    """M rows of X drawn without replacement."""
    check_num_inducing(num_inducing, X.shape[0])
    idx = jax.random.choice(jax.random.PRNGKey(seed), X.shape[0], (num_inducing,), replace=False)
    return jnp.asarray(X)[idx]


@partial(jax.jit, static_argnums=(1, 2))
def kmeans_plus_plus(X, num_inducing: int, seed: int = 0):
    """k-means++ seeding: each next centre is a data point drawn with probability
    proportional to its squared distance from the nearest centre so far."""
    check_num_inducing(num_inducing, X.shape[0])
    X = jnp.asarray(X)
    keys = jax.random.split(jax.random.PRNGKey(seed), num_inducing)
    first = X[jax.random.randint(keys[0], (), 0, X.shape[0])]
    C0 = jnp.zeros((num_inducing, X.shape[1]), X.dtype).at[0].set(first)
    d0 = jnp.sum((X - first) ** 2, 1)

    def add(i, carry):
        C, d2 = carry
        logits = jnp.log(jnp.maximum(d2, 0.0))      # chosen points have weight 0
        x = X[jax.random.categorical(keys[i], logits)]
        return C.at[i].set(x), jnp.minimum(d2, jnp.sum((X - x) ** 2, 1))

    return jax.lax.fori_loop(1, num_inducing, add, (C0, d0))[0]


@partial(jax.jit, static_argnums=(1, 2, 3))
def kmeans(X, num_inducing: int, seed: int = 0, iters: int = KMEANS_ITERS):
    """Cluster centres after ``iters`` Lloyd iterations from k-means++ seeding.

    The inputs are centred first: the assignment step's |x|² − 2x·c + |c|² would
    otherwise cancel for inputs far from the origin (raw timestamps)."""
    X = jnp.asarray(X)
    offset = jnp.mean(X, 0)
    X = X - offset
    centres0 = kmeans_plus_plus(X, num_inducing, seed)
    x2 = jnp.sum(X**2, 1)

    def lloyd(_, C):
        d2 = x2[:, None] - 2 * X @ C.T + jnp.sum(C**2, 1)[None, :]
        onehot = jax.nn.one_hot(jnp.argmin(d2, 1), num_inducing, dtype=X.dtype)
        counts = onehot.sum(0)
        sums = onehot.T @ X
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], C)

    return jax.lax.fori_loop(0, iters, lloyd, centres0) + offset


def initial_inducing(X, num_inducing: int, method: str = "kmeans", seed: int = 0):
    """Z by ``method`` ∈ {"kmeans", "random"}."""
    if method == "kmeans":
        return kmeans(X, num_inducing, seed)
    if method == "random":
        return random_subset(X, num_inducing, seed)
    raise ValueError(f"inducing_init must be one of {INDUCING_INITS}, got {method!r}")
