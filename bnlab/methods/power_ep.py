"""Power EP site targets (Wilkinson et al. 2023, eqs. 20–22 and App. C).

Cavity: q\\n ∝ q(f_n) / t_n^α, i.e. precision P\\ = C_nn⁻¹ − αΛ̄_n and natural mean
C_nn⁻¹m_n − αν̄_n. With log Z(m\\) = log E_{q\\}[p(y_n|f)^α] (log-sum-exp cubature or a
closed form), g = ∇ log Z and h = ∇² log Z at the cavity mean,

    J = (g − h X⁻¹ g)/α,    H = (h − h X⁻¹ h)/α,    X = h + P\\,

which is R g/α and R h/α with R = P\\(h + P\\)⁻¹ written symmetrically (the printed
eq. 21 repeats a "−∇²…m\\" term: a typo; we follow App. C). In the site update the
cavity mean replaces m. With α = 1 this is moment matching (EP); as α → 0, R → I and
the step equals a VI step (Remark 4).

A cavity that is not positive definite cannot be tilted: that site keeps its old
value and the iteration is flagged (P\\ = C_nn⁻¹ − αΛ̄_n is indefinite once αΛ̄_n exceeds
C_nn⁻¹ along some direction).
"""
from __future__ import annotations

import jax.numpy as jnp

from ..linalg.small_blocks import solve_small, sym
from .base import LocalInput, LocalUpdate
from .targets import cavity, tilted_derivatives

__all__ = ["pep_local", "pep_from_derivatives"]


def pep_from_derivatives(g, h, Pc, alpha):
    X = h + Pc
    hXinv = solve_small(X, h).T               # h X⁻¹ (X, h symmetric)
    J = (g - hXinv @ g) / alpha
    H = sym(h - hXinv @ h) / alpha
    return J, H


def pep_local(lik, rule):
    """(g, h) come from the PEP energy of the step that produced these marginals when
    the engine hands them over (``inp.derivatives``): that energy evaluates log Z at the
    same cavity, so one cubature pass serves both. A likelihood that knows the site in
    closed form (``Likelihood.power_ep_site``: the Gaussian) gives (J, H) directly."""
    def local(inp: LocalInput):
        Pc, Vc, mc, ok = cavity(inp.mean, inp.cov, inp.nat1, inp.prec, inp.alpha,
                                inp.residual, inp.share)
        exact = lik.power_ep_site(inp.lik_params, inp.y, mc, inp.cond_var, inp.alpha)
        if exact is not None:
            J, H = exact
            return LocalUpdate(J, H, mc, ok & jnp.all(jnp.isfinite(J))), inp.aux
        if inp.derivatives is None:
            _, g, h = tilted_derivatives(lik, rule, inp, mc, Vc)
        else:
            g, h = inp.derivatives
        J, H = pep_from_derivatives(g, h, Pc, inp.alpha)
        ok = ok & jnp.all(jnp.isfinite(J)) & jnp.all(jnp.isfinite(H))
        return LocalUpdate(J, H, mc, ok), inp.aux
    return local
