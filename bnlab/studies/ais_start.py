"""Where the MCMC reference's annealing starts: the GP prior, or the Gaussian posterior
of an approximate method (EP by default) on the exact model.

Annealing from a distribution close to the posterior rather than from the prior is the
standard remedy for AIS's bias (Neal 2001, §6, "annealing from a tractable
approximation"): the log-weights' spread, hence the forward bound's downward bias, the
reverse bound's upward one and both standard errors, shrinks with the distance between
the start and the target. A site method's posterior is the prior times Gaussian sites,

    s(f) = −½ fᵀ W f + bᵀ f,     W block-diagonal (points × latents, each block PSD),

so the start is q(f) = N(f | 0, K) exp s(f) / Z₀ = N(f | m, S), S = (K⁻¹ + W)⁻¹,
m = S b, with, for B = I + Lᵀ W L (L = chol K, so K⁻¹ + W = L⁻ᵀ B L⁻¹),

    log Z₀ = −½ log |B| + ½ bᵀ S b.

The geometric path π_β ∝ N(f | 0, K) exp(β ℓ(f) + (1 − β) s(f)) ∝ q(f) exp(β h(f)),
h = ℓ − s, joins q (β = 0, sampled exactly) to the posterior (β = 1). Each π_β is a
Gaussian times a factor, the form elliptical slice sampling targets, with the ellipses
centred at m and drawn from N(0, S) (``ais_kernel``); AIS's increments are
(β_t − β_{t−1}) h(f), and log p(y) = log Z₀ + log E[w]. The prior start is W = 0,
b = 0: m = 0, S = K, Z₀ = 1, h = ℓ (Li, John & Solin 2023, App. B).

Any proper q keeps both bounds valid (in expectation); the approximation only decides
how fast the sandwich closes. EP's moment-matched q covers a skewed posterior's mass
(Kuss & Rasmussen 2005), where Laplace's mode-centred one is too narrow; so the default
is EP, then Laplace where EP does not converge, then the prior. A site block with a
negative eigenvalue (a non-log-concave likelihood's EP or Laplace site) is clipped to
0 in that direction, which keeps q proper.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular

__all__ = ["GaussianStart", "site_start", "start_sites", "STARTS", "STARTED_FROM"]

#: where the annealing may start (``mcmc.ais``'s ``start``): a site method's posterior
#: (the next one is tried where a method does not converge), or the prior
STARTS = ("ep", "laplace", "prior")
#: each start in words
STARTED_FROM = {"ep": "EP's posterior", "laplace": "Laplace's posterior", "prior": "the prior"}


class GaussianStart(NamedTuple):
    mean: jnp.ndarray        # (nD,) m
    factor: jnp.ndarray      # (nD, nD) R with RRᵀ = S (the ellipses' covariance)
    precision: jnp.ndarray   # (n, D, D) W's blocks
    shift: jnp.ndarray       # (nD,) b
    log_z0: jnp.ndarray      # log ∫ N(f | 0, K) exp s(f) df

    def site_log(self, f):
        """s(f) = −½ fᵀ W f + bᵀ f."""
        F = f.reshape(self.precision.shape[0], -1)
        return -0.5 * jnp.einsum("na,nab,nb->", F, self.precision, F) + self.shift @ f


def _apply_blocks(W, M):
    """W M for the block-diagonal W of the (n, D, D) blocks (point-major order, as
    ``f.reshape(n, D)``) and M with nD rows: n small products, not a dense nD × nD W."""
    n, D, _ = W.shape
    return jnp.einsum("nab,nbk->nak", W, M.reshape(n, D, -1)).reshape(n * D, -1)


def site_start(L, W, b) -> GaussianStart:
    """q ∝ N(f | 0, LLᵀ) exp(−½ fᵀWf + bᵀf) from PSD precision blocks ``W`` (n, D, D)
    and shifts ``b`` (nD,) (module docstring); pure, vmappable. W = 0, b = 0 is the
    prior."""
    nD = L.shape[0]
    C = jnp.linalg.cholesky(jnp.eye(nD) + L.T @ _apply_blocks(W, L))
    Lb = L.T @ b
    return GaussianStart(mean=L @ cho_solve((C, True), Lb),
                         factor=solve_triangular(C, L.T, lower=True).T,
                         precision=W, shift=b,
                         log_z0=(-jnp.sum(jnp.log(jnp.diag(C)))
                                 + 0.5 * jnp.sum(solve_triangular(C, Lb, lower=True) ** 2)))


def _proper(prec):
    """Each D × D block with its negative eigenvalues set to 0."""
    vals, vecs = np.linalg.eigh(prec)
    return np.einsum("nab,nb,ncb->nac", vecs, np.maximum(vals, 0.0), vecs)


def start_sites(model, X, y, params, start: str) -> tuple[np.ndarray, np.ndarray, str]:
    """The sites (W (n, D, D), b (nD,)) of the start named ``start`` (``STARTS``) at
    ``params``: that method's converged posterior on ``model`` (the exact model AIS
    samples), else the next method's, else the prior's zeros. Returns (W, b, the start
    used)."""
    from ..infer import infer
    from .work_limits import START_MAX_ITERS
    n, D = X.shape[0], model.num_latents
    for name in STARTS[STARTS.index(start):-1]:
        try:
            res = infer(model, X, y, method=name, params=params, max_iters=START_MAX_ITERS)
        except (ValueError, FloatingPointError):
            continue
        W, b = np.asarray(res.sites.prec, float), np.asarray(res.sites.nat1, float).reshape(-1)
        if res.converged and np.all(np.isfinite(W)) and np.all(np.isfinite(b)):
            return _proper(W), b, name
    return np.zeros((n, D, D)), np.zeros(n * D), "prior"
