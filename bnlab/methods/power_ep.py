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

from ..sites import min_eigenvalue
from ..linalg.small_blocks import inv_small, solve_small, sym
from .base import LocalInput, LocalUpdate

__all__ = ["cavity", "log_tilted_normaliser", "tilted_derivatives", "pep_local",
           "pep_from_derivatives"]


def cavity(mean, cov, nat1, prec, alpha):
    """Cavity precision P\\, natural mean, covariance, mean and a PD flag. Where the
    cavity is not PD the posterior marginal is substituted (so nothing downstream
    sees NaN) and ``ok`` is False."""
    P = inv_small(cov)
    Pc = sym(P - alpha * prec)
    hc = P @ mean - alpha * nat1
    ok = min_eigenvalue(Pc) > 0
    Pc_safe = jnp.where(ok, Pc, P)
    Vc = sym(inv_small(Pc_safe))
    mc = jnp.where(ok, Vc @ hc, mean)
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


def pep_from_derivatives(g, h, Pc, alpha):
    X = h + Pc
    hXinv = solve_small(X, h).T               # h X⁻¹ (X, h symmetric)
    J = (g - hXinv @ g) / alpha
    H = sym(h - hXinv @ h) / alpha
    return J, H


def pep_local(lik, rule):
    """(g, h) come from the PEP energy of the step that produced these marginals when
    the engine hands them over (``inp.derivatives``): that energy evaluates log Z at the
    same cavity, so one cubature pass serves both."""
    def local(inp: LocalInput):
        Pc, Vc, mc, ok = cavity(inp.mean, inp.cov, inp.nat1, inp.prec, inp.alpha)
        if inp.derivatives is None:
            _, g, h = tilted_derivatives(lik, rule, inp, mc, Vc)
        else:
            g, h = inp.derivatives
        J, H = pep_from_derivatives(g, h, Pc, inp.alpha)
        ok = ok & jnp.all(jnp.isfinite(J)) & jnp.all(jnp.isfinite(H))
        return LocalUpdate(J, H, mc, ok), inp.aux
    return local
