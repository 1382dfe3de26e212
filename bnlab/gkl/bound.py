"""The Gaussian-KL bound (Challis & Barber 2013, eq. 7) and its site quantities.

    B_KL(m, S) = ½ log det(2πe S) − ½ log det(2πΣ) − ½(m−μ)ᵀΣ⁻¹(m−μ) − ½ tr(Σ⁻¹S)
                 + Σ_n ⟨log φ_n(m_n + z s_n)⟩_{N(z|0,1)},   m_n = mᵀh_n, s_n² = h_nᵀSh_n.

With m = μ + L m̃ (App. E) the quadratic is ½‖m̃‖²; the S terms come from the
structure (structures.py). Each site term is the likelihood's ``expected_log_prob``
of N(m_n, s_n²): closed form for Gaussian, Poisson and Laplace (App. B.2.1 — the
folded-normal mean, smooth in (m, s) although |·| is not), Gauss–Hermite of the
caller's order otherwise (the same rule ``bnlab.infer(method="vi")`` uses, so the
two objectives are identical). Gradients are by automatic differentiation through
these expressions — not the derivative-free forms ⟨z log φ⟩/s, ⟨(z²−1) log φ⟩/(2s²)
of App. B.2, which cancel catastrophically as s → 0 (notes D17).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .prior import GaussianPrior

__all__ = ["site_expectations", "site_precisions", "kl_bound"]


def _site_expectation(lik, lik_params, rule):
    """I(y, m, v) for one site: the likelihood's closed form where it has one, else its
    cubature rule in one dimension, f_k = m + √v x_k — the very sigma points (and so
    the very numbers) of ``bnlab.infer(method="vi")``."""
    return lambda y, m, v: lik.expected_log_prob(lik_params, y, m[None], v[None, None], rule)


def site_expectations(lik, lik_params, y, means, variances, rule):
    """I_n = E_{N(m_n, s_n²)}[log p(y_n | f)] for every site (N,)."""
    return jax.vmap(_site_expectation(lik, lik_params, rule))(y, means, variances)


def site_precisions(lik, lik_params, y, means, variances, rule):
    """Γ_n = −2 ∂I_n/∂s_n² — the stationarity condition of the bound in S gives
    S⁻¹ = Σ⁻¹ + Σ_n Γ_n h_n h_nᵀ. The paper's eq. (11) prints +∂I_n/∂s_n² (sign and
    factor 2 wrong, notes A5); this is the corrected form (the CVI site precision)."""
    one = _site_expectation(lik, lik_params, rule)
    return -2.0 * jax.vmap(jax.grad(one, argnums=2))(y, means, variances)


def kl_bound(vparams, prior: GaussianPrior, structure, aux, lik, lik_params, y, rule):
    """B_KL at the variational parameters {"mean": m̃, "cov": structure params}."""
    mean_white = vparams["mean"]
    half_logdet_S, trace, s2 = structure.terms(vparams["cov"], prior, aux)
    sites = site_expectations(lik, lik_params, y, prior.site_means(mean_white), s2, rule)
    return (0.5 * prior.dim + half_logdet_S - prior.half_logdet
            - 0.5 * mean_white @ mean_white - 0.5 * trace + jnp.sum(sites))
