"""Newton (Laplace), Gauss–Newton and Taylor/EKS site targets, evaluated at the
posterior mean m_n (Wilkinson et al. 2023, §3 and §5).

- ``laplace``:    J = ∇ log p(y_n|m_n), H = ∇² log p(y_n|m_n)               (eq. 8)
- ``laplace_gn``: J as Newton (exact gradient, so the fixed point is the MAP),
                  H = −GᵀG with G the Jacobian of the whitened residual
                  V = Σ(f)^{-½}(y − ν(f)) for Gaussian-form likelihoods (eqs. 34–38),
                  or G = Σ^{-½}∇ν for the generalised GN of eqs. 39–40.
- ``taylor``:     the iterated extended Kalman smoother: J = ∇νᵀΣ⁻¹(y − ν),
                  H = −∇νᵀΣ⁻¹∇ν at m_n (eq. 32).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .base import LocalInput, LocalUpdate

__all__ = ["grad_hess_log_prob", "gauss_newton_hessian", "laplace_local", "laplace_gn_local",
           "taylor_local"]


def grad_hess_log_prob(lik, lp, y, f):
    logp = lambda f_: lik.log_prob(lp, y, f_)
    return jax.grad(logp)(f), jax.hessian(logp)(f)


def gauss_newton_hessian(lik, lp, y, f):
    """−GᵀG at f. For Gaussian-form likelihoods the residual is whitened by Σ(f)^{-½}
    *including* its f-dependence (eq. 36); otherwise Σ is held fixed (eq. 40)."""
    def residual(f_):
        nu, S = lik.conditional_moments(lp, f_)
        sd = jnp.sqrt(S[0, 0])
        if not lik.gaussian_form:
            sd = jax.lax.stop_gradient(sd)
        return (y - nu) / sd
    G = jax.jacfwd(residual)(f)              # (1, D)
    return -G.T @ G


def laplace_local(lik, rule):
    def local(inp: LocalInput):
        J, H = grad_hess_log_prob(lik, inp.lik_params, inp.y, inp.mean)
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local


def laplace_gn_local(lik, rule):
    def local(inp: LocalInput):
        J, _ = grad_hess_log_prob(lik, inp.lik_params, inp.y, inp.mean)
        H = gauss_newton_hessian(lik, inp.lik_params, inp.y, inp.mean)
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local


def taylor_local(lik, rule):
    def local(inp: LocalInput):
        nu = lambda f_: lik.conditional_moments(inp.lik_params, f_)[0]
        mu, S = lik.conditional_moments(inp.lik_params, inp.mean)
        Jnu = jax.jacfwd(nu)(inp.mean)        # (1, D)
        Sinv = 1.0 / S[0, 0]
        J = Jnu.T[:, 0] * Sinv * (inp.y - mu[0])
        H = -Jnu.T @ Jnu * Sinv
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local
