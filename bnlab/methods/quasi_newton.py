"""Damped-BFGS quasi-Newton site targets (Wilkinson et al. 2023, eqs. 47–57).

Each site keeps its own matrix B ≈ ∇²_m L̄ (D×D, negative definite) and its previous
mean. After each step, with s = m_k − m_{k−1} and a gradient difference g, Powell's
damping (eqs. 55–57, sign-adapted to a negative-definite B; the printed eq. 55 is
garbled) gives

    ψ = 1 if sᵀg ≤ (1 − ξ) sᵀBs, else ξ sᵀBs / (sᵀBs − sᵀg),
    r = ψ g + (1 − ψ) B s,
    B ← B − B s sᵀ B / sᵀBs + r rᵀ / sᵀr,

so sᵀr = (1 − ξ) sᵀBs < 0 and B stays negative definite: the site precision is PSD.
As in BayesNewton, B itself is damped by ρ and starts at −100·I.

**Deviation from the paper, on purpose.** Eqs. 50–54 run BFGS over η = [m; vec C] and
use the block B_mm. The secant pairs of that joint iteration do not determine B_mm:
they only probe the joint Hessian along the directions the iteration happens to take,
and once the steps shrink, B_mm freezes wherever it is — a fixed point whose mean is
right but whose covariance is not the method's optimum (a 5e-2 ELBO error for VQN on
Gaussian regression). We instead form the secant *at fixed covariance*,
g = ∇_m L̄(m_k, C_k) − ∇_m L̄(m_{k−1}, C_k) (one extra gradient per site), which
removes the covariance change from the pair exactly as the paper intends η's
vec C part to do, and makes B_mm a secant estimate of ∇²_m L̄ itself.

A pair is used only while g stands well above the rounding error of the gradients it
differences: |g| > SECANT_RTOL·(|∇_k| + |∇_{k−1}|). Near a fixed point the steps
shrink, the gradients do not (they balance the prior), and a secant through two
cubature gradients that agree to 1e-14 is noise of relative size 1e-14/|g|. Used,
that noise moved B, B moved the sites and the mean, and the next pair measured that
move: VQN and PEP-QN then never converged (relative site changes stayed near 1e-6 for
thousands of iterations at an energy constant to 1e-13, on the lab's probit, Poisson
and Student-t presets). The
loop dies once the noise a pair can inject, ε_g/τ, is below what the threshold τ
admits, τ > √ε_g; ε_g ≈ 1e-14 gives τ = 1e-7, above which B's secant is still
accurate to about τ relative (its truncation error is of the order of the step).
Pairs also need s above round-off (relative size 1e-11), and BayesNewton's curvature
test (sᵀr < 0, relative here) applies.

- ``laplace_qn``: L̄(m) = log p(y_n|m) (eq. 47–49); H = B.
- ``vi_qn``:      L̄(m, C) = E_{N(m,C)}[log p] (eq. 50–51); H = B.
- ``pl2_qn``:     L̄(m, C) = log N(y | μ(m, C), Ω(m, C)) (eq. 54); H = B.
- ``pep_qn``:     L̄(m\\, C\\) = (1/α) log E_{q\\}[p^α] at the cavity; R = P\\(αB + P\\)⁻¹,
                  J = R∇L̄, H = R B (eq. 53 with the paper's sign; BayesNewton's code
                  uses −B with the opposite sign). −RB is PSD only while −P\\ < αB ≤ 0, so this
                  B starts at −0.01·I (the true αh lies in (−P\\, 0) for log-concave
                  likelihoods).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..linalg.small_blocks import inv_small, sym
from .base import LocalInput, LocalUpdate
from .linearisation import pl2_target
from .targets import cavity, tilted_derivatives

__all__ = ["BFGSState", "bfgs_init", "damped_bfgs", "laplace_qn_local", "vi_qn_local",
           "pl2_qn_local", "pep_qn_local", "B0_SCALE", "PEP_B0_SCALE"]

B0_SCALE = 100.0
PEP_B0_SCALE = 0.01
CURVATURE_TOL = 1e-10
MIN_STEP = 1e-11      # |s| relative to 1 + |m| below which a pair is not used
SECANT_RTOL = 1e-7    # |g| relative to the gradients it differences (module docstring)


class BFGSState(NamedTuple):
    B: jnp.ndarray         # (D, D) negative-definite estimate of ∇²_m L̄
    mean: jnp.ndarray      # (D,) the mean at which the last gradient was taken
    started: jnp.ndarray   # () bool: a previous mean exists


def bfgs_init(scale=B0_SCALE):
    def init(num_data, num_latents):
        D = num_latents
        return BFGSState(jnp.broadcast_to(-scale * jnp.eye(D), (num_data, D, D)),
                         jnp.zeros((num_data, D)), jnp.zeros(num_data, dtype=bool))
    return init


def damped_bfgs(state: BFGSState, mean, grad_now, grad_prev, rho, xi):
    """One damped BFGS update from s = mean − state.mean, g = grad_now − grad_prev."""
    B = state.B
    s = mean - state.mean
    g = grad_now - grad_prev
    Bs = B @ s
    sBs = s @ Bs
    sg = s @ g
    denom = jnp.where(sBs - sg == 0, 1.0, sBs - sg)
    psi = jnp.where(sg <= (1 - xi) * sBs, 1.0, xi * sBs / denom)
    r = psi * g + (1 - psi) * Bs
    sr = s @ r
    informative = ((jnp.linalg.norm(s) > MIN_STEP * (1 + jnp.linalg.norm(mean)))
                   & (jnp.linalg.norm(g) > SECANT_RTOL * (jnp.linalg.norm(grad_now)
                                                      + jnp.linalg.norm(grad_prev))))
    curved = informative & (sr < -CURVATURE_TOL * jnp.linalg.norm(s) * jnp.linalg.norm(r))
    B_new = (B - jnp.outer(Bs, Bs) / jnp.where(sBs < 0, sBs, -1.0)
             + jnp.outer(r, r) / jnp.where(curved, sr, -1.0))
    accept = state.started & curved & (sBs < 0) & jnp.all(jnp.isfinite(B_new))
    return BFGSState(jnp.where(accept, sym((1 - rho) * B + rho * B_new), B), mean,
                     jnp.array(True))


def _gradient_in_mean(target):
    """``(inp, m, C) ↦ ∇_m target(inp, m, C)`` by autodiff."""
    return lambda inp, m, C: jax.grad(lambda m_: target(inp, m_, C))(m)


def _secant_local(gradient, xi, at_cavity=False, energy_gradient=None):
    """QN local update for a surrogate whose m-Hessian B tracks, given its gradient
    ``gradient(inp, m, C)`` = ∇_m target(inp, m, C).
    ``energy_gradient(derivatives, inp)``: ∇_m target at the current (m, C) from the
    derivatives the engine carries over from the energy pass of the step that produced
    these marginals (``Method.reuses_energy_pass``), so that only the secant's gradient
    at the previous mean costs a cubature pass of its own."""
    def local(inp: LocalInput):
        if at_cavity:
            Pc, C, m, ok = cavity(inp.mean, inp.cov, inp.nat1, inp.prec, inp.alpha,
                                  inp.residual, inp.share)
        else:
            C, m, ok = inp.cov, inp.mean, jnp.array(True)
        g_now = (gradient(inp, m, C) if inp.derivatives is None
                 else energy_gradient(inp.derivatives, inp))
        g_prev = jnp.where(inp.aux.started, gradient(inp, inp.aux.mean, C), g_now)
        aux = damped_bfgs(inp.aux, m, g_now, g_prev, inp.rho, xi)
        if not at_cavity:
            return LocalUpdate(g_now, aux.B, m, ok), aux
        R = Pc @ inv_small(inp.alpha * aux.B + Pc)
        J, H = R @ g_now, sym(R @ aux.B)
        ok = ok & jnp.all(jnp.isfinite(J)) & jnp.all(jnp.isfinite(H))
        return LocalUpdate(J, H, m, ok), aux
    return local


def laplace_qn_local(lik, rule, xi):
    log_lik = lambda inp, m, C: lik.log_prob(inp.lik_params, inp.y, m)  # noqa: E731
    return _secant_local(_gradient_in_mean(log_lik), xi)


def vi_qn_local(lik, rule, xi):
    """The ELBO's pass carries ∇_m E_q[log p] (CVI's J) at the current marginals; the
    previous mean's is the likelihood's ``expected_log_prob_mean_gradient``."""
    def gradient(inp, m, C):
        return lik.expected_log_prob_mean_gradient(inp.lik_params, inp.y, m,
                                                   C + inp.cond_var, rule)
    return _secant_local(gradient, xi, energy_gradient=lambda derivatives, inp: derivatives[0])


def pl2_qn_local(lik, rule, xi):
    target = lambda inp, m, C: pl2_target(lik, rule, inp, m, C)  # noqa: E731
    return _secant_local(_gradient_in_mean(target), xi)


def pep_qn_local(lik, rule, xi):
    """The PEP energy's pass carries ∇ log Z at the same cavity mean (Power EP's g). The
    secant's gradient at the previous mean is taken the same way (under a rule by the
    Gaussian identities, ``tilted_derivatives``): a gradient of another formula there
    would differ by the rule's error, which the secant would read as curvature."""
    return _secant_local(
        lambda inp, m, V: tilted_derivatives(lik, rule, inp, m, V)[1] / inp.alpha, xi,
        at_cavity=True, energy_gradient=lambda derivatives, inp: derivatives[0] / inp.alpha)
