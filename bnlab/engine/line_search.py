"""A backtracking line search on Ψ(f) = log p(y|f) − ½ fᵀK⁻¹f for the methods whose
fixed point is Ψ's mode (the Laplace family, ``Method.line_search``), as Rasmussen &
Williams' Alg. 3.1 needs one: a Newton step on a likelihood whose curvature grows
without bound overshoots. Poisson counts y under N(0, 1): from f = 0 the step goes to
f ≈ y/2 (Ψ ≈ −e^{y/2}); the damped iteration then comes down about one unit of f per
step (counts of 1e3 were still at e^300 after 200 steps) or overflows (1e4).

The search runs along the line from the current mean m₀ to the proposal's m₁, keeping
the proposal's site precisions Λ̄₁: the sites (Λ̄₁, a + t(ν̄₁ − a)) with a = Λ̄₁m₀ + K⁻¹m₀
have the posterior mean m(t) = m₀ + t(m₁ − m₀), since (K⁻¹ + Λ̄₁)m₀ = a. For the
damped update of eq. (9) at ρ, ν̄₁ − a = ρ(J − K⁻¹m₀), so m₁ − m₀ = ρ C₁ ∇Ψ(m₀) with
J = ∇ log p(y|m₀) and C₁ = (K⁻¹ + Λ̄₁)⁻¹ PD: an ascent direction of Ψ, along which
Armijo's test accepts some t > 0. Everything on the line is linear in t — the mean,
K⁻¹m(t) = (1 − t)K⁻¹m₀ + tK⁻¹m₁ and ν̄(t) — so each trial costs O(N) and the global
update is not redone; log_norm(t) = ½ν̄(t)ᵀm(t) − ½log|I + KΛ̄₁| with the proposal's
log-determinant. Ψ is concave for a log-concave likelihood, so its mode is unique
and the iteration, monotone in Ψ, reaches it.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..sites import Marginals, Sites, half_logdet, site_residual
from . import batch_axis
from .state import ASCENT_SLACK

__all__ = ["Search", "search", "psi", "falls", "shortened", "ARMIJO",
           "MAX_HALVINGS"]

#: Armijo's sufficient-increase constant: Ψ(t) ≥ Ψ(0) + ARMIJO · t · Ψ'(0)
ARMIJO = 1e-4
#: halvings of t tried (2⁻¹⁰⁷⁴ is float64's smallest step: a count of 1e150 first
#: proposes f ≈ 3e149 where its mode is near 345, t ≈ 1e-147)
MAX_HALVINGS = 1100


def psi(lik, lik_params, y, mean, residual):
    """Ψ = Σ log p(y_n | m_n) − ½ Σ m_nᵀ r_n with r = K⁻¹m (``site_residual``; for a sparse
    GP Σ m_nᵀr_n = m_uᵀK_uu⁻¹m_u, ``bnlab.engine.energies``)."""
    log_lik = jax.vmap(lambda yn, mn: lik.log_prob(lik_params, yn, mn))(y, mean)
    return jnp.sum(log_lik) - 0.5 * jnp.sum(mean * residual)


def falls(psi_start, psi_proposed):
    """The proposal lowers Ψ beyond its rounding error, or Ψ is not finite there."""
    slack = ASCENT_SLACK * (1.0 + jnp.abs(psi_start))
    return ~(psi_proposed >= psi_start - slack)


def _on_line(start: Marginals, start_residual, sites: Sites, marg: Marginals, t):
    """(sites, marginals) at m(t) = m₀ + t(m₁ − m₀) with the proposal's precisions
    (module docstring); the covariances and PSD flag are the proposal's."""
    r1 = site_residual(marg, sites)
    anchor = jnp.einsum("nab,nb->na", sites.prec, start.mean) + start_residual
    nat1 = anchor + t * (sites.nat1 - anchor)
    mean = start.mean + t * (marg.mean - start.mean)
    residual = start_residual + t * (r1 - start_residual)
    log_norm = 0.5 * jnp.sum(nat1 * mean) - half_logdet(marg, sites)
    new = marg._replace(mean=mean, log_norm=log_norm,
                        residual=None if marg.residual is None else residual)
    return Sites(nat1, sites.prec), new, residual


