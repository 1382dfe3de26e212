"""Dense linear algebra that XLA:CPU does not offer at GEMM speed.

XLA:CPU runs a matrix product near peak but has no triangular-aware product (BLAS
``trmm``) nor an inverse from a factor (LAPACK ``trtri``), and its triangular solve with
an N×N right-hand side does N³ flops at solve speed. The functions here recurse on
2×2 blocks so that almost all flops are dense products of half, quarter … size and
the known zero blocks are never multiplied:

``lower_triangular_inverse``  [[A, 0], [C, D]]⁻¹ = [[A⁻¹, 0], [−D⁻¹ C A⁻¹, D⁻¹]],
                              N³/3 flops instead of the N³ of a solve against I;
``times_lower``, ``lower_times``
                              AL and LX for lower-triangular L, mN² flops instead of 2mN²;
``lower_gram``                LᵀM for lower-triangular L and M = Λ̄L with block-diagonal
                              symmetric Λ̄, a symmetric matrix, in N³/2 flops;
``lower_solve``               L⁻¹Z for a general N×k right-hand side, N²k flops, most of
                              them in products;
``lower_solve_lower``         L⁻¹R for a lower-triangular right-hand side R (the result is
                              lower-triangular), N³/3 flops instead of the N³ of a solve
                              that ignores R's zeros.
``signed_cholesky_and_inverse``
                              M = L diag(σ) Lᵀ for symmetric M of known inertia σ (sorted,
                              +1 first), and L⁻¹, 2N³/3 flops; the factor of the
                              one-latent form of the full-GP marginals for site
                              precisions of either sign.
``column_sums``               1ᵀM as a matrix–vector product: XLA:CPU fuses ``jnp.sum``
                              of a matrix product into one YNNPACK kernel much slower
                              than the product alone.
``symmetric_cholesky``        the Cholesky factor of a matrix that is symmetric by
                              construction, without the transposing passes that
                              ``jnp.linalg.cholesky`` adds.
The recursion is unrolled at trace time. Leaves are dense; ``lower_triangular_inverse``
stops at 72 rows up to N = 600, the solves at 64 (``inverse_leaf``, ``solve_leaf``), both
at ``LEAF`` above, and both take the whole matrix as one leaf inside ``once()``; the
products at ``LEAF``, except inside the inverses (``inverse_product_leaf``);
``signed_cholesky_and_inverse`` at ``signed_leaf``.
"""
from __future__ import annotations

import contextlib
import threading

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

LEAF = 128


