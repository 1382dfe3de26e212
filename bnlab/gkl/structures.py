"""Covariance parameterisations S = CᵀC of the G-KL approximation q(w) = N(m, S)
(Challis & Barber 2013, §4 and App. D).

C is upper triangular as in the paper (S = CᵀC, so s_n² = ‖C h_n‖²; the paper's
‖Cᵀh_n‖² in §4 is the printed slip, App. A/D have it right). Every structure gives,
from its parameters, the three pieces of the bound (eq. 7) that depend on S:

    ½ log det S,   tr(Σ⁻¹S),   s_n² = h_nᵀ S h_n  (n = 1 … N)

and the dense S for reporting. Parameters are *preconditioned* by the prior, so that
the prior part of the bound is −½‖·‖² in the optimiser's coordinates (App. E's basis
transformation, extended row by row to the sparse structures): row i of C with
support P_i is c_i = M_i⁻¹ c̃_i where Σ⁻¹[P_i, P_i] = M_iᵀM_i with M_i lower triangular,
so c_iᵀΣ⁻¹c_i = ‖c̃_i‖² and C_ii = c̃_i0 / (M_i)_00. For a dense trailing row
M_i = (L⁻¹)[i:, i:], i.e. C = C̃Lᵀ (App. E). This is a linear change of variables,
so it keeps the concavity of Theorem §3.2 and changes only the conditioning
(which, for a GP prior K with a long lengthscale, is what makes raw (m, C) hopeless
for a first-order optimiser).

The diagonal of C enters only through log|C_ii| (S is unchanged when a row of C is
negated), so no positivity transform is needed: log|C_ii| → −∞ at 0 is a barrier,
and the parameterisation stays linear.

Concavity (when every log φ_n is concave; never for Student-t sites):
  full, banded, chevron, mean_field — concave in (m, C);
  subspace — concave in (m, C₁, c) for a fixed basis E₁; the basis update (optimal
    for Gaussian sites) need not increase the bound otherwise (§4.1.3);
  factor_analysis — not concave (log det S is not even unimodal, §4.1.2);
  optimal — not concave in Γ (§4.1.1).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from .prior import GaussianPrior

__all__ = ["Structure", "Chevron", "Full", "Banded", "MeanField", "Subspace",
           "FactorAnalysis", "Optimal", "make_structure", "COVARIANCES"]


def _reverse_cholesky(A):
    """Lower-triangular M with A = MᵀM (batched): Cholesky of the index-reversed A."""
    R = jnp.linalg.cholesky(A[..., ::-1, ::-1])
    return jnp.swapaxes(R, -1, -2)[..., ::-1, ::-1]


def _sum_squares(P):
    return jnp.sum(P**2, axis=-1)


class Structure:
    """Base class: ``setup(prior) → aux``, ``init(prior, aux) → params``,
    ``terms(params, prior, aux) → (½ log det S, tr(Σ⁻¹S), s² (N,))``,
    ``covariance(params, prior, aux) → S`` (D, D). ``outer_steps`` > 0 asks the
    optimiser to alternate with ``refresh`` (the subspace basis update)."""

    name = "structure"
    concave = True
    outer_steps = 0
    preconditioned = False   # optimised in posterior-preconditioned coordinates (precondition.py)

    @property
    def key(self):
        return (self.name,)

    def __eq__(self, other):
        return isinstance(other, Structure) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"{type(self).__name__}{self.key[1:]}"

    def setup(self, prior: GaussianPrior):
        return ()

    def rebase(self, aux, prior: GaussianPrior):
        """``aux`` recomputed for another prior, keeping what the optimiser chose (the
        subspace basis) — used to differentiate the optimum with respect to Σ."""
        return self.setup(prior)


class _Ranked(Structure):
    """A structure with an integer rank K ≥ 1 (``rank_means`` says what K counts), capped
    at the dimension D of the prior."""

    rank_means = "rank"

    def __init__(self, rank: int):
        if int(rank) < 1:
            raise ValueError(f"{self.name} covariance: {self.rank_means} must be ≥ 1, "
                             f"got {rank}")
        self.rank = int(rank)

    @property
    def key(self):
        return (self.name, self.rank)

    def _k(self, prior):
        return min(self.rank, prior.dim)


class Chevron(_Ranked):
    """Chevron Cholesky (§4.1.2): the first K rows of C are dense (upper-trapezoidal),
    the remaining rows are diagonal: ≈DK parameters, sites O(NDK) (O(KD²) with a dense
    prior in the GP case), dense S with a sparse precision. Concave in (m, C) for
    log-concave sites. Not permutation-invariant: the first K variables get the
    dense rows."""

    name = "chevron"
    rank_means = "rank (number of dense rows)"

    def init(self, prior, aux):
        K, D = self._k(prior), prior.dim
        return {"top": jnp.eye(K, D), "diag": jnp.ones(D - K)}

    def _parts(self, params, prior):
        K, D = self._k(prior), prior.dim
        top = params["top"] * (jnp.arange(D)[None, :] >= jnp.arange(K)[:, None])
        diag_scale = jnp.sqrt(jnp.diag(prior.prec)[K:])
        return K, top, params["diag"] / diag_scale

    def terms(self, params, prior, aux):
        K, top, cdiag = self._parts(params, prior)
        diag_top = jnp.diag(top[:, :K]) * jnp.diag(prior.chol)[:K]
        half_logdet = jnp.sum(jnp.log(jnp.abs(diag_top))) + jnp.sum(jnp.log(jnp.abs(cdiag)))
        trace = jnp.sum(top**2) + jnp.sum(params["diag"] ** 2)
        s2 = _sum_squares(prior.H_white @ top.T)            # ‖C̃ h̃_n‖² for the dense rows
        if prior.H is None:
            s2 = s2.at[K:].add(cdiag**2)
        else:
            s2 = s2 + (prior.H[:, K:] ** 2) @ cdiag**2
        return half_logdet, trace, s2

    def covariance(self, params, prior, aux):
        K, top, cdiag = self._parts(params, prior)
        D = prior.dim
        lower = jnp.zeros((D - K, D)).at[jnp.arange(D - K), K + jnp.arange(D - K)].set(cdiag)
        C = jnp.concatenate([top @ prior.chol.T, lower])
        return C.T @ C


class Full(Chevron):
    """Full Cholesky S = CᵀC, C upper triangular (§4): ½D(D+1) parameters, sites
    O(ND²) (O(D³) for a GP). The bound is jointly concave in (m, C) for log-concave
    sites (Theorem §3.2, due to Titsias) and its optimum is the unconstrained
    Gaussian-KL optimum, i.e. the VI/CVI fixed point. Optimised as C = C̃Lᵀ (App. E),
    C̃ = ĈTᵀ with T the posterior preconditioner of precondition.py."""

    name = "full"
    preconditioned = True

    def __init__(self):
        self.rank = None

    @property
    def key(self):
        return (self.name,)

    def _k(self, prior):
        return prior.dim


class Banded(Structure):
    """Banded Cholesky (§4.1.2): C_ij = 0 for j > i + B. ≈D(B+1) parameters, sites
    O(NDB) (O(DB) for a GP), banded S (variables more than B apart are independent
    under q). Concave in (m, C) for log-concave sites. Not permutation-invariant:
    order the variables so that neighbours are correlated (sorted 1-D inputs)."""

    name = "banded"

    def __init__(self, band: int):
        if int(band) < 0:
            raise ValueError(f"banded covariance: band must be ≥ 0, got {band}")
        self.band = int(band)

    @property
    def key(self):
        return (self.name, self.band)

    def _b(self, prior):
        return min(self.band, prior.dim - 1)

    def setup(self, prior):
        D, B = prior.dim, self._b(prior)
        idx = jnp.arange(D)[:, None] + jnp.arange(B + 1)[None, :]
        valid = idx < D
        idx = jnp.minimum(idx, D - 1)
        A = prior.prec[idx[:, :, None], idx[:, None, :]]
        A = jnp.where(valid[:, :, None] & valid[:, None, :], A, jnp.eye(B + 1))
        H_shift = None if prior.H is None else jnp.pad(prior.H.T, ((0, B), (0, 0)))
        return (idx, valid, _reverse_cholesky(A), H_shift)

    def init(self, prior, aux):
        D, B = prior.dim, self._b(prior)
        return jnp.zeros((D, B + 1)).at[:, 0].set(1.0)

    def _rows(self, params, aux):
        """Band storage of C: rows[i, k] = C[i, i + k]."""
        _, valid, M, _ = aux
        ct = params * valid
        solve = jax.vmap(lambda Mi, ci: solve_triangular(Mi, ci, lower=True))
        return ct, solve(M, ct)

    def terms(self, params, prior, aux):
        D, B = prior.dim, self._b(prior)
        ct, rows = self._rows(params, aux)
        half_logdet = jnp.sum(jnp.log(jnp.abs(rows[:, 0])))
        trace = jnp.sum(ct**2)
        if prior.H is None:                      # s_j² = Σ_i C_ij² = Σ_k rows[j−k, k]²
            padded = jnp.pad(rows**2, ((B, 0), (0, 0)))
            s2 = sum(padded[B - k:B - k + D, k] for k in range(B + 1))
        else:                                    # (C h_n)_i = Σ_k rows[i, k] H[n, i + k]
            H_shift = aux[3]                     # Hᵀ padded with B zero rows
            CH = sum(rows[:, k][:, None] * H_shift[k:k + D] for k in range(B + 1))
            s2 = jnp.sum(CH**2, axis=0)
        return half_logdet, trace, s2

    def covariance(self, params, prior, aux):
        D = prior.dim
        idx = aux[0]
        _, rows = self._rows(params, aux)
        C = jnp.zeros((D, D)).at[jnp.arange(D)[:, None], idx].add(rows)
        return C.T @ C


class MeanField(Banded):
    """Mean-field (diagonal C, §4.1.2): D parameters, sites O(ND) (O(D) for a GP).
    Concave in (m, C) for log-concave sites. Banded with B = 0."""

    name = "mean_field"

    def __init__(self):
        self.band = 0

    @property
    def key(self):
        return (self.name,)


class Subspace(_Ranked):
    """Subspace Cholesky (§4.1.3, App. B.4): S = E₁ᵀC₁ᵀC₁E₁ + c²(I − E₁ᵀE₁) with E₁ a
    K×D orthonormal row basis, C₁ a K×K upper-triangular factor and one scalar c:
    ½K(K+1) + 1 parameters besides E₁, sites O(NK²) once E₁h_n is known. Concave in
    (m, C₁, c) for fixed E₁ and log-concave sites. E₁ is refreshed from eigenvectors
    of the eq. (21) precision Λ = Σ⁻¹ + Σ_n Γ_n h_n h_nᵀ (Γ_n = −2 ∂I_n/∂s_n²),
    alternated with the inner optimisation ``outer_steps`` times (the paper used 5);
    the best iterate is kept.

    Which eigenvectors: the paper keeps the K of *largest variance* (B.4.3). We keep
    the K that make the family optimal for a Gaussian target with precision Λ: the
    directions left to c then form a set R of L = D − K eigenvalues, c² = L / Σ_R λ
    is optimal and KL(q‖p) = (L/2) log(mean_R λ) − ½ Σ_R log λ (the log ratio of
    arithmetic to geometric mean), minimised by a *contiguous* window of the sorted
    spectrum (checked by brute force over all subsets; tests/gkl/test_gkl.py), so
    K + 1 windows are scanned in O(D) after the eigendecomposition. With N < D the
    largest-variance directions are the data's prior-variance null space, which c
    represents well anyway; the optimal window leaves them to c and keeps the
    sharpest data directions instead. Table 3 problem (D = 250, K = 13, N = 125):
    −0.955 per site against −1.057 for the paper's choice (2 data sets), −0.997 over
    the paper's 10 (banded: −1.063); equal at N = 1250. Both stay far above the
    paper's printed −2.93 / −0.60, which an entropy miscount explains (see
    tests/gkl/test_gkl_paper.py)."""

    name = "subspace"
    outer_steps = 5

    def _basis(self, prior, E):
        HE = E.T if prior.H is None else prior.H @ E.T
        h2 = jnp.ones(prior.dim) if prior.H is None else _sum_squares(prior.H)
        G = E @ prior.prec @ E.T
        return (E, HE, h2, G, jnp.trace(prior.prec))

    def setup(self, prior):
        return self._basis(prior, jnp.eye(self._k(prior), prior.dim))

    def rebase(self, aux, prior):
        return self._basis(prior, aux[0])

    def init(self, prior, aux):
        E = aux[0]
        sub = E @ (prior.chol @ prior.chol.T) @ E.T
        c = jnp.sqrt(jnp.mean(jnp.diag(prior.chol @ prior.chol.T)))
        return {"chol": jnp.linalg.cholesky(sub).T, "c": c}

    def _c1(self, params):
        return jnp.triu(params["chol"])

    def terms(self, params, prior, aux):
        E, HE, h2, G, tr_prec = aux
        K, D = E.shape
        C1, c = self._c1(params), params["c"]
        half_logdet = jnp.sum(jnp.log(jnp.abs(jnp.diag(C1)))) + (D - K) * jnp.log(jnp.abs(c))
        trace = jnp.sum((C1 @ G) * C1) + c**2 * (tr_prec - jnp.trace(G))
        s2 = _sum_squares(HE @ C1.T) + c**2 * (h2 - _sum_squares(HE))
        return half_logdet, trace, s2

    def covariance(self, params, prior, aux):
        E = aux[0]
        C1, c = self._c1(params), params["c"]
        K = E.shape[0]
        return E.T @ (C1.T @ C1 - c**2 * jnp.eye(K)) @ E + c**2 * jnp.eye(prior.dim)

    def refresh(self, params, prior, aux, gamma):
        """Basis update given Γ_n: the eigenvectors of Λ outside the optimal window
        (class docstring); the current S is re-expressed in the new basis
        (C₁ ← chol(E₁ S E₁ᵀ)), c and m are kept."""
        E_old = aux[0]
        K = E_old.shape[0]
        H = jnp.eye(prior.dim) if prior.H is None else prior.H
        precision = prior.prec + (H.T * gamma) @ H
        lam, vecs = jnp.linalg.eigh(0.5 * (precision + precision.T))   # ascending
        E = vecs[:, _outside_best_window(lam, K)].T
        C1, c = self._c1(params), params["c"]
        P = E @ E_old.T
        sub = P @ (C1.T @ C1 - c**2 * jnp.eye(K)) @ P.T + c**2 * jnp.eye(K)
        sub = 0.5 * (sub + sub.T)
        return {"chol": jnp.linalg.cholesky(sub).T, "c": c}, self._basis(prior, E)


def _outside_best_window(lam, K):
    """Indices (K,) of the ascending spectrum ``lam`` outside the window R of
    L = D − K consecutive eigenvalues minimising (L/2) log mean_R λ − ½ Σ_R log λ.
    λ ≤ 0 (non-log-concave sites) is clipped to the smallest normal number, so a
    window holding it is never chosen while another exists."""
    D = lam.shape[0]
    L = D - K
    if L == 0:
        return jnp.arange(K)
    lam = jnp.maximum(lam, jnp.finfo(lam.dtype).tiny)
    csum = jnp.concatenate([jnp.zeros(1), jnp.cumsum(lam)])
    clog = jnp.concatenate([jnp.zeros(1), jnp.cumsum(jnp.log(lam))])
    starts = jnp.arange(K + 1)
    cost = 0.5 * L * jnp.log((csum[starts + L] - csum[starts]) / L) \
        - 0.5 * (clog[starts + L] - clog[starts])
    j = jnp.argmin(cost)
    idx = jnp.arange(K)
    return jnp.where(idx < j, idx, idx + L)


class FactorAnalysis(_Ranked):
    """Factor analysis (§4.1.2, App. B.1): S = ΘΘᵀ + diag(d²), Θ ∈ R^{D×K}: D(K+1)
    parameters, sites O(NDK), log det S by the matrix-determinant lemma in O(DK²).
    **Not concave** (log det S is not even unimodal): L-BFGS finds a local optimum
    from a fixed pseudo-random start. Θ = LΘ̃ and d_j = δ_j/√(Σ⁻¹)_jj precondition
    the prior term. Entropy gradients by autodiff (the printed App. B.1 gradients
    are those of log det S, off by a factor 2 — notes A5)."""

    name = "factor_analysis"
    concave = False
    rank_means = "rank (number of factors)"

    def init(self, prior, aux):
        K = self._k(prior)
        loadings = 0.1 * jax.random.normal(jax.random.PRNGKey(0), (prior.dim, K))
        return {"loadings": loadings, "diag": jnp.ones(prior.dim)}

    def _parts(self, params, prior):
        d = params["diag"] / jnp.sqrt(jnp.diag(prior.prec))
        return prior.chol @ params["loadings"], d

    def terms(self, params, prior, aux):
        theta, d = self._parts(params, prior)
        K = theta.shape[1]
        inner = jnp.eye(K) + (theta / d[:, None] ** 2).T @ theta
        half_logdet = (jnp.sum(jnp.log(jnp.abs(d)))
                       + jnp.sum(jnp.log(jnp.diag(jnp.linalg.cholesky(inner)))))
        trace = jnp.sum(params["loadings"] ** 2) + jnp.sum(params["diag"] ** 2)
        if prior.H is None:
            s2 = _sum_squares(theta) + d**2
        else:
            s2 = _sum_squares(prior.H_white @ params["loadings"]) + (prior.H**2) @ d**2
        return half_logdet, trace, s2

    def covariance(self, params, prior, aux):
        theta, d = self._parts(params, prior)
        return theta @ theta.T + jnp.diag(d**2)


class Optimal(Structure):
    """The "optimal" structure (§4.1.1, eq. 10): S⁻¹ = Σ⁻¹ + Σ_n Γ_n h_n h_nᵀ with
    Γ = exp(γ) > 0 (N parameters). This is the form of the full-Cholesky optimum for
    log-concave sites, but the bound is **not concave** in Γ; Γ > 0 also excludes the
    negative site precisions a Student-t optimum may want. O(ND² + D³) per
    evaluation: B = I + H̃ᵀΓH̃ = RRᵀ gives ½ log det S = ½ log det Σ − Σ log R_ii,
    tr(Σ⁻¹S) = ‖R⁻¹‖²_F and s_n² = ‖R⁻¹h̃_n‖²."""

    name = "optimal"
    concave = False

    def init(self, prior, aux):
        return jnp.full(prior.num_sites, jnp.log(0.25))

    def _factor(self, params, prior):
        Hw = prior.H_white
        B = jnp.eye(prior.dim) + (Hw.T * jnp.exp(params)) @ Hw
        return jnp.linalg.cholesky(0.5 * (B + B.T))

    def terms(self, params, prior, aux):
        R = self._factor(params, prior)
        half_logdet = prior.half_logdet - jnp.sum(jnp.log(jnp.diag(R)))
        trace = jnp.sum(solve_triangular(R, jnp.eye(prior.dim), lower=True) ** 2)
        s2 = jnp.sum(solve_triangular(R, prior.H_white.T, lower=True) ** 2, axis=0)
        return half_logdet, trace, s2

    def covariance(self, params, prior, aux):
        W = solve_triangular(self._factor(params, prior), prior.chol.T, lower=True)
        return W.T @ W


COVARIANCES = ("full", "mean_field", "banded", "chevron", "subspace", "factor_analysis",
               "optimal")
_ALIASES = {"diagonal": "mean_field", "fa": "factor_analysis", "cholesky": "full"}


def make_structure(covariance="full", *, band=None, rank=None) -> Structure:
    """The structure object for a name in ``COVARIANCES`` (aliases: 'diagonal',
    'fa'). ``band`` is the bandwidth B of 'banded'; ``rank`` is K for 'chevron'
    (dense rows), 'subspace' (dimension) and 'factor_analysis' (factors)."""
    if isinstance(covariance, Structure):
        return covariance
    name = _ALIASES.get(covariance, covariance)
    if name not in COVARIANCES:
        raise ValueError(f"unknown G-KL covariance {covariance!r}; choose one of "
                         f"{', '.join(COVARIANCES)} (or 'diagonal', 'fa')")
    if name == "banded":
        if band is None:
            raise ValueError("banded covariance needs band=B (the number of super-diagonals "
                             "of C)")
        return Banded(band)
    if name in ("chevron", "subspace", "factor_analysis"):
        if rank is None:
            raise ValueError(f"{name} covariance needs rank=K")
        return {"chevron": Chevron, "subspace": Subspace, "factor_analysis": FactorAnalysis}[
            name](rank)
    return {"full": Full, "mean_field": MeanField, "optimal": Optimal}[name]()
