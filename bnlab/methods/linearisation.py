"""Posterior linearisation (statistical linear regression) site targets
(Wilkinson et al. 2023, eqs. 28–31, 45, 46; García-Fernández et al. 2016/2019).

SLR of ν(f) = E[y|f] under q(f_n) = N(m, C):
    μ = E[ν],  Q = E[(f − m)(ν − μ)ᵀ],  S = E[(ν − μ)(ν − μ)ᵀ + Σ(f)],
    A = QᵀC⁻¹ (= ∇_m μ by Stein's lemma),  Ω = S − QᵀC⁻¹Q.

- ``pl``:     J = AᵀΩ⁻¹(y − μ), H = −AᵀΩ⁻¹A (Ω held fixed): the site is exactly the
              linearised Gaussian likelihood N(y | A f + b, Ω).
- ``pl2``:    L̄(m) = log N(y | μ(m), Ω(m)) differentiated *through* Ω (eq. 45), which
              heteroscedastic models need — for likelihoods of the Gaussian form of
              eq. 33 only (``pl2_target``).
- ``pl2_gn``: J = ∇L̄, H = −∇Dᵀ∇D with D = Ω^{-½}(y − μ) (eq. 46); equals ``pl`` for
              likelihoods whose Cov[y|f] does not vary with the mean.

PL has no energy of its own; like BayesNewton we report the EP (α = 1) energy.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ..linalg.small_blocks import inv_small
from .base import LocalInput, LocalUpdate

__all__ = ["slr", "pl_local", "pl2_target", "pl2_local", "pl2_gn_local"]

LOG2PI = math.log(2 * math.pi)      # (jnp.log would compile a program at import)


def slr(lik, rule, lp, mean, cov):
    """(μ (1,), A (1, D), Ω (1, 1)) of the statistical linear regression of ν(f): the
    likelihood's own where it does not depend on q (``Likelihood.exact_linearisation``:
    Gaussian noise), else from its moments (``Likelihood.slr_moments``: closed form
    for probit, else the rule)."""
    exact = lik.exact_linearisation(lp, mean)
    if exact is not None:
        return exact
    mu, Q, S = lik.slr_moments(lp, mean, cov, rule)
    Cinv = inv_small(cov)
    A = Q.T @ Cinv
    return mu, A, S - Q.T @ Cinv @ Q


def pl_local(lik, rule):
    def local(inp: LocalInput):
        mu, A, Om = slr(lik, rule, inp.lik_params, inp.mean, inp.cov + inp.cond_var)
        Oinv = 1.0 / Om[0, 0]
        J = A[0] * Oinv * (inp.y - mu[0])
        H = -A.T @ A * Oinv
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local


def pl2_target(lik, rule, inp: LocalInput, mean, cov):
    """L̄ = log N(y | μ(m, C), Ω(m, C)) as a function of the marginal moments, for a
    likelihood of the Gaussian form of eq. 33 (``Likelihood.gaussian_form``).

    For any other likelihood N(y | μ, Ω) is not the density of y, and with Ω's
    gradient and normaliser kept it has no maximum: for a Bernoulli likelihood
    Ω → 0 as |m| grows on the side of the label (Var[y|f] = 1 − ν(f)² vanishes, and
    (y − μ)²/Ω with it), so −½ log Ω → ∞ and every site's mean is pushed out to
    infinity — pl2, pl2_qn and pl2_riemann diverged on probit data with |f| ≈ 30
    (Poisson counts of 0 have the same defect as the rate → 0). There, as the paper
    does for the Gauss–Newton form (§5.3: "the normaliser Z_n and the gradients of
    Ω are ignored") and for quasi-Newton PL (§6.4, eq. 54: "the gradient of Ω is
    assumed to be zero", the normaliser included only "if appropriate"), Ω is held
    fixed and log Z dropped: L̄ = −½ (y − μ(m, C))²/Ω, whose gradient is PL's J."""
    mu, _, Om = slr(lik, rule, inp.lik_params, mean, cov + inp.cond_var)
    if not lik.gaussian_form:
        return -0.5 * (inp.y - mu[0]) ** 2 / jax.lax.stop_gradient(Om[0, 0])
    return -0.5 * (LOG2PI + jnp.log(Om[0, 0]) + (inp.y - mu[0]) ** 2 / Om[0, 0])


def pl2_local(lik, rule):
    def local(inp: LocalInput):
        L = lambda m: pl2_target(lik, rule, inp, m, inp.cov)
        J, H = jax.grad(L)(inp.mean), jax.hessian(L)(inp.mean)
        return LocalUpdate(J, H, inp.mean, jnp.array(True)), inp.aux
    return local


def pl2_gn_local(lik, rule):
    """For likelihoods that are not of Gaussian form (discrete ones) Ω is held fixed
    and log Z dropped, so PL2-GN reduces exactly to PL (Wilkinson et al. 2023, eqs. 45–46)."""
    def local(inp: LocalInput):
        def whitened(m):
            mu, _, Om = slr(lik, rule, inp.lik_params, m, inp.cov + inp.cond_var)
            if not lik.gaussian_form:
                Om = jax.lax.stop_gradient(Om)
            return (inp.y - mu) / jnp.sqrt(Om[0, 0]), Om[0, 0]

        def surrogate(m):
            D, om = whitened(m)
            log_z = -0.5 * jnp.log(om) if lik.gaussian_form else 0.0
            return log_z - 0.5 * jnp.sum(D**2)
        G = jax.jacfwd(lambda m: whitened(m)[0])(inp.mean)      # (1, D)
        J = jax.grad(surrogate)(inp.mean)
        return LocalUpdate(J, -G.T @ G, inp.mean, jnp.array(True)), inp.aux
    return local
