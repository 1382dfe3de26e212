"""The per-site targets that both the local updates (``methods/``) and the energies
(``engine/energies.py``) evaluate, so that a method's step and its energy differentiate
the same quantity:

- variational: L̄(m, C) = E_{N(m, C)}[log p(y_n|f)] and its derivatives (Wilkinson et al.
  2023, eqs. 13–16);
- Power EP: the cavity q\\n ∝ q(f_n)/t_n^α and log Z = log E_{q\\n}[p(y_n|f)^α] with its
  derivatives at the cavity mean (eqs. 20–27).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..linalg.small_blocks import inv_small, sym
from ..sites import min_eigenvalue
from .base import LocalInput

__all__ = ["expected_log_lik", "expected_log_lik_derivatives", "cavity",
           "log_tilted_normaliser", "tilted_derivatives"]


def expected_log_lik(lik, rule, inp: LocalInput, mean, cov):
    """L̄(m, C) for the site variable, with f_n = site variable + N(0, cond_var)."""
    return lik.expected_log_prob(inp.lik_params, inp.y, mean, cov + inp.cond_var, rule)


def expected_log_lik_derivatives(lik, rule, lik_params, y, mean, cov):
    """(L̄, ∇_m L̄, 2∇_C L̄) of L̄(m, C) = E_{N(m, C)}[log p(y|f)] as the cubature
    computes it, in one reverse pass.

    CVI's site precision is −2∇_C L̄ (the gradient in the mean parameter E[ffᵀ]; Khan &
    Lin 2017). Wilkinson et al. (2023, eq. 15) write it as −∇²_m L̄, which Price's
    theorem makes equal for the exact expectation, but not for a cubature: under a wide
    q (a large prior variance) the ∇²_m fixed point is not a stationary point of the
    cubature's ELBO, which the engine reports, and sits well below its maximum (G-KL's
    optimum with the same rule; benchmarks/README.md, "Accuracy behind the code").
    With the variance derivative CVI is exactly natural-gradient ascent of that ELBO:
    its fixed point is the ELBO's stationary point, G-KL's full-covariance optimum, at
    every variance; and
    for a log-concave likelihood H ≤ 0 still holds under any symmetric rule (g'
    decreasing makes Σ w_k g'(m + √C x_k) x_k ≤ 0). We follow the variance derivative."""
    value, (grad_m, grad_C) = jax.value_and_grad(
        lambda m, C: lik.expected_log_prob(lik_params, y, m, C, rule), argnums=(0, 1))(mean, cov)
    return value, grad_m, grad_C + grad_C.T


def cavity(mean, cov, nat1, prec, alpha, residual=None, share=None):
    """Cavity precision P\\, covariance, mean and a PD flag. Where the cavity is not PD
    the posterior marginal is substituted (so nothing downstream sees NaN) and ``ok``
    is False.

    The cavity mean is m − α V\\ r with r = ν̄ − Λ̄m (``residual``; from the sites
    when None), the same as V\\(C⁻¹m − αν̄) since P\\ = C⁻¹ − αΛ̄: C⁻¹m and αν̄ are
    each of the size of the site precision times the mean, 1e12 under Gaussian noise
    1e-12, while their difference is of the cavity's size, so subtracting them left
    no digit; a model that solves for r directly (``Marginals.residual``) keeps them.

    The cavity precision C⁻¹ − αΛ̄ = C⁻¹((1 − α)I + α S) with S = I − CΛ̄ (``share``)
    likewise: where the site dominates the prior (Λ̄ = 0.01 against a prior variance
    of 1e20, or Λ̄ = 1e12 from Gaussian noise 1e-12) C⁻¹ and Λ̄ agree to every digit and
    the difference was 0, a cavity that is not PD; the W½ form has S = [B⁻¹]_nn
    from its own factor, without the subtraction."""
    P = inv_small(cov)
    if share is None:
        Pc = sym(P - alpha * prec)
    else:
        Pc = sym(P @ ((1.0 - alpha) * jnp.eye(P.shape[-1]) + alpha * share))
    if residual is None:
        residual = nat1 - prec @ mean
    ok = min_eigenvalue(Pc) > 0
    Pc_safe = jnp.where(ok, Pc, P)
    Vc = sym(inv_small(Pc_safe))
    mc = jnp.where(ok, mean - alpha * (Vc @ residual), mean)
    return Pc_safe, Vc, mc, ok


def log_tilted_normaliser(lik, rule, inp: LocalInput, mc, Vc):
    """log E_{N(mc, Vc + cond_var)}[p(y_n | f)^α]. EP and the EP energies pass α as the
    Python number 1.0 (``Engine._alpha``), so a likelihood's closed form for α = 1
    (probit: R&W eq. 3.82) is chosen at trace time."""
    return lik.log_expected_power(inp.lik_params, inp.y, mc, Vc + inp.cond_var, inp.alpha, rule)


def tilted_derivatives(lik, rule, inp: LocalInput, mc, Vc):
    """(log Z, g, h) at the cavity mean from one pass over the cubature nodes (under a
    rule by the Gaussian identities, as BayesNewton's ``moment_match_cubature``:
    ``Likelihood.log_expected_power_derivatives``)."""
    return lik.log_expected_power_derivatives(inp.lik_params, inp.y, mc, Vc + inp.cond_var,
                                              inp.alpha, rule)
