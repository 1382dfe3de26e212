"""State-space (SDE) form of the Matérn kernels, for Markovian GPs.

A stationary GP with a Matérn-ν kernel, ν = p + ½, is the first component of the
linear time-invariant SDE (Hartikainen & Särkkä 2010; Särkkä & Solin 2019, §12.3;
Wilkinson et al. 2023, §8.3.1, eq. 69)

    df̄(x) = F f̄(x) dx + L dβ(x),   β with spectral density Q_c,   f(x) = H̄ f̄(x),

with state f̄ = (f, f′, …, f⁽ᵖ⁾), companion F whose characteristic polynomial is
(s + λ)^{p+1}, λ = √(2ν)/ℓ, and stationary covariance P∞ solving the Lyapunov equation
F P∞ + P∞ Fᵀ + L Q_c Lᵀ = 0. Its discretisation over a step Δ (eq. 70) is

    A = expm(F Δ),   Q = P∞ − A P∞ Aᵀ   (stationary start: P∞ is invariant).

Since F + λI is nilpotent of order p + 1 (Cayley–Hamilton), expm(FΔ) is computed in
closed form as e^{−λΔ} Σ_{k≤p} (Δ(F + λI))ᵏ/k! — exact, cheap and vectorised over
10⁶ steps. Several independent latents stack block-diagonally (``stack``).
"""
from __future__ import annotations

from math import factorial
from typing import NamedTuple

import jax.numpy as jnp

from ..kernels import Kernel, Matern12, Matern32, Matern52

__all__ = ["SDE", "kernel_sde", "stack", "transitions"]


class SDE(NamedTuple):
    """One latent's SDE. ``rate`` λ is the (only) eigenvalue −λ of F."""
    F: jnp.ndarray      # (s, s) feedback matrix
    L: jnp.ndarray      # (s, 1) noise effect
    Qc: jnp.ndarray     # (1, 1) spectral density of β
    H: jnp.ndarray      # (1, s) measurement: f = H f̄
    Pinf: jnp.ndarray   # (s, s) stationary covariance
    rate: jnp.ndarray   # () λ


_ORDER = {Matern12: 0, Matern32: 1, Matern52: 2}


def _scalar_lengthscale(params):
    ell = jnp.asarray(params["lengthscale"])
    if ell.size != 1:
        raise ValueError(f"a state-space kernel takes one input dimension, so one lengthscale; "
                         f"got lengthscale of shape {ell.shape}")
    return ell.reshape(())


def kernel_sde(kernel: Kernel, params) -> SDE:
    """The SDE of a Matérn-1/2, 3/2 or 5/2 kernel with hyperparameters ``params``
    (Särkkä & Solin 2019, eqs. 12.34–12.35; P∞ from the kernel's derivatives at 0:
    Var f⁽ʲ⁾ = (−1)ʲ k⁽²ʲ⁾(0), Cov(f, f″) = k″(0))."""
    p = _ORDER.get(type(kernel))
    if p is None:
        raise ValueError(f"{type(kernel).__name__} has no finite state-space form; "
                         f"use Matern12, Matern32 or Matern52")
    var = jnp.asarray(params["variance"]).reshape(())
    ell = _scalar_lengthscale(params)
    lam = jnp.sqrt(2.0 * p + 1.0) / ell
    if p == 0:
        F = -lam * jnp.ones((1, 1))
        Qc = 2.0 * var * lam
        Pinf = var * jnp.ones((1, 1))
    elif p == 1:
        F = jnp.array([[0.0, 1.0], [-(lam**2), -2.0 * lam]])
        Qc = 4.0 * var * lam**3
        Pinf = jnp.diag(jnp.array([var, var * lam**2]))
    else:
        F = jnp.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-(lam**3), -3.0 * lam**2, -3.0 * lam]])
        Qc = 16.0 / 3.0 * var * lam**5
        kappa = var * lam**2 / 3.0
        Pinf = jnp.array([[var, 0.0, -kappa], [0.0, kappa, 0.0], [-kappa, 0.0, var * lam**4]])
    s = p + 1
    L = jnp.zeros((s, 1)).at[s - 1, 0].set(1.0)
    H = jnp.zeros((1, s)).at[0, 0].set(1.0)
    return SDE(F, L, jnp.reshape(Qc, (1, 1)), H, Pinf, lam)


def _block_diag(mats):
    """Block-diagonal stacking of (..., s_d, s_d) matrices sharing leading axes."""
    sizes = [m.shape[-1] for m in mats]
    lead = mats[0].shape[:-2]
    out = jnp.zeros(lead + (sum(sizes), sum(sizes)), mats[0].dtype)
    i = 0
    for m, s in zip(mats, sizes):
        out = out.at[..., i:i + s, i:i + s].set(m)
        i += s
    return out


def stack(sdes):
    """Independent latents stacked: block-diagonal F, L, Q_c, P∞; H̄ is D×S and picks
    the first state component of every latent (f_n = H̄ f̄_n ∈ R^D)."""
    F = _block_diag([s.F for s in sdes])
    Pinf = _block_diag([s.Pinf for s in sdes])
    Qc = _block_diag([s.Qc for s in sdes])
    sizes = [s.F.shape[0] for s in sdes]
    L = jnp.zeros((sum(sizes), len(sdes)))
    H = jnp.zeros((len(sdes), sum(sizes)))
    offset = 0
    for d, s in enumerate(sizes):
        L = L.at[offset + s - 1, d].set(1.0)
        H = H.at[d, offset].set(1.0)
        offset += s
    return F, L, Qc, H, Pinf


def transition_matrix(sde: SDE, dt):
    """expm(F Δ) for each Δ in ``dt`` (shape (N,)) → (N, s, s), via the nilpotent
    series of F + λI (exact for the Matérn companion matrices)."""
    s = sde.F.shape[0]
    Nil = sde.F + sde.rate * jnp.eye(s)
    X = dt[:, None, None] * Nil
    term = jnp.broadcast_to(jnp.eye(s), X.shape)
    total = term
    for k in range(1, s):
        term = term @ X
        total = total + term / factorial(k)
    return jnp.exp(-sde.rate * dt)[:, None, None] * total


def transitions(sdes, dt):
    """Stacked transition and process-noise matrices for steps ``dt`` (N,):
    A_n = blockdiag_d expm(F_d Δ_n), Q_n = P∞ − A_n P∞ A_nᵀ (eq. 70). Δ = 0 gives
    A = I, Q = 0 (duplicate inputs)."""
    A = _block_diag([transition_matrix(s, dt) for s in sdes])
    Pinf = _block_diag([s.Pinf for s in sdes])
    Q = Pinf - A @ Pinf @ jnp.swapaxes(A, -1, -2)
    return A, 0.5 * (Q + jnp.swapaxes(Q, -1, -2))
