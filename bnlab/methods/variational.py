"""Natural-gradient VI (CVI) and variational Gauss–Newton site targets
(Wilkinson et al. 2023, eqs. 13–15 and 41–43).

The surrogate is L̄(m, C) = E_{N(m, C)}[log p(y_n|f)] (closed form where the
likelihood has one, Gauss–Hermite otherwise). J = ∇_m L̄ and H = ∇²_m L̄ are the
exact derivatives of that expression (Bonnet/Price: E[∇ log p], E[∇² log p]);
with ρ = 1 one step is one CVI step.

- ``vi``:    H = ∇²_m L̄
- ``vi_gn``: H = −E_q[GᵀG] with G the Gauss–Newton residual Jacobian at each sigma
  point (eq. 43) — PSD even with cubature error.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import cubature
from .base import LocalInput, LocalUpdate, value_grad_hessian
from .newton import gauss_newton_hessian

__all__ = ["expected_log_lik", "expected_log_lik_derivatives", "vi_local", "vi_gn_local"]


def expected_log_lik(lik, rule, inp: LocalInput, mean, cov):
    """L̄(m, C) for the site variable, with f_n = site variable + N(0, cond_var)."""
    return lik.expected_log_prob(inp.lik_params, inp.y, mean, cov + inp.cond_var, rule)


def expected_log_lik_derivatives(lik, rule, lik_params, y, mean, cov):
    """(L̄, ∇_m L̄, ∇²_m L̄) of L̄(m) = E_{N(m, cov)}[log p(y|f)] from one pass over the
    cubature nodes."""
    return value_grad_hessian(lambda m: lik.expected_log_prob(lik_params, y, m, cov, rule), mean)


def vi_local(lik, rule):
    """CVI's (J, H) = ∇L̄, ∇²L̄ at the current marginals. The engine hands them over
    from the ELBO evaluation that produced these marginals (``inp.derivatives``): the
    ELBO needs L̄ at the same (m, C), so one cubature pass serves both."""
    def local(inp: LocalInput):
        if inp.derivatives is None:
            _, J, H = expected_log_lik_derivatives(lik, rule, inp.lik_params, inp.y,
                                                   inp.mean, inp.cov + inp.cond_var)
        else:
            J, H = inp.derivatives
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local


def vi_gn_local(lik, rule):
    def local(inp: LocalInput):
        E = lambda m: expected_log_lik(lik, rule, inp, m, inp.cov)
        J = jax.grad(E)(inp.mean)
        H = cubature.expectation(
            lambda f: gauss_newton_hessian(lik, inp.lik_params, inp.y, f),
            rule, inp.mean, inp.cov + inp.cond_var)
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local
