"""Dense linear algebra that XLA:CPU does not offer at GEMM speed.

XLA:CPU runs a matrix product near peak but has no triangular-aware product (BLAS
``trmm``) nor an inverse from a factor (LAPACK ``trtri``), and its triangular solve with
an N×N right-hand side does N³ flops at solve speed. The functions here recurse on
2×2 blocks so that almost all flops are dense products of half, quarter … size and
the known zero blocks are never multiplied:

``lower_triangular_inverse``  [[A, 0], [C, D]]⁻¹ = [[A⁻¹, 0], [−D⁻¹ C A⁻¹, D⁻¹]],
                              N³/3 flops (at N = 1000: 11 ms against 34 ms for the
                              solve against I, a Cholesky being 13 ms);
``lower_product``             the product of two lower-triangular matrices, 2N³/3
                              flops instead of a dense product's 2N³;
``lower_gram``                LᵀM for lower-triangular L and M = Λ̄L with block-diagonal
                              symmetric Λ̄, a symmetric matrix, in 2N³/3 flops.
The recursion is unrolled at trace time. Leaves are dense; ``lower_triangular_inverse``
stops at 32 rows up to N = 600, else at ``LEAF`` (``inverse_leaf``); the products at ``LEAF``.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

LEAF = 128


def _split(n: int, block: int = 1) -> int:
    """A split point near n/2 on a multiple of ``block`` (the site block size)."""
    return max(block, (n // 2) // block * block)


def inverse_leaf(n: int) -> int:
    """Leaf size of ``lower_triangular_inverse`` for an N×N factor. Small leaves move
    flops from XLA's triangular solve into products, which pays inside the compiled
    loop of ``Engine.run``: an iteration there, in Choleskys (benchmarks/README.md),
    VI 4.7 → 4.0 and EP 3.8 → 3.5 at N = 200 (means of six runs), VI 3.5 → 2.8 and
    EP 3.3 → 2.9 at N = 500 (four runs; PEP 3.7 → 4.0 in two), with leaves of 32 rows
    instead of 128; single step calls were unchanged within the noise. At N = 1000
    leaves of 32 made a VI step call slower (2.9 against 2.2–2.4), so large factors
    keep ``LEAF``."""
    return 32 if n <= 600 else LEAF


def lower_triangular_inverse(L, leaf: int | None = None):
    """L⁻¹ for a lower-triangular (N, N) L."""
    n = L.shape[0]
    leaf = inverse_leaf(n) if leaf is None else leaf
    if n <= leaf:
        return solve_triangular(L, jnp.eye(n, dtype=L.dtype), lower=True)
    h = _split(n)
    A_inv = lower_triangular_inverse(L[:h, :h], leaf)
    D_inv = lower_triangular_inverse(L[h:, h:], leaf)
    lower_left = -(D_inv @ (L[h:, :h] @ A_inv))
    return jnp.block([[A_inv, jnp.zeros((h, n - h), L.dtype)], [lower_left, D_inv]])


def lower_product(A, B):
    """AB for lower-triangular (N, N) A and B (lower-triangular too):
    [[A₁₁, 0], [A₂₁, A₂₂]]·[[B₁₁, 0], [B₂₁, B₂₂]] = [[A₁₁B₁₁, 0], [A₂₁B₁₁ + A₂₂B₂₁, A₂₂B₂₂]]."""
    n = A.shape[0]
    if n <= LEAF:
        return A @ B
    h = _split(n)
    lower_left = A[h:, :h] @ B[:h, :h] + A[h:, h:] @ B[h:, :h]
    return jnp.block([[lower_product(A[:h, :h], B[:h, :h]), jnp.zeros((h, n - h), A.dtype)],
                      [lower_left, lower_product(A[h:, h:], B[h:, h:])]])


def lower_gram(L, M, block: int = 1):
    """LᵀM for lower-triangular (N, N) L and M = Λ̄L, Λ̄ block-diagonal with symmetric
    (block × block) blocks, so that M is lower-triangular up to its diagonal blocks and
    LᵀM = LᵀΛ̄L is symmetric. Splitting on block boundaries (M₁₂ = 0):
    LᵀM = [[L₁₁ᵀM₁₁ + L₂₁ᵀM₂₁, (L₂₂ᵀM₂₁)ᵀ], [L₂₂ᵀM₂₁, L₂₂ᵀM₂₂]]."""
    n = L.shape[0]
    if n <= LEAF:
        return L.T @ M
    h = _split(n, block)
    top_left = lower_gram(L[:h, :h], M[:h, :h], block) + L[h:, :h].T @ M[h:, :h]
    lower_left = L[h:, h:].T @ M[h:, :h]
    return jnp.block([[top_left, lower_left.T],
                      [lower_left, lower_gram(L[h:, h:], M[h:, h:], block)]])
