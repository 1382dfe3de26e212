"""Damped-BFGS quasi-Newton site targets (Wilkinson et al. 2023, eqs. 47–57).

Each site keeps its own matrix B ≈ ∇²_η L̄ over local parameters η, the previous η
and the previous gradient. After each step, with s = η_k − η_{k−1} and
g = ∇L̄(η_k) − ∇L̄(η_{k−1}), Powell's damping (eqs. 55–57, sign-adapted to a
negative-definite B; the printed eq. 55 is garbled) gives

    ψ = 1 if sᵀg ≤ (1 − ξ) sᵀBs, else ξ sᵀBs / (sᵀBs − sᵀg),
    r = ψ g + (1 − ψ) B s,
    B ← B − B s sᵀ B / sᵀBs + r rᵀ / sᵀr,

so sᵀr = (1 − ξ) sᵀBs < 0 and B stays negative definite: the site precision is PSD.
As in BayesNewton, B itself is damped by ρ and starts at −100·I. A pair is rejected
unless sᵀr < −1e-10 |s||r| and both s and the gradient change stand above round-off
(relative size 1e-11): BayesNewton's absolute test
(sᵀr < −1e-14) freezes B once the steps get small, leaving a fixed point away from
the method's optimum, while pairs with |s| near round-off only add noise. The
local parameters are

- ``laplace_qn``: η = m_n, L̄ = log p(y_n|f)  (H = B),
- ``vi_qn``:      η = [m_n; vec C_nn], L̄ = E_q[log p]  (H = B_mm, eq. 51),
- ``pl2_qn``:     η = [m_n; vec C_nn], L̄ = log N(y | μ, Ω)  (eq. 54),
- ``pep_qn``:     η = [m\\; vec C\\], L̄ = (1/α) log E_{q\\}[p^α], with
                  R = P\\(αB_mm + P\\)⁻¹, J = R∇L̄, H = R B_mm (eq. 53, the paper's sign;
                  BayesNewton's code uses −B instead, see notes §1.14). The site
                  precision −RB_mm is PSD only while −P\\ < αB_mm ≤ 0, so this B starts
                  at −0.01·I rather than −100·I (the true αh lies in (−P\\, 0) for
                  log-concave likelihoods).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .base import LocalInput, LocalUpdate, sym
from .linearisation import pl2_target
from .newton import grad_hess_log_prob
from .power_ep import cavity, log_tilted_normaliser
from .variational import expected_log_lik

__all__ = ["BFGSState", "bfgs_init", "damped_bfgs", "laplace_qn_local", "vi_qn_local",
           "pl2_qn_local", "pep_qn_local"]

B0_SCALE = 100.0
PEP_B0_SCALE = 0.01
CURVATURE_TOL = 1e-10
MIN_STEP = 1e-11


class BFGSState(NamedTuple):
    B: jnp.ndarray         # (k, k)
    eta: jnp.ndarray       # (k,)
    grad: jnp.ndarray      # (k,)
    started: jnp.ndarray   # () bool: a previous (η, ∇) pair exists


def bfgs_init(size, scale=B0_SCALE):
    def init(num_data, num_latents):
        k = size(num_latents)
        return BFGSState(jnp.broadcast_to(-scale * jnp.eye(k), (num_data, k, k)),
                         jnp.zeros((num_data, k)), jnp.zeros((num_data, k)),
                         jnp.zeros(num_data, dtype=bool))
    return init


def damped_bfgs(state: BFGSState, eta, grad, rho, xi):
    """One damped BFGS update of B from the pair (η, ∇L̄(η)); returns the new state."""
    B = state.B
    s = eta - state.eta
    g = grad - state.grad
    Bs = B @ s
    sBs = s @ Bs
    sg = s @ g
    psi = jnp.where(sg <= (1 - xi) * sBs, 1.0, xi * sBs / jnp.where(sBs - sg == 0, 1.0, sBs - sg))
    r = psi * g + (1 - psi) * Bs
    sr = s @ r
    informative = ((jnp.linalg.norm(s) > MIN_STEP * (1 + jnp.linalg.norm(eta)))
                   & (jnp.linalg.norm(g) > MIN_STEP * (jnp.linalg.norm(grad) + jnp.linalg.norm(state.grad))))
    curved = informative & (sr < -CURVATURE_TOL * jnp.linalg.norm(s) * jnp.linalg.norm(r))
    safe = jnp.where(curved, sr, -1.0)
    safe_sBs = jnp.where(sBs < 0, sBs, -1.0)
    B_new = B - jnp.outer(Bs, Bs) / safe_sBs + jnp.outer(r, r) / safe
    accept = state.started & curved & (sBs < 0) & jnp.all(jnp.isfinite(B_new))
    B_next = jnp.where(accept, sym((1 - rho) * B + rho * B_new), B)
    return BFGSState(B_next, eta, grad, jnp.array(True))


def _moment_eta(mean, cov):
    return jnp.concatenate([mean, cov.reshape(-1)])


def _moment_grad(L, mean, cov):
    gm, gC = jax.grad(L, argnums=(0, 1))(mean, cov)
    return jnp.concatenate([gm, gC.reshape(-1)])


def laplace_qn_local(lik, rule, xi):
    def local(inp: LocalInput):
        J, _ = grad_hess_log_prob(lik, inp.lik_params, inp.y, inp.mean)
        aux = damped_bfgs(inp.aux, inp.mean, J, inp.rho, xi)
        return LocalUpdate(J, aux.B, inp.mean, jnp.array(True)), aux
    return local


def _moment_qn_local(target, xi):
    def local(inp: LocalInput):
        L = lambda m, C: target(inp, m, C)
        grad = _moment_grad(L, inp.mean, inp.cov)
        aux = damped_bfgs(inp.aux, _moment_eta(inp.mean, inp.cov), grad, inp.rho, xi)
        D = inp.mean.shape[0]
        return LocalUpdate(grad[:D], aux.B[:D, :D], inp.mean, jnp.array(True)), aux
    return local


def vi_qn_local(lik, rule, xi):
    return _moment_qn_local(lambda inp, m, C: expected_log_lik(lik, rule, inp, m, C), xi)


def pl2_qn_local(lik, rule, xi):
    return _moment_qn_local(lambda inp, m, C: pl2_target(lik, rule, inp, m, C), xi)


def pep_qn_local(lik, rule, xi):
    def local(inp: LocalInput):
        Pc, Vc, mc, ok = cavity(inp.mean, inp.cov, inp.nat1, inp.prec, inp.alpha)
        L = lambda m, V: log_tilted_normaliser(lik, rule, inp, m, V) / inp.alpha
        grad = _moment_grad(L, mc, Vc)
        aux = damped_bfgs(inp.aux, _moment_eta(mc, Vc), grad, inp.rho, xi)
        D = inp.mean.shape[0]
        Bmm = aux.B[:D, :D]
        R = Pc @ jnp.linalg.inv(inp.alpha * Bmm + Pc)
        J, H = R @ grad[:D], sym(R @ Bmm)
        ok = ok & jnp.all(jnp.isfinite(J)) & jnp.all(jnp.isfinite(H))
        return LocalUpdate(J, H, mc, ok), aux
    return local


def moment_size(d):
    return d + d * d
