"""Gaussian sites in natural-parameter form, the shared damped update, PSD checks.

A site is the unnormalised Gaussian factor t_n(f_n) = exp(ν̄_nᵀ f_n − ½ f_nᵀ Λ̄_n f_n)
on the D latent values at input n (Wilkinson et al. 2023, eqs. 2–4). We store the
natural mean ν̄ = λ̄⁽¹⁾ and the *precision* Λ̄ = −2 λ̄⁽²⁾ (not λ̄⁽²⁾ itself), so that

- the posterior is q(f) ∝ N(f | μ, K) Π_n t_n(f_n), i.e. precision K⁻¹ + Λ̄;
- the damped Newton update of eq. (9) reads, with step ρ,
      Λ̄ ← (1 − ρ) Λ̄ + ρ (−H),      ν̄ ← (1 − ρ) ν̄ + ρ (J − H m),
  where m is the posterior mean (the cavity mean for Power EP);
- negative site precisions are legitimate (EP, Newton on non-log-concave
  likelihoods); only a non-PSD *posterior* or *cavity* is a failure, and it is
  recorded, never hidden (Wilkinson et al. 2023, §4.5).

Sites are initialised flat-ish: ν̄ = 0, Λ̄ = 0.01·I (BayesNewton's C̄ = 100 I).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

__all__ = ["Sites", "Marginals", "site_residual", "half_logdet", "init_sites",
           "initial_precision", "damped_update",
           "heuristic_psd", "min_eigenvalue", "max_relative_change"]

INITIAL_SITE_PRECISION = 0.01
#: above this prior variance σ² a cold start's site precision is
#: ``INITIAL_SITE_PRECISION``·(this / σ²) (``initial_precision``)
INITIAL_PRECISION_PRIOR_LIMIT = 1e20
#: prior variances up to this size compare site changes to a floor of 1; above it the
#: floor scales as 1/σ² (``max_relative_change``). Not lower: a smaller floor asks for
#: site changes finer than the ELBO resolves, and VI's step control, which rejects a
#: step that lowers the ELBO, then stalls short of the test (at σ² = 400, floor 0.25)
PRIOR_SCALE = 1e4


class Sites(NamedTuple):
    nat1: jnp.ndarray   # (N, D)      ν̄ = Λ̄ m̄
    prec: jnp.ndarray   # (N, D, D)   Λ̄ = C̄⁻¹


class Marginals(NamedTuple):
    """What a model returns from prior × sites (full, sparse and Markov alike)."""
    mean: jnp.ndarray      # (N, D)     posterior marginal means m_n
    cov: jnp.ndarray       # (N, D, D)  posterior marginal covariances C_nn
    log_norm: jnp.ndarray  # ()  log ∫ p(f) Π t_n(f_n) df with the unnormalised sites
    psd: jnp.ndarray       # ()  bool: the posterior covariance is positive definite
    cond_var: jnp.ndarray  # (N, D, D) variance of f_n beyond the site variable:
                           #  K_nn − Q_nn for sparse GPs, zeros for full and Markov GPs.
                           #  Likelihood expectations use cov + cond_var; cavities and
                           #  site algebra use cov.
    residual: jnp.ndarray = None  # (N, D) ν̄_n − Λ̄_n m_n (= [K⁻¹m]_n for a full GP) where
                           #  the model computes it without that subtraction, else None
                           #  (``site_residual``)
    share: jnp.ndarray = None  # (N, D, D) I − C_nn Λ̄_n = C_nn P\\n (P\\n the cavity
                           #  precision at α = 1) where the model computes it directly
                           #  ([B⁻¹]_nn of the W½ form), else None (see ``cavity``)
    half_logdet: jnp.ndarray = None  # () ½ log|I + KΛ̄| from the model's own factor, or
                           #  None (``half_logdet``)


def site_residual(marg: Marginals, sites: Sites):
    """ν̄_n − Λ̄_n m_n, the prior-precision-weighted mean (K⁻¹m for a full GP, since
    m = (K⁻¹ + Λ̄)⁻¹ν̄), that the Laplace and variational energies and every cavity
    need. Subtracting Λ̄_n m_n from ν̄_n loses log₁₀(Λ̄_n|m_n| / |residual|) digits:
    with Gaussian noise 1e-12 the sites' precisions are 1e12 and nothing is left, so a
    model that has the residual from its own solve hands it over in ``marg.residual``."""
    if marg.residual is not None:
        return marg.residual
    return sites.nat1 - jnp.einsum("nab,nb->na", sites.prec, marg.mean)


def half_logdet(marg: Marginals, sites: Sites):
    """½ log|I + KΛ̄| = ½ν̄ᵀm − log_norm, which every energy needs. The difference
    cancels: its terms are of size Λ̄m², 1e150·345² for a Poisson count of 1e150 or
    1e300·y² under Gaussian noise 1e-300, where the log-determinant is a few hundred,
    so a model that has it from its factor hands it over in ``marg.half_logdet``."""
    if marg.half_logdet is not None:
        return marg.half_logdet
    return 0.5 * jnp.sum(sites.nat1 * marg.mean) - marg.log_norm


def init_sites(num_data: int, num_latents: int, precision=INITIAL_SITE_PRECISION,
               xp=jnp) -> Sites:
    """ν̄ = 0, Λ̄ = ``precision``·I (a cold start's: ``initial_precision``, above the
    prior's scale 1/σ². Started at the prior's scale instead, EP's sites oscillated
    without end where the classes overlap at σ² ≥ 1e6, and VI's step control could not
    damp its first step; from above they come down to that scale, judged there by
    ``max_relative_change``.) ``xp=np`` builds them on the host (outside a trace each
    jnp operation compiles a program of its own: a cold surface's first sites took
    ten)."""
    return Sites(xp.zeros((num_data, num_latents)),
                 xp.broadcast_to(precision * xp.eye(num_latents),
                                 (num_data, num_latents, num_latents)))


def initial_precision(prior_variance):
    """A cold start's site precision for a likelihood without its own: 0.01, and beyond
    a prior variance σ² of ``INITIAL_PRECISION_PRIOR_LIMIT`` that times limit/σ². Damped
    sites come down to the prior's scale 1/σ² about ×2 per step, so from 0.01 they
    need log₂(0.01σ²) steps: 326 at σ² = 1e100, past the default cap of 200 (probit EP
    stopped there at −51.9 where log p(y) = −7.12). Capped at 60 halvings (1e18),
    ordinary variances keep their starts. Traceable (``prior_variance`` may be traced)."""
    return INITIAL_SITE_PRECISION * jnp.minimum(1.0, INITIAL_PRECISION_PRIOR_LIMIT
                                                / prior_variance)


def damped_update(sites: Sites, J, H, mean, rho) -> Sites:
    """Eq. (9) in precision form: new site precision −H, natural mean J − H m."""
    new_prec = -H
    new_nat1 = J - jnp.einsum("nab,nb->na", H, mean)
    prec = (1 - rho) * sites.prec + rho * new_prec
    return Sites((1 - rho) * sites.nat1 + rho * new_nat1, 0.5 * (prec + jnp.swapaxes(prec, -1, -2)))


def heuristic_psd(prec, floor=0.01):
    """The heuristic PSD fix of §4.5.1: drop off-diagonals, replace negative diagonal
    entries by ``floor``. Acts on a site precision −H of shape (N, D, D)."""
    d = jnp.diagonal(prec, axis1=-2, axis2=-1)
    d = jnp.where(d < 0, floor, d)
    return d[..., :, None] * jnp.eye(prec.shape[-1])


def min_eigenvalue(mats):
    """Smallest eigenvalue of each symmetric (…, D, D) block (D is 1 or 2: closed form)."""
    D = mats.shape[-1]
    if D == 1:
        return mats[..., 0, 0]
    if D == 2:
        a, b, c = mats[..., 0, 0], mats[..., 0, 1], mats[..., 1, 1]
        return 0.5 * (a + c) - jnp.sqrt(0.25 * (a - c) ** 2 + b**2)
    return jnp.linalg.eigvalsh(mats)[..., 0]


def max_relative_change(old: Sites, new: Sites, prior_variance):
    """max over all site parameters of |new − old| / (floor + |old|): the convergence test.

    The floor is 1 where the prior variance σ²ᵢ at the site's input (``prior_variance``,
    (N, D)) is at most ``PRIOR_SCALE``, and ``PRIOR_SCALE``/σ²ᵢ above, so a change
    is measured against the prior's own precision: under a prior of variance 1e20 every
    site that matters has a precision near 1e-20, far below a floor of 1, and Power EP's
    sites halving at every step read as converged at once (probit EP at σ² = 1e20 stopped
    at −34.0 where the evidence is −10.7)."""
    floor = jnp.minimum(1.0, PRIOR_SCALE / prior_variance)
    d1 = jnp.max(jnp.abs(new.nat1 - old.nat1) / (floor + jnp.abs(old.nat1)))
    d2 = jnp.max(jnp.abs(new.prec - old.prec) / (floor[..., :, None] + jnp.abs(old.prec)))
    return jnp.maximum(d1, d2)
