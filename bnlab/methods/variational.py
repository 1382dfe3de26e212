"""Natural-gradient VI (CVI) and variational Gauss–Newton site targets
(Wilkinson et al. 2023, eqs. 13–15 and 41–43).

The surrogate is L̄(m, C) = E_{N(m, C)}[log p(y_n|f)] (closed form where the
likelihood has one, Gauss–Hermite otherwise). J = ∇_m L̄ and H = 2∇_C L̄ are the
exact derivatives of that expression (equal to E[∇ log p], E[∇² log p] by Bonnet and
Price for the exact expectation; see ``expected_log_lik_derivatives`` for why the
variance derivative, not ∇²_m, under a cubature); with ρ = 1 one step is one CVI step.

- ``vi``:    H = 2∇_C L̄
- ``vi_gn``: H = −E_q[GᵀG] with G the Gauss–Newton residual Jacobian at each sigma
  point (eq. 43) — PSD even with cubature error.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import cubature
from .base import LocalInput, LocalUpdate
from .newton import gauss_newton_hessian
from .targets import expected_log_lik, expected_log_lik_derivatives

__all__ = ["vi_local", "vi_gn_local"]


def vi_local(lik, rule):
    """CVI's (J, H) = (∇_m L̄, 2∇_C L̄) at the current marginals. The engine hands them over
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
    """J = ∇_m L̄ as CVI's (from the ELBO's pass when the engine hands it over), H the
    expected Gauss–Newton Hessian (eq. 43), which needs a cubature pass of its own."""
    def local(inp: LocalInput):
        if inp.derivatives is None:
            J = jax.grad(lambda m: expected_log_lik(lik, rule, inp, m, inp.cov))(inp.mean)
        else:
            J, _ = inp.derivatives
        H = cubature.expectation(
            lambda f: gauss_newton_hessian(lik, inp.lik_params, inp.y, f),
            rule, inp.mean, inp.cov + inp.cond_var)
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local
