"""Batched LAPACK calls on the CPU (``bnlab._runtime.lapack_batches``): the sliced
lowering gives NumPy's (LAPACK's) values for batches larger than a slice, gradients
still flow, it applies to the jaxlibs seen to deadlock, and a program that jaxlib 0.10 would deadlock — as many independent batched
factorisations as the machine has cores, each above jaxlib's splitting size — finishes."""
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import bnlab
from bnlab._runtime import lapack_batches

bnlab.configure()           # installs the sliced lowering (where this jaxlib needs it)

RNG = np.random.default_rng(3)


def _spd(batch, n):
    A = RNG.normal(size=batch + (n, n))
    return A @ np.swapaxes(A, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("batch,n", [((7,), 60), ((2, 3), 75), ((333,), 9), ((1,), 120)])
def test_sliced_factorisations_equal_lapack_one_matrix_at_a_time(batch, n):
    assert lapack_batches._installed == lapack_batches.needed()
    S = _spd(batch, n)
    assert lapack_batches.slice_length(n * n * 8) < np.prod(batch) or batch == (1,)
    L = np.asarray(jax.jit(jnp.linalg.cholesky)(S))
    w, V = map(np.asarray, jax.jit(jnp.linalg.eigh)(S))
    B = RNG.normal(size=batch + (n, 3))
    X = np.asarray(jax.jit(lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True))(L, B))
    Y = np.asarray(jax.jit(jnp.linalg.solve)(S, B))
    _, logdet = map(np.asarray, jax.jit(jnp.linalg.slogdet)(S))
    for idx in np.ndindex(*batch):
        np.testing.assert_allclose(L[idx], np.linalg.cholesky(S[idx]), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(w[idx], np.linalg.eigvalsh(S[idx]), rtol=1e-10)
        np.testing.assert_allclose(S[idx] @ V[idx], V[idx] * w[idx], rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(X[idx], scipy.linalg.solve_triangular(L[idx], B[idx], lower=True),
                                   rtol=1e-9)
        np.testing.assert_allclose(Y[idx], np.linalg.solve(S[idx], B[idx]), rtol=1e-9)
        np.testing.assert_allclose(logdet[idx], np.linalg.slogdet(S[idx])[1], rtol=1e-12)


def test_the_slicing_applies_to_the_jaxlibs_that_deadlock():
    """0.9.2 and 0.10.x were seen to hang, 0.11.2 (on a 16-core GPU machine's CPU) not."""
    assert lapack_batches.needed("0.9.2") and lapack_batches.needed("0.10.2")
    assert lapack_batches.needed("0.11.0.dev20260301")
    assert not lapack_batches.needed("0.11.2") and not lapack_batches.needed("0.12.0rc1")


def test_gradients_flow_through_the_sliced_cholesky():
    """d/dS Σ log diag chol(S) = S⁻¹/2 on the symmetric part (log det S = 2 Σ log Lᵢᵢ)."""
    S = _spd((6,), 60)
    grad = jax.jit(jax.grad(lambda s: jnp.log(jnp.diagonal(jnp.linalg.cholesky(s), axis1=-2,
                                                                   axis2=-1)).sum()))(S)
    grad = np.asarray(grad)
    sym = (grad + np.swapaxes(grad, -1, -2)) / 2
    np.testing.assert_allclose(sym, np.linalg.inv(S) / 2, rtol=1e-8, atol=1e-12)


def test_independent_batched_factorisations_do_not_hang():
    """jaxlib 0.10 ran each of these (10 × 60 × 60: above its splitting size) as a
    pool task waiting for its own pieces on the same pool; with as many of them as the
    pool has workers, the program never returned (on two cores: within a few calls)."""
    k = max(2, os.cpu_count() or 2)
    S = _spd((k, 10), 60)
    program = jax.jit(lambda s: sum(jnp.linalg.cholesky(s[i] + i).sum() for i in range(k)))
    done = []

    def work():
        for r in range(40):
            done.append(float(program(S + r * 1e-9)))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), f"hung after {len(done)} of 40 calls"
    expected = sum(np.linalg.cholesky(S[i] + i).sum() for i in range(k))
    np.testing.assert_allclose(done[0], expected, rtol=1e-10)
