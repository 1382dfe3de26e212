"""Damped-BFGS quasi-Newton site targets (Wilkinson et al. 2023, eqs. 47–57).

Each site keeps its own matrix B ≈ ∇²_m L̄ (D×D, negative definite) and its previous
mean. After each step, with s = m_k − m_{k−1} and a gradient difference g, Powell's
damping (eqs. 55–57, sign-adapted to a negative-definite B; the printed eq. 55 is
garbled) gives

    ψ = 1 if sᵀg ≤ (1 − ξ) sᵀBs, else ξ sᵀBs / (sᵀBs − sᵀg),
    r = ψ g + (1 − ψ) B s,
    B ← B − B s sᵀ B / sᵀBs + r rᵀ / sᵀr,

so sᵀr = (1 − ξ) sᵀBs < 0 and B stays negative definite: the site precision is PSD.
As in BayesNewton, B itself is damped by ρ.

**B₀ from the likelihood's curvature, not −100·I.** BayesNewton starts every B at
−100·I, a scale in f's units: wherever the true curvature is far from it (Gaussian
noise σ_n² = 1e-12 or 1e50 has curvature −1/σ_n²; y, σ² and σ_n² scaled together move
it by the square of y's scale) the secant pairs cannot repair it: Powell's damping
lets one pair shrink B by at most the factor ξ, ρ damps that again, the steps shrink
below what a pair may use long before, and the sites stop moving at a B that is not
the curvature. The QN forms then 'converged' to energies 10–2000 nats off (laplace_qn
at σ_n² = 1e-12: −3.24 where log p(y) = −6.01, after 2 iterations). B₀ is instead the
exact curvature of the same surrogate at the first step's marginals (the Hessian whose
gradient differences the pairs measure; for vi_qn and pep_qn the energy pass carries
it), made admissible (``_admissible_start``): the QN forms then start where their
exact-Newton counterparts are, are exact for a Gaussian likelihood at every scale, and
B's later values come from the pairs as before.

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
                  uses −B with the opposite sign). −RB is PSD only while −P\\ < αB ≤ 0, which
                  the tilted curvature h/α meets for log-concave likelihoods; elsewhere
                  B₀ is −0.01·P\\/α. Where αB + P\\ is a small share of P\\ (a cavity
                  variance large against the likelihood's noise) R needs B to more
                  digits than its secant holds: the likelihood refuses the method
                  there (``Likelihood.check_method``: Gaussian σ²/σ_n² > 1e4, probit
                  σ² > 20).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..linalg.small_blocks import chol_small, inv_small, sym
from .base import LocalInput, LocalUpdate
from .linearisation import pl2_target
from .targets import cavity, expected_log_lik_derivatives, tilted_derivatives

__all__ = ["BFGSState", "bfgs_init", "damped_bfgs", "laplace_qn_local", "vi_qn_local",
           "pl2_qn_local", "pep_qn_local", "B0_SCALE", "PEP_B0_SHARE"]

B0_SCALE = 100.0      # −B₀ where the start's curvature is 0 in every direction
B0_FLOOR = 1e-2       # −B₀'s eigenvalues are at least this share of its largest
PEP_B0_SHARE = 0.01   # pep_qn's αB₀ = −PEP_B0_SHARE·P\\ where h/α is not admissible
CURVATURE_TOL = 1e-10
MIN_STEP = 1e-11      # |s| relative to 1 + |m| below which a pair is not used
SECANT_RTOL = 1e-7    # |g| relative to the gradients it differences (module docstring)


class BFGSState(NamedTuple):
    B: jnp.ndarray         # (D, D) negative-definite estimate of ∇²_m L̄
    mean: jnp.ndarray      # (D,) the mean at which the last gradient was taken
    started: jnp.ndarray   # () bool: a previous mean exists (and B is B₀ or later)


def bfgs_init(num_data, num_latents):
    """Every site unstarted: the first local update replaces B by B₀ (module docstring)."""
    D = num_latents
    return BFGSState(jnp.broadcast_to(-B0_SCALE * jnp.eye(D), (num_data, D, D)),
                     jnp.zeros((num_data, D)), jnp.zeros(num_data, dtype=bool))


def _map_eigenvalues(H, fn):
    """Q fn(λ) Qᵀ for the symmetric block H = Q diag(λ) Qᵀ (D = 1: fn(H))."""
    if H.shape[-1] == 1:
        return fn(H)
    w, Q = jnp.linalg.eigh(sym(H))
    return (Q * fn(w)) @ Q.T


def _admissible_start(H):
    """B₀ from the surrogate's curvature H at the start: H's eigenvalues λ made
    negative as −|λ| (a direction of positive curvature, where a likelihood is not
    log-concave, keeps its scale), none below ``B0_FLOOR`` of the largest, so B₀ is
    negative definite; −``B0_SCALE``·I only where H is 0 or not finite (a likelihood
    flat to float64 there has no scale to offer)."""
    H = jnp.where(jnp.all(jnp.isfinite(H)), H, 0.0)

    def negative(w):
        top = jnp.max(jnp.abs(w))
        return jnp.where(top > 0, -jnp.maximum(jnp.abs(w), B0_FLOOR * top), -B0_SCALE)
    return _map_eigenvalues(H, negative)


def _admissible_pep_start(h, Pc, alpha):
    """pep_qn's B₀: h/α, h = ∇² log Z the tilted curvature, where −P\\ < h < 0 (whitened by
    the cavity precision P\\: R = P\\(αB + P\\)⁻¹ is then PD and −RB PSD), else
    −``PEP_B0_SHARE``·P\\/α in that direction (in every direction where h is not
    finite)."""
    h = jnp.where(jnp.all(jnp.isfinite(h)), h, -Pc)
    L = chol_small(Pc)
    Li = inv_small(L)

    def admissible(w):
        return jnp.where((w < 0) & (w > -1), w, -PEP_B0_SHARE)
    return L @ _map_eigenvalues(Li @ h @ Li.T, admissible) @ L.T / alpha


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


def _derivatives_in_mean(target):
    """``(inp, m, C) ↦ (∇_m, ∇²_m) target(inp, m, C)`` by autodiff."""
    def derivatives(inp, m, C):
        return (jax.grad(lambda m_: target(inp, m_, C))(m),
                jax.hessian(lambda m_: target(inp, m_, C))(m))
    return derivatives


def _secant_local(gradient, derivatives, xi, at_cavity=False, energy_derivatives=None):
    """QN local update for a surrogate whose m-Hessian B tracks, given its gradient
    ``gradient(inp, m, C)`` = ∇_m target(inp, m, C) and ``derivatives(inp, m, C)`` =
    (∇_m, ∇²_m) target, whose Hessian is B₀ at a site's first update (module
    docstring). ``energy_derivatives(derivatives, inp)``: the same two at the current
    (m, C) from what the engine carries over from the energy pass of the step that
    produced these marginals (``Method.reuses_energy_pass``), so that only the secant's
    gradient at the previous mean costs a cubature pass of its own."""
    def local(inp: LocalInput):
        if at_cavity:
            Pc, C, m, ok = cavity(inp.mean, inp.cov, inp.nat1, inp.prec, inp.alpha,
                                  inp.residual, inp.share)
        else:
            C, m, ok = inp.cov, inp.mean, jnp.array(True)
        g_now, curvature = (derivatives(inp, m, C) if inp.derivatives is None
                            else energy_derivatives(inp.derivatives, inp))
        start = (_admissible_pep_start(curvature * inp.alpha, Pc, inp.alpha) if at_cavity
                 else _admissible_start(curvature))
        state = inp.aux._replace(B=jnp.where(inp.aux.started, inp.aux.B, start))
        g_prev = jnp.where(state.started, gradient(inp, state.mean, C), g_now)
        aux = damped_bfgs(state, m, g_now, g_prev, inp.rho, xi)
        if not at_cavity:
            return LocalUpdate(g_now, aux.B, m, ok), aux
        R = Pc @ inv_small(inp.alpha * aux.B + Pc)
        J, H = R @ g_now, sym(R @ aux.B)
        ok = ok & jnp.all(jnp.isfinite(J)) & jnp.all(jnp.isfinite(H))
        return LocalUpdate(J, H, m, ok), aux
    return local


def laplace_qn_local(lik, rule, xi):
    log_lik = lambda inp, m, C: lik.log_prob(inp.lik_params, inp.y, m)  # noqa: E731
    return _secant_local(_gradient_in_mean(log_lik), _derivatives_in_mean(log_lik), xi)


def vi_qn_local(lik, rule, xi):
    """The ELBO's pass carries ∇_m E_q[log p] and CVI's curvature 2∇_C E_q[log p] (=
    ∇²_m by Price's theorem, up to the rule) at the current marginals; the previous
    mean's gradient is the likelihood's ``expected_log_prob_mean_gradient``."""
    def gradient(inp, m, C):
        return lik.expected_log_prob_mean_gradient(inp.lik_params, inp.y, m,
                                                   C + inp.cond_var, rule)

    def derivatives(inp, m, C):
        return expected_log_lik_derivatives(lik, rule, inp.lik_params, inp.y, m,
                                            C + inp.cond_var)[1:]
    return _secant_local(gradient, derivatives, xi,
                         energy_derivatives=lambda derivatives, inp: derivatives)


def pl2_qn_local(lik, rule, xi):
    target = lambda inp, m, C: pl2_target(lik, rule, inp, m, C)  # noqa: E731
    return _secant_local(_gradient_in_mean(target), _derivatives_in_mean(target), xi)


def pep_qn_local(lik, rule, xi):
    """The PEP energy's pass carries (∇, ∇²) log Z at the same cavity mean (Power EP's
    g, h). The secant's gradient at the previous mean is taken the same way (under a
    rule by the Gaussian identities, ``tilted_derivatives``): a gradient of another
    formula there would differ by the rule's error, which the secant would read as
    curvature."""
    def derivatives(inp, m, V):
        return tuple(d / inp.alpha for d in tilted_derivatives(lik, rule, inp, m, V)[1:])
    return _secant_local(
        lambda inp, m, V: derivatives(inp, m, V)[0], derivatives, xi, at_cavity=True,
        energy_derivatives=lambda carried, inp: tuple(d / inp.alpha for d in carried))
