"""Approximate log marginal likelihoods log p(y | θ) from sites and marginals.

All are written with *unnormalised* sites t_n(f) = exp(ν̄ᵀf − ½fᵀΛ̄f) and
log_norm = log ∫ p(f) Π t_n(f_n) df from the model's global update, so no site
covariance C̄ = Λ̄⁻¹ is ever formed (it does not exist when Λ̄ is singular).

- ``laplace``: Rasmussen & Williams eq. 3.32 / Alg. 3.2 (not BayesNewton's variant),
  log q(y) = Σ log p(y_n|m_n) − ½ mᵀK⁻¹m − ½ log|I + KΛ̄|, with K⁻¹m = ν̄ − Λ̄m.
- ``vfe``: the ELBO (Wilkinson et al. 2023 eq. 16),
  Σ E_q[log p(y_n|f_n)] − KL[q‖p] with KL = Σ E_q[log t_n] − log_norm.
- ``pep``: the Power-EP energy (eqs. 24–27),
  log_norm + Σ (1/α)(log E_{q\\n}[p^α] − log E_{q\\n}[t_n^α]),
  log E_{q\\n}[t_n^α] = ½(log|C_nn| + log|P\\| + m_nᵀC_nn⁻¹m_n − m\\ᵀP\\m\\) in closed form.
  At α = 1 with VI sites it is the EP-like objective of Li et al. (2023, eq. 11), and
  it is the energy reported for posterior linearisation (as in BayesNewton).

Sparse GPs (``posterior/sparse.py``) need no separate code: there m_n, C_nn are the
moments of the site variable W_n u, cond_var = K_nn − Q_nn is added inside every
likelihood expectation, and log_norm = log ∫ p(u) Π t_n(W_n u) du. Then ``vfe`` is
the SVGP bound (Hensman et al. 2015; KL[q(u)‖p(u)] = Σ E_q[log t_n] − log_norm);
``pep`` is Bui et al. (2017) eq. 8 / App. G, G(q) − G(p) + (1/α)Σ[log Z̃_n + G(q\\n)
− G(q)], because each site touches u only through W_n u so the cavity of u is fixed
by the cavity of the site variable; and the K⁻¹m identity of ``laplace`` still holds
with K_uu: m_uᵀK_uu⁻¹m_u = Σ_n m_nᵀ(ν̄_n − Λ̄_n m_n) and ½ log|I + K_uu WᵀΛ̄W| =
½ν̄ᵀm − log_norm, so it is the Laplace approximation of ∫ p(u) Π p(y_n|W_n u) du
(Wilkinson et al. 2023's point-estimate sparse Laplace energy). All three are
checked against independent formulas in tests/sparse_gp/test_sparse_model.py.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..methods.base import LocalInput
from ..methods.targets import (cavity, expected_log_lik_derivatives, log_tilted_normaliser,
                               tilted_derivatives)
from ..sites import Marginals, Sites, half_logdet, site_residual
from ..linalg.small_blocks import logdet_small

__all__ = ["laplace_energy", "variational_energy", "variational_energy_and_derivatives",
           "power_ep_energy", "power_ep_energy_and_derivatives", "energy",
           "energy_and_derivatives"]


def _site_inputs(lik_params, y, marg: Marginals, sites: Sites, alpha):
    return LocalInput(lik_params, y, marg.mean, marg.cov, marg.cond_var, sites.nat1,
                      sites.prec, alpha, jnp.asarray(1.0), (), None,
                      site_residual(marg, sites), marg.share)


def laplace_energy(lik, rule, lik_params, y, marg: Marginals, sites: Sites, alpha=1.0):
    m = marg.mean
    log_lik = jnp.sum(jax.vmap(lambda yn, mn: lik.log_prob(lik_params, yn, mn))(y, m))
    Kinv_m = site_residual(marg, sites)
    return log_lik - 0.5 * jnp.sum(m * Kinv_m) - half_logdet(marg, sites)


def _kl(marg: Marginals, sites: Sites):
    """KL[q‖p] = Σ E_q[log t_n] − log_norm
    = ½Σ m_nᵀr_n − ½Σ tr(Λ̄_n C_nn) + (½ν̄ᵀm − log_norm), r = ν̄ − Λ̄m
    (``site_residual``), the last bracket being ½ log|I + KΛ̄|. Expanded as
    Σ ν̄ᵀm − ½Σ Λ̄(C + mmᵀ) − log_norm it sums terms of the size of the site
    precisions (1e12 under Gaussian noise 1e-12) to get one of the size of log p(y)."""
    m, C = marg.mean, marg.cov
    return (0.5 * jnp.sum(m * site_residual(marg, sites))
            - 0.5 * jnp.sum(sites.prec * jnp.swapaxes(C, -1, -2)) + half_logdet(marg, sites))


def variational_energy(lik, rule, lik_params, y, marg: Marginals, sites: Sites, alpha=1.0):
    ell = jax.vmap(lambda yn, mn, Cn, cv: lik.expected_log_prob(lik_params, yn, mn, Cn + cv, rule))(
        y, marg.mean, marg.cov, marg.cond_var)
    return jnp.sum(ell) - _kl(marg, sites)


def variational_energy_and_derivatives(lik, rule, lik_params, y, marg: Marginals, sites: Sites,
                                       alpha=1.0):
    """The ELBO and, from the same cubature pass, each site's (∇_m, 2∇_C) of
    E_q[log p(y_n|f_n)] — the next CVI step's (J, H)."""
    ell, J, H = jax.vmap(lambda yn, mn, Cn, cv: expected_log_lik_derivatives(
        lik, rule, lik_params, yn, mn, Cn + cv))(y, marg.mean, marg.cov, marg.cond_var)
    return jnp.sum(ell) - _kl(marg, sites), (J, H)


