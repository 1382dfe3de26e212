"""Markovian-GP global update: Kalman filter + RTS smoother with the sites as
pseudo-observations (Wilkinson et al. 2023, §8.3, Alg. 3 and eqs. 68–71, with the RTS
gain G_n = P_n A_{n+1}ᵀ (A_{n+1} P_n A_{n+1}ᵀ + Q_{n+1})⁻¹ where the paper prints
P̄_n A_{n+1} P̄_n⁻¹), O(S³N) in time and memory.

Prior: the state f̄_n (S = Σ_d s_d, independent latent SDEs stacked block-diagonally,
``bnlab.posterior.statespace``) at the *sorted* inputs follows f̄_n = A_n f̄_{n−1} + q_n,
q_n ~ N(0, Q_n), f̄_1 ~ N(0, P∞), and f_n = H̄ f̄_n. Sites t_n(f) = exp(ν̄ᵀf − ½fᵀΛ̄f).

**Information-form site update.** Λ̄ may be singular or indefinite, so C̄ = Λ̄⁻¹ is never
formed. With the predictive (m⁻, P⁻), U = P⁻H̄ᵀ, M = H̄P⁻H̄ᵀ and T = I + Λ̄M (D×D):

    m = m⁻ + U T⁻¹ (ν̄ − Λ̄H̄m⁻),     P = P⁻ − U T⁻¹Λ̄ Uᵀ       (T⁻¹Λ̄ = (Λ̄⁻¹ + M)⁻¹),

    log Z_n = log E_{N(μ, M)}[t_n(f)] = ν̄ᵀμ − ½μᵀΛ̄μ + ½ bᵀ T⁻ᵀM b − ½ log|det T|,
              μ = H̄m⁻, b = ν̄ − Λ̄μ,

and log_norm = Σ_n log Z_n = log ∫ p(f) Π t_n df (eq. 71; the paper writes it with
normalised Gaussian sites N(m̄|H̄f̄, C̄), we use the unnormalised t_n as the full model).
These are rational identities, valid even when an intermediate filtering covariance is
indefinite (a negative site that a later site makes up for).

**PSD test.** The posterior precision over the state path is block tridiagonal; it is
positive definite iff every pivot of its forward block-LDLᵀ factorisation is, i.e. the
"predictive precision" D_n = P_n⁻¹ + A_{n+1}ᵀQ_{n+1}⁻¹A_{n+1} of x_n given x_{n+1} and
sites 1..n (n < N), and D_N = P_N⁻¹. By Haynsworth inertia additivity on
[[P_n⁻¹, Aᵀ], [A, −Q]], D_n is PD iff pos(P_n) + neg(P⁻_{n+1}) = S — no Q⁻¹ needed, so
duplicate inputs (Q = 0) are fine. The inertias are counted from LDLᵀ pivots.

**Smoother** (RTS; the "P̄_n A_{n+1} P̄_n⁻¹" of the printed Alg. 3 is a typo): the backward
conditionals x_n | x_{n+1} = G_n x_{n+1} + g_n + N(0, L_n) with G_n = P_nA_{n+1}ᵀ(P⁻_{n+1})⁻¹,
g_n = m_n − G_n m⁻_{n+1}, L_n = P_n − G_nP⁻_{n+1}G_nᵀ, composed backwards.

``parallel=True`` composes the filtering and smoothing elements with
``jax.lax.associative_scan`` (Särkkä & García-Fernández 2021, "Temporal parallelization
of Bayesian smoothers", Lemmas 7–10); the filter elements are written in the same
information form: (A_e, b_e, C_e) = ((I − KΛ̄H̄)A, Kν̄, Q − KΛ̄Uᵀ) with U = QH̄ᵀ, K = UT⁻¹,
and (η, J) = ((H̄A)ᵀT⁻¹ν̄, (H̄A)ᵀT⁻¹Λ̄(H̄A)).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..linalg.small_blocks import inv_small, sym
from ..sites import Marginals, Sites
from .statespace import kernel_sde, stack, transitions

__all__ = ["MarkovPrior", "prepare", "marginals", "predict"]


@jax.tree_util.register_pytree_node_class
class MarkovPrior:
    """Sorted state-space prior at the training inputs. ``order`` sorts the caller's
    inputs, ``inverse`` undoes it; A[0] = 0 and Q[0] = P∞ encode the stationary start."""

    def __init__(self, order, inverse, A, Q, obs_index, parallel):
        self.order, self.inverse, self.A, self.Q = order, inverse, A, Q
        self.obs_index = tuple(obs_index)     # position of f_d in the state (H̄)
        self.parallel = bool(parallel)

    def tree_flatten(self):
        return (self.order, self.inverse, self.A, self.Q), (self.obs_index, self.parallel)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)


def _check_inputs(X):
    if X.ndim != 2 or X.shape[1] != 1:
        raise ValueError(f"MarkovGP needs one-dimensional inputs (an (N, 1) array); "
                         f"got X of shape {X.shape}")


def prepare(model, params, X) -> MarkovPrior:
    """Sort the inputs and discretise the stacked SDE between neighbours (eq. 70)."""
    _check_inputs(X)
    sdes = [kernel_sde(k, p) for k, p in zip(model.kernels, params["kernel"])]
    _, _, _, _, Pinf = stack(sdes)
    x = X[:, 0]
    order = jnp.argsort(x, stable=True)
    inverse = jnp.zeros_like(order).at[order].set(jnp.arange(x.shape[0]))
    xs = x[order]
    dt = jnp.concatenate([jnp.zeros(1, xs.dtype), jnp.diff(xs)])
    A, Q = transitions(sdes, dt)
    A = A.at[0].set(0.0)
    Q = Q.at[0].set(Pinf)
    sizes = [s.F.shape[0] for s in sdes]
    obs_index = [sum(sizes[:d]) for d in range(len(sizes))]
    return MarkovPrior(order, inverse, A, Q, obs_index, getattr(model, "parallel", False))


# -- the information-form site update (shared by both scans) -----------------------------
def _site_update(mp, Pp, nu, Lam, idx):
    """One filtering step for a single site: (m⁻, P⁻) → (m, P)."""
    U = Pp[:, idx]
    T = jnp.eye(len(idx)) + Lam @ U[idx, :]
    Ti = inv_small(T)
    m = mp + U @ (Ti @ (nu - Lam @ mp[idx]))
    P = Pp - U @ (Ti @ Lam) @ U.T
    return m, sym(P)


# -- small batched linear algebra, unrolled over the state size S ----------------------
# jaxlib's batched LAPACK custom calls (cholesky/eigh/solve over 10⁶ small matrices)
# can deadlock the CPU runtime below jaxlib 0.11.2 (``bnlab._runtime.lapack_batches``),
# and XLA fuses these unrolled loops well; S ≤ 6 here. Unpivoted LU (Doolittle): the
# matrices factorised are predictive covariances (symmetric, PD unless the posterior is
# not) and I + C J (similar to a PD matrix), whose leading minors are generically
# nonzero.
def _lu(M):
    S = M.shape[-1]
    L, U = {}, {}
    for i in range(S):
        for j in range(i, S):
            v = M[..., i, j]
            for k in range(i):
                v = v - L[i, k] * U[k, j]
            U[i, j] = v
        for j in range(i + 1, S):
            v = M[..., j, i]
            for k in range(i):
                v = v - L[j, k] * U[k, i]
            L[j, i] = v / U[i, i]
    return L, U


def _lu_solve(M, B):
    """M⁻¹B for (..., S, S) M and (..., S, k) B."""
    L, U = _lu(M)
    S = M.shape[-1]
    y = []
    for i in range(S):
        v = B[..., i, :]
        for k in range(i):
            v = v - L[i, k][..., None] * y[k]
        y.append(v)
    x = [None] * S
    for i in reversed(range(S)):
        v = y[i]
        for k in range(i + 1, S):
            v = v - U[i, k][..., None] * x[k]
        x[i] = v / U[i, i][..., None]
    return jnp.stack(x, -2)


def _pivots(M):
    """Diagonal of U in M = LU; for symmetric M their signs give the inertia
    (Sylvester's law: M = L diag(U_ii) Lᵀ)."""
    _, U = _lu(M)
    return jnp.stack([U[i, i] for i in range(M.shape[-1])], -1)


def _filter_sequential(A, Q, nu, Lam, idx):
    S = A.shape[-1]

    def step(carry, inp):
        m, P = carry
        An, Qn, nun, Lamn = inp
        mp, Pp = An @ m, An @ P @ An.T + Qn
        m, P = _site_update(mp, Pp, nun, Lamn, idx)
        return (m, P), (m, P)

    _, (m, P) = jax.lax.scan(step, (jnp.zeros(S), jnp.zeros((S, S))), (A, Q, nu, Lam))
    return m, P


def _mT(X):
    return jnp.swapaxes(X, -1, -2)


def _filter_elements(A, Q, nu, Lam, idx):
    """Särkkä & García-Fernández (2021) filtering elements, information-form sites."""
    U = Q[:, :, idx]                                           # (N, S, D)
    T = jnp.eye(len(idx)) + Lam @ U[:, idx, :]
    Ti = jax.vmap(inv_small)(T)
    K = U @ Ti
    HA = A[:, idx, :]                                          # (N, D, S)
    TiLam = sym(Ti @ Lam)
    Ae = A - K @ Lam @ HA
    be = jnp.einsum("nsd,nd->ns", K, nu)
    Ce = sym(Q - K @ Lam @ _mT(U))
    eta = jnp.einsum("nds,nd->ns", HA, jnp.einsum("nde,ne->nd", Ti, nu))
    J = sym(_mT(HA) @ TiLam @ HA)
    return Ae, be, Ce, eta, J


def _filter_op(e1, e2):
    """Combine an earlier element e1 with a later e2 (Lemma 8)."""
    A1, b1, C1, eta1, J1 = e1
    A2, b2, C2, eta2, J2 = e2
    S = A1.shape[-1]
    Zi = _lu_solve(jnp.eye(S) + C1 @ J2, jnp.broadcast_to(jnp.eye(S), C1.shape))  # (I + C1J2)⁻¹
    A2Zi = A2 @ Zi
    A = A2Zi @ A1
    b = jnp.einsum("...st,...t->...s", A2Zi, b1 + jnp.einsum("...st,...t->...s", C1, eta2)) + b2
    C = sym(A2Zi @ C1 @ _mT(A2) + C2)
    A1tZit = _mT(A1) @ _mT(Zi)                                 # A1ᵀ(I + J2C1)⁻¹
    eta = jnp.einsum("...st,...t->...s", A1tZit, eta2 - jnp.einsum("...st,...t->...s", J2, b1)) + eta1
    J = sym(A1tZit @ J2 @ A1 + J1)
    return A, b, C, eta, J


def _filter_parallel(A, Q, nu, Lam, idx):
    _, m, P, _, _ = jax.lax.associative_scan(_filter_op, _filter_elements(A, Q, nu, Lam, idx))
    return m, P


def _smoother_op(later, earlier):
    """x_i = E_i x_{i+1} + g_i + N(0, L_i), composed backwards (Lemma 10)."""
    E2, g2, L2 = later
    E1, g1, L1 = earlier
    return (E1 @ E2, jnp.einsum("...st,...t->...s", E1, g2) + g1, sym(E1 @ L2 @ _mT(E1) + L1))


def _smoother_sequential(G, g, L):
    S = G.shape[-1]

    def step(carry, inp):
        ms, Ps = carry
        Gn, gn, Ln = inp
        ms, Ps = Gn @ ms + gn, sym(Gn @ Ps @ Gn.T + Ln)
        return (ms, Ps), (ms, Ps)

    _, (ms, Ps) = jax.lax.scan(step, (jnp.zeros(S), jnp.zeros((S, S))), (G, g, L), reverse=True)
    return ms, Ps


def _smoother_parallel(G, g, L):
    _, ms, Ps = jax.lax.associative_scan(_smoother_op, (G, g, L), reverse=True)
    return ms, Ps


def _log_normalisers(mp, Pp, nu, Lam, idx):
    """log E_{N(H̄m⁻, H̄P⁻H̄ᵀ)}[t_n(f)] per step, in natural parameters (no Λ̄⁻¹)."""
    mu = mp[:, idx]
    M = Pp[:, idx][:, :, idx]
    T = jnp.eye(len(idx)) + Lam @ M
    b = nu - jnp.einsum("nde,ne->nd", Lam, mu)
    Tib = jnp.einsum("nde,ne->nd", jax.vmap(inv_small)(T), b)
    logdet = jnp.sum(jnp.log(jnp.abs(_pivots(T))), -1)
    return (jnp.sum(nu * mu, -1) - 0.5 * jnp.einsum("nd,nde,ne->n", mu, Lam, mu)
            + 0.5 * jnp.einsum("nd,nde,ne->n", Tib, M, b) - 0.5 * logdet)


def _posterior_pd(P, Pp_next):
    """Every block-LDLᵀ pivot of the state-path posterior precision is PD (see module
    docstring): pos(P_n) + neg(P⁻_{n+1}) = S for n < N, and P_N PD. Inertias from the
    LDLᵀ pivots (NaN pivots count as neither sign, so a failed filter is not PSD)."""
    S = P.shape[-1]
    piv, piv_next = _pivots(P), _pivots(Pp_next)
    pos = jnp.sum(piv[:-1] > 0, -1)
    neg_next = jnp.sum(piv_next < 0, -1)
    return jnp.all(pos + neg_next == S) & jnp.all(piv[-1] > 0)


def _smooth_sorted(prior: MarkovPrior, nu, Lam):
    """Filter + smoother on sorted sites → (smoothed means, covs, log_norm, psd)."""
    idx = jnp.array(prior.obs_index)
    A, Q = prior.A, prior.Q
    run_filter = _filter_parallel if prior.parallel else _filter_sequential
    m, P = run_filter(A, Q, nu, Lam, idx)
    # predictive moments m⁻_n = A_n m_{n−1}, P⁻_n = A_n P_{n−1} A_nᵀ + Q_n (A_1 = 0)
    m_prev = jnp.concatenate([jnp.zeros_like(m[:1]), m[:-1]])
    P_prev = jnp.concatenate([jnp.zeros_like(P[:1]), P[:-1]])
    mp = jnp.einsum("nst,nt->ns", A, m_prev)
    Pp = sym(A @ P_prev @ _mT(A) + Q)
    log_norm = jnp.sum(_log_normalisers(mp, Pp, nu, Lam, idx))
    psd = _posterior_pd(P, Pp[1:])
    # backward conditionals; the last one is the filtered marginal itself (G_N = 0)
    G = _mT(_lu_solve(Pp[1:], A[1:] @ P[:-1]))                 # P_n A_{n+1}ᵀ (P⁻_{n+1})⁻¹
    g = m[:-1] - jnp.einsum("nst,nt->ns", G, mp[1:])
    L = sym(P[:-1] - G @ Pp[1:] @ _mT(G))
    G = jnp.concatenate([G, jnp.zeros_like(G[:1])])
    g = jnp.concatenate([g, m[-1:]])
    L = jnp.concatenate([L, P[-1:]])
    run_smoother = _smoother_parallel if prior.parallel else _smoother_sequential
    ms, Ps = run_smoother(G, g, L)
    return ms[:, idx], Ps[:, idx][:, :, idx], log_norm, psd


def marginals(prior: MarkovPrior, sites: Sites) -> Marginals:
    """Posterior marginals q(f_n) = N(m_n, C_nn) in the caller's input order, log_norm
    and the PSD flag."""
    nu, Lam = sites.nat1[prior.order], sites.prec[prior.order]
    mean, cov, log_norm, psd = _smooth_sorted(prior, nu, Lam)
    mean, cov = mean[prior.inverse], cov[prior.inverse]
    psd = psd & jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(cov))
    return Marginals(mean, cov, log_norm, psd, jnp.zeros_like(cov))


def predict(model, params, X, prior: MarkovPrior, sites: Sites, marg: Marginals, Xs):
    """Latent predictive mean (Ns, D) and covariance blocks (Ns, D, D) at Xs (any order):
    the test inputs are interleaved with the training inputs as flat sites (ν̄ = 0,
    Λ̄ = 0) and the same filter + smoother is run on the union."""
    _check_inputs(Xs)
    N, D = sites.nat1.shape
    Ns = Xs.shape[0]
    union = prepare(model, params, jnp.concatenate([X, Xs]))
    padded = Sites(jnp.concatenate([sites.nat1, jnp.zeros((Ns, D))]),
                   jnp.concatenate([sites.prec, jnp.zeros((Ns, D, D))]))
    out = marginals(union, padded)
    return out.mean[N:], out.cov[N:]