def _split(n: int, block: int = 1) -> int:
    """A split point near n/2 on a multiple of ``block`` (the site block size)."""
    return max(block, (n // 2) // block * block)


_ONCE = threading.local()


@contextlib.contextmanager
def once():
    """Within it (while a program is traced, in this thread) ``lower_triangular_inverse``,
    ``lower_solve`` and ``lower_solve_lower`` are one triangular solve each, without the
    recursion: for code that a program runs once (a run's first and last marginals,
    ``Engine``), where the unrolled recursion's hundreds of products cost seconds of
    XLA compilation and save microseconds of run time."""
    before = getattr(_ONCE, "active", False)
    _ONCE.active = True
    try:
        yield
    finally:
        _ONCE.active = before


def inverse_leaf(n: int) -> int:
    """Leaf size of ``lower_triangular_inverse`` for an N×N factor. Leaves smaller than
    ``LEAF`` move flops from XLA's triangular solve into products, which pays inside
    the compiled loop of ``Engine.run`` up to a few hundred rows; for large factors the
    extra recursion costs more than it saves, so they keep ``LEAF``. Every level of the
    recursion is unrolled into the program (its products, slices and joins), so leaves
    of 72 rather than 32 (two levels fewer at N = 281) make a VI or EP loop faster to
    compile at the same run time (sizes chosen by measurement, benchmarks/README.md).
    Inside ``once()``: N, no recursion."""
    if getattr(_ONCE, "active", False):
        return n
    return 72 if n <= 600 else LEAF


def solve_leaf(n: int) -> int:
    """Leaf size of ``lower_solve`` and ``lower_solve_lower`` for an N×N factor: the
    fastest of 16/32/64/128 rows for the prior-Cholesky form's solve
    (``lower_solve_lower`` at N×N) on pl2's benchmark sites. Inside ``once()``: N."""
    if getattr(_ONCE, "active", False):
        return n
    return 64 if n <= 600 else LEAF


#: Where the products forming an inverse's lower-left block stop skipping zero blocks
#: (``_inverse_lower_left``): below 32 rows a skipped zero block saves less than the
#: extra product calls cost; 32 was the fastest against the dense products at N ≤ 1000
#: for both ``lower_triangular_inverse`` and ``signed_cholesky_and_inverse``. Kept by the
#: latter and by inverses above N = 600 (``inverse_product_leaf``).
INVERSE_PRODUCT_LEAF = 32


def inverse_product_leaf(n: int) -> int:
    """Where ``lower_triangular_inverse`` of an N×N factor stops skipping zero blocks in
    its products: at its own leaf size up to N = 600 (72 rows: a level of unrolled
    products fewer to compile, no slower to run), else ``INVERSE_PRODUCT_LEAF``."""
    return 72 if n <= 600 else INVERSE_PRODUCT_LEAF


def lower_triangular_inverse(L, leaf: int | None = None, cut: int | None = None):
    """L⁻¹ for a lower-triangular (N, N) L. Both products of the lower-left block skip
    the zero blocks of the triangular inverses (``times_lower``, ``lower_times``, down
    to ``cut`` rows, by default ``inverse_product_leaf``): N³/3 flops, as LAPACK's
    ``trtri``, instead of the 2N³/3 of dense products."""
    n = L.shape[0]
    leaf = inverse_leaf(n) if leaf is None else leaf
    cut = inverse_product_leaf(n) if cut is None else cut
    if n <= leaf:
        return solve_triangular(L, jnp.eye(n, dtype=L.dtype), lower=True)
    h = _split(n)
    A_inv = lower_triangular_inverse(L[:h, :h], leaf, cut)
    D_inv = lower_triangular_inverse(L[h:, h:], leaf, cut)
    return jnp.block([[A_inv, jnp.zeros((h, n - h), L.dtype)],
                      [_inverse_lower_left(A_inv, L[h:, :h], D_inv, cut), D_inv]])


def _inverse_lower_left(A_inv, C, D_inv, cut: int = INVERSE_PRODUCT_LEAF):
    """−D⁻¹CA⁻¹, the lower-left block of [[A, 0], [C, D]]⁻¹, from the triangular
    inverses A⁻¹ and D⁻¹ without multiplying their zero blocks (down to ``cut`` rows)."""
    return -lower_times(D_inv, times_lower(C, A_inv, cut), cut)


def times_lower(A, L, leaf: int = LEAF):
    """AL for any (m, N) A and lower-triangular (N, N) L:
    [A₁, A₂]·[[L₁₁, 0], [L₂₁, L₂₂]] = [A₁L₁₁ + A₂L₂₁, A₂L₂₂]."""
    n = L.shape[0]
    if n <= leaf:
        return A @ L
    h = _split(n)
    left = times_lower(A[:, :h], L[:h, :h], leaf) + A[:, h:] @ L[h:, :h]
    return jnp.concatenate([left, times_lower(A[:, h:], L[h:, h:], leaf)], axis=1)


def lower_times(L, X, leaf: int = LEAF):
    """LX for lower-triangular (N, N) L and any (N, k) X:
    [[L₁₁, 0], [L₂₁, L₂₂]]·[X₁; X₂] = [L₁₁X₁; L₂₁X₁ + L₂₂X₂]."""
    n = L.shape[0]
    if n <= leaf:
        return L @ X
    h = _split(n)
    top = lower_times(L[:h, :h], X[:h], leaf)
    return jnp.concatenate([top, L[h:, :h] @ X[:h] + lower_times(L[h:, h:], X[h:], leaf)])


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
    upper_right = times_lower(M[h:, :h].T, L[h:, h:])           # (L₂₂ᵀM₂₁)ᵀ = M₂₁ᵀL₂₂
    return jnp.block([[top_left, upper_right],
                      [upper_right.T, lower_gram(L[h:, h:], M[h:, h:], block)]])


def lower_solve(L, Z, leaf: int | None = None):
    """L⁻¹Z for a lower-triangular (N, N) L and any (N, k) Z, by forward substitution
    on 2×2 blocks: X₁ = L₁₁⁻¹Z₁, X₂ = L₂₂⁻¹(Z₂ − L₂₁X₁)."""
    n = L.shape[0]
    leaf = solve_leaf(n) if leaf is None else leaf
    if n <= leaf:
        return solve_triangular(L, Z, lower=True)
    h = _split(n)
    top = lower_solve(L[:h, :h], Z[:h], leaf)
    bottom = lower_solve(L[h:, h:], Z[h:] - L[h:, :h] @ top, leaf)
    return jnp.concatenate([top, bottom])


def lower_solve_lower(L, R, leaf: int | None = None):
    """L⁻¹R for lower-triangular (N, N) L and R; the result X is lower-triangular:
    [[L₁₁, 0], [L₂₁, L₂₂]]·[[X₁₁, 0], [X₂₁, X₂₂]] = [[R₁₁, 0], [R₂₁, R₂₂]] gives
    X₁₁ = L₁₁⁻¹R₁₁, X₂₂ = L₂₂⁻¹R₂₂ (the same problem at half size) and
    X₂₁ = L₂₂⁻¹(R₂₁ − L₂₁X₁₁) (``lower_solve``). A leaf's forward substitution on
    R's zero rows gives exact zeros above the diagonal."""
    n = L.shape[0]
    leaf = solve_leaf(n) if leaf is None else leaf
    if n <= leaf:
        return solve_triangular(L, R, lower=True)
    h = _split(n)
    top_left = lower_solve_lower(L[:h, :h], R[:h, :h], leaf)
    lower_left = lower_solve(L[h:, h:], R[h:, :h] - times_lower(L[h:, :h], top_left), leaf)
    return jnp.block([[top_left, jnp.zeros((h, n - h), L.dtype)],
                      [lower_left, lower_solve_lower(L[h:, h:], R[h:, h:], leaf)]])


def signed_leaf(n: int) -> int:
    """Leaf size of ``signed_cholesky_and_inverse`` for an N×N matrix: the faster of
    32 and 64 rows for factor and inverse of a benchmark system (36 % negative sites)."""
    return 32 if n <= 600 else 64


def signed_cholesky_and_inverse(M, sign, leaf: int | None = None):
    """(L, L⁻¹) for lower-triangular L with M = L diag(σ) Lᵀ, for symmetric (N, N) M
    whose leading principal submatrices M₁:ₖ,₁:ₖ all have the inertia of σ₁:ₖ (``sign``,
    entries ±1, sorted +1 first). No pivoting is needed under that condition, and it
    is exactly what the full-GP marginals guarantee (``bnlab.posterior.full._signed_system``).
    A leading block that breaks it makes a leaf's Cholesky fail: L and L⁻¹ have NaNs.

    Block recursion, as for a Cholesky factor: with M₁₁ = L₁₁ Σ₁ L₁₁ᵀ,
    L₂₁ = M₂₁ L₁₁⁻ᵀ Σ₁ = ZᵀΣ₁ for Z = L₁₁⁻¹ M₁₂, the Schur complement
    S = M₂₂ − L₂₁ Σ₁ L₂₁ᵀ = M₂₂ − Zᵀ Σ₁ Z factored with σ₂, and
    L⁻¹ = [[L₁₁⁻¹, 0], [−L₂₂⁻¹ L₂₁ L₁₁⁻¹, L₂₂⁻¹]]. The inverse of each leading block
    comes out of the recursion, so Z is a matrix product instead of a triangular solve
    (XLA:CPU runs a product faster per flop than a triangular solve), and the marginals,
    which need L⁻¹, do not invert L again; asked for L alone, XLA prunes the unused
    products. Z through the inverse has the forward error of the triangular solve,
    ε·cond(L₁₁, Z) (Du Croz & Higham 1992), and ‖L₁₁⁻¹‖ ≤ 1 for the positive leading
    block, M₁₁ = I + G₁K₁₁G₁ ≥ I."""
    n = M.shape[0]
    leaf = signed_leaf(n) if leaf is None else leaf
    if n <= leaf:
        L = _signed_cholesky_leaf(M, sign)
        return L, solve_triangular(L, jnp.eye(n, dtype=M.dtype), lower=True)
    h = _split(n)
    L11, L11_inv = signed_cholesky_and_inverse(M[:h, :h], sign[:h], leaf)
    Z = L11_inv @ M[h:, :h].T
    L21 = Z.T * sign[None, :h]
    L22, L22_inv = signed_cholesky_and_inverse(M[h:, h:] - L21 @ Z, sign[h:], leaf)
    zeros = jnp.zeros((h, n - h), M.dtype)
    L = jnp.block([[L11, zeros], [L21, L22]])
    L_inv = jnp.block([[L11_inv, zeros], [_inverse_lower_left(L11_inv, L21, L22_inv), L22_inv]])
    return L, L_inv


def _signed_cholesky_leaf(M, sign):
    """A leaf of ``signed_cholesky_and_inverse``: a pure-sign block (every leaf but the
    one where σ changes sign) is σ₀ times a positive definite matrix, one Cholesky.
    Otherwise, with p leading +1s, M = [[A, Bᵀ], [B, C]]: the factor is [[chol A, 0],
    [B chol(A)⁻ᵀ, chol(BA⁻¹Bᵀ − C)]], which is the Cholesky factor of
    T = [[A, Bᵀ], [B, 2BA⁻¹Bᵀ − C]] (its Schur complement is BA⁻¹Bᵀ − C). The split p is
    known only at run time, so A⁻¹ is taken as that of A ⊕ I (masks, fixed shapes)."""
    def mixed():
        positive = sign > 0
        both_positive = positive[:, None] & positive[None, :]
        both_negative = ~positive[:, None] & ~positive[None, :]
        L_A = symmetric_cholesky(jnp.where(both_positive, M, jnp.eye(M.shape[0], dtype=M.dtype)))
        B = jnp.where(~positive[:, None] & positive[None, :], M, 0.0)
        Z = solve_triangular(L_A, B.T, lower=True)
        return jnp.linalg.cholesky(jnp.where(both_negative, 2.0 * (Z.T @ Z) - M, M))

    return jax.lax.cond(sign[0] == sign[-1], lambda: symmetric_cholesky(sign[0] * M), mixed)


def symmetric_cholesky(M):
    """The lower Cholesky factor of a symmetric M (NaN throughout if M is not positive
    definite, as ``jnp.linalg.cholesky``). ``jnp.linalg.cholesky`` first symmetrises,
    (M + Mᵀ)/2, and LAPACK wants M column-major while XLA builds it row-major: one
    transposing pass over every entry, which XLA:CPU fuses with M's construction. For
    symmetric M, M = Mᵀ and the row-major Mᵀ *is* M
    column-major, so factoring Mᵀ without symmetrising needs no copy at all.
    For M symmetric up to round-off (a kernel matrix from a matrix product need
    not be symmetric to the last bit) LAPACK reads one triangle, here M's upper one, so
    L is the factor of a matrix within round-off of M, as the symmetrised one is."""
    return jax.lax.linalg.cholesky(M.T, symmetrize_input=False)


def column_sums(M):
    """Σ_i M_ij, as the product 1ᵀM. ``jnp.sum(M, 0)`` where M is (an elementwise
    function of) a matrix product is fused by XLA:CPU with that product into one
    YNNPACK kernel much slower than the product alone; a matrix–vector product is
    not."""
    return jnp.ones(M.shape[0], M.dtype) @ M