def shortened(lik, lik_params, y, start: Marginals, start_sites: Sites, sites: Sites,
              marg: Marginals):
    """(sites, marginals, stalled): the proposal (``sites``, ``marg``) moved back along
    the line from ``start`` to the largest t = 2⁻ᵏ that passes Armijo's test, t =
    2^−``MAX_HALVINGS`` if none does. The direction m₁ − m₀ = ρC₁∇Ψ(m₀) ascends Ψ in
    exact arithmetic (C₁ PD), so where Ψ's computed slope along it is not positive, or
    no t passes, the step is rounding (of ∇Ψ = J − K⁻¹m₀, or of m₁ − m₀, a difference
    of two solves): ``stalled``, at Ψ's mode to float64's resolution (``search``)."""
    r0 = site_residual(start, start_sites)
    psi0 = psi(lik, lik_params, y, start.mean, r0)

    def psi_at(t):
        _, m, r = _on_line(start, r0, sites, marg, t)
        return psi(lik, lik_params, y, m.mean, r)

    slope = jax.jvp(psi_at, (jnp.asarray(0.0),), (jnp.asarray(1.0),))[1]

    def short(t):
        value = psi_at(t)
        return ~(value >= psi0 + ARMIJO * t * slope)

    def halve(carry):
        k, t = carry
        return k + 1, 0.5 * t

    k, t = jax.lax.while_loop(lambda c: (c[0] < MAX_HALVINGS) & short(c[1]), halve,
                              (jnp.asarray(0), jnp.asarray(1.0)))
    new_sites, new_marg, _ = _on_line(start, r0, sites, marg, t)
    return new_sites, new_marg, ~(slope > 0) | (k >= MAX_HALVINGS)


class Search(NamedTuple):
    """What the line search on Ψ found for one proposal (``search``)."""
    mixed_fell: jnp.ndarray    # a mixed proposal lowers Ψ: it is rejected
    settled: jnp.ndarray       # Ψ rose by less than the convergence test allows
    stalled: jnp.ndarray = False  # no step along the proposal's line raises Ψ: the
                               # iterate is Ψ's mode to float64 (``shortened``)


def search(lik, lik_params, y, settings, start: Marginals, start_sites: Sites, sites: Sites,
           marg: Marginals, extrapolated):
    """(sites, marginals, ``Search``) of a proposal at ρ_k (``settings``). Under the step
    control a plain step that lowers Ψ, or overflows it, is ``shortened``; a mixed
    (``extrapolated``) one that does is to be rejected (the next step is a plain one); a
    step that raises Ψ is the paper's damped step, unchanged. Such a run has converged
    only once Ψ has too: a step of ρ towards the mode of a quadratic raises Ψ by at
    least ρ times its remaining gap, so a rise above ρ_k·tol·(1 + |Ψ|) means the energy
    is further than tol (relative) from its limit. The site test alone does not say
    so where the curvature is large: Ψ's gap is about W δ²/2 for a mean δ off the mode,
    and at a Poisson count of 1e12 (W = 1e12) Laplace–Gauss–Newton stopped 0.43 nats
    short.

    A plain step that no t shortens into an ascent (``Search.stalled``) starts at Ψ's
    mode to float64's resolution, and the engine reads it as converged: under a large
    prior variance σ² the step C₁∇Ψ multiplies the rounding of ∇Ψ = J − K⁻¹m by up to
    σ² (probit Laplace, 30 points, σ² = 1e8: plain steps of 0.12 in a mean of 700,
    along which Ψ's computed slope was −4.6e-9, shortened to nothing at every
    iteration, with Ψ constant to 1e-12 at its mode, until the iteration cap)."""
    psi0 = psi(lik, lik_params, y, start.mean, site_residual(start, start_sites))
    psi1 = psi(lik, lik_params, y, marg.mean, site_residual(marg, sites))
    fell = settings.backtrack & falls(psi0, psi1)
    shorten = fell & ~extrapolated & marg.psd & jnp.all(jnp.isfinite(marg.mean))
    sites, marg, stalled = batch_axis.cond(
        shorten, lambda: shortened(lik, lik_params, y, start, start_sites, sites, marg),
        lambda: (sites, marg, jnp.asarray(False)))
    rise = psi(lik, lik_params, y, marg.mean, site_residual(marg, sites)) - psi0
    settled = ~(rise > settings.rho * settings.tol * (1.0 + jnp.abs(psi0)))
    return sites, marg, Search(fell & extrapolated, settled, stalled)