def _pep_site_term(lik, rule, inp: LocalInput, with_derivatives=False):
    """The site's PEP energy term; with ``with_derivatives`` also (g, h) of log Z at the
    cavity mean, from the same cubature pass (the next PEP step's).

    With r = ν̄_n − Λ̄_n m_n and the cavity mean m\\ = m − αV\\r (``cavity``), the
    site's share ½ν̄ᵀm of log_norm and its log E[t^α]'s quadratic forms combine into
    ½ν̄ᵀm − (mᵀC⁻¹m − m\\ᵀP\\m\\)/(2α) = −½mᵀr + ½α rᵀV\\r, so the energy is
    Σ [(log Z − ½log|C| − ½log|P\\|)/α − ½mᵀr + ½α rᵀV\\r] − ½log|I + KΛ̄|: each
    quadratic form is of the energy's size, where mᵀC⁻¹m alone is of the site
    precision's (1e12 under Gaussian noise 1e-12) and nothing was left after the
    subtractions."""
    Pc, Vc, mc, ok = cavity(inp.mean, inp.cov, inp.nat1, inp.prec, inp.alpha, inp.residual,
                            inp.share)
    if with_derivatives:
        log_z, g, h = tilted_derivatives(lik, rule, inp, mc, Vc)
    else:
        log_z = log_tilted_normaliser(lik, rule, inp, mc, Vc)
    r = inp.residual
    # ½(log|C| + log|P\\|) = ½log|C P\\| = ½log|(1 − α)I + αS|, S = I − CΛ̄: finite where
    # the site variable is deterministic (C = 0: a sparse GP's inducing points far from
    # x_n, where log|C| = −∞ and log|P\\| = +∞ made the energy NaN)
    eye = jnp.eye(inp.cov.shape[-1])
    share = eye - inp.cov @ inp.prec if inp.share is None else inp.share
    log_dets = 0.5 * logdet_small((1.0 - inp.alpha) * eye + inp.alpha * share)
    quadratic = -0.5 * inp.mean @ r + 0.5 * inp.alpha * r @ Vc @ r
    term = jnp.where(ok, (log_z - log_dets) / inp.alpha + quadratic, jnp.nan)
    return (term, (g, h)) if with_derivatives else term


def _pep_terms(lik, rule, lik_params, y, marg, sites, alpha, with_derivatives):
    inp = _site_inputs(lik_params, y, marg, sites, alpha)
    axes = LocalInput(None, 0, 0, 0, 0, 0, 0, None, None, None, None, 0, 0)
    return jax.vmap(lambda i: _pep_site_term(lik, rule, i, with_derivatives), in_axes=(axes,))(inp)


def power_ep_energy(lik, rule, lik_params, y, marg: Marginals, sites: Sites, alpha=1.0):
    terms = _pep_terms(lik, rule, lik_params, y, marg, sites, alpha, False)
    return jnp.sum(terms) - half_logdet(marg, sites)


def power_ep_energy_and_derivatives(lik, rule, lik_params, y, marg: Marginals, sites: Sites,
                                    alpha=1.0):
    """The PEP energy and each site's (∇, ∇²) of log Z at its cavity mean — the next
    PEP step's (g, h) — from the same cubature pass."""
    terms, derivatives = _pep_terms(lik, rule, lik_params, y, marg, sites, alpha, True)
    return jnp.sum(terms) - half_logdet(marg, sites), derivatives


ENERGIES = {"laplace": laplace_energy, "vfe": variational_energy, "pep": power_ep_energy}


def energy(kind, lik, rule, lik_params, y, marg, sites, alpha):
    """The energy ``kind``; "ep" is the PEP energy at α = 1."""
    if kind == "ep":
        return power_ep_energy(lik, rule, lik_params, y, marg, sites, 1.0)
    return ENERGIES[kind](lik, rule, lik_params, y, marg, sites, alpha)


_WITH_DERIVATIVES = {"vfe": variational_energy_and_derivatives,
                     "pep": power_ep_energy_and_derivatives}


def energy_and_derivatives(kind, lik, rule, lik_params, y, marg, sites, alpha):
    """(energy, per-site derivatives) for the methods that reuse the energy's cubature
    pass in their next local update (``Method.reuses_energy_pass``): CVI's (J, H) with
    the ELBO, Power EP's (g, h) with the PEP energy."""
    return _WITH_DERIVATIVES[kind](lik, rule, lik_params, y, marg, sites, alpha)
