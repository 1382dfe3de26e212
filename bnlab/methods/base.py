"""The protocol every site method follows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp

__all__ = ["LocalInput", "LocalUpdate", "Method", "Mixing"]


class LocalInput(NamedTuple):
    """Everything a method sees about one data point n (vmapped over n)."""
    lik_params: dict
    y: jnp.ndarray          # ()       the observation
    mean: jnp.ndarray       # (D,)     posterior marginal mean m_n
    cov: jnp.ndarray        # (D, D)   posterior marginal covariance of the site variable
    cond_var: jnp.ndarray   # (D, D)   extra variance of f_n given the site variable
                            #          (K_nn − Q_nn for sparse GPs, zero otherwise)
    nat1: jnp.ndarray       # (D,)     current site natural mean ν̄_n
    prec: jnp.ndarray       # (D, D)   current site precision Λ̄_n
    alpha: jnp.ndarray      # ()       Power-EP power (1 for non-PEP methods)
    rho: jnp.ndarray        # ()       damping / step size
    aux: Any                # per-site method state (BFGS matrices), or ()
    derivatives: Any = None  # (gradient (D,), Hessian (D, D)) of the method's per-site
                            # target at these marginals, carried over from the energy
                            # pass that produced them (``Method.reuses_energy_pass``)
    residual: Any = None    # (D,) ν̄_n − Λ̄_n m_n (``sites.site_residual``), for the cavity
    share: Any = None       # (D, D) I − C_nn Λ̄_n (``Marginals.share``), for the cavity


class LocalUpdate(NamedTuple):
    J: jnp.ndarray          # (D,)
    H: jnp.ndarray          # (D, D)
    mean: jnp.ndarray       # (D,) the mean in "J − H m": posterior, or cavity for PEP
    ok: jnp.ndarray         # () bool; False keeps the old site (e.g. non-PSD cavity)


class Mixing(NamedTuple):
    """How the engine may Anderson-mix a method's steps (``Settings.accelerate``,
    ``bnlab.engine.anderson``). ``guard`` is what a mixed step must pass: "objective" (it
    must not lower the ELBO, for the methods that ascend it) or "residual" (the plain
    step's relative change at the mixed iterate must not exceed the one at the current
    iterate, for methods that ascend nothing the engine evaluates)."""
    guard: str
    min_history: int = 1       # secant pairs (accepted steps since the history was last
                               # cleared) needed before a step is mixed
    damped_only: bool = False  # mix only when ρ < 1 (the undamped map is Newton's)
    depth: int = 5             # secant pairs kept (for EP and Laplace 3, 8, 10 or 20
                               # were no better)


def _no_aux(num_data, num_latents):
    return ()


@dataclass(frozen=True, eq=False)
class Method:
    """Everything the engine, the surfaces and the lab need to know about one site
    method, as fields: adding a method is one ``Method`` in the registry.

    ``make_local(likelihood, rule, **options)`` returns the per-site update, a function
    LocalInput → (LocalUpdate, new aux) that the engine vmaps over the data;
    ``options`` names the keyword options ``make_local`` takes (``qn_damping`` ξ)."""
    name: str
    energy: str                       # the energy it reports: "laplace" | "vfe" | "pep" | "ep"
    make_local: Callable[..., Callable[[LocalInput], tuple]]
    psd_guaranteed: bool              # every site precision PSD whatever the likelihood
    description: str = ""
    uses_alpha: bool = False          # α is a run-time setting (EP's is fixed at 1)
    mean_only: bool = False           # local updates and energy read only m_n, so the
                                      # global update may skip the marginal variances
    nonnegative_if_log_concave: bool = True   # site precisions ≥ 0 for a log-concave
                                      # likelihood with one latent (a cheaper, better
                                      # conditioned factorisation then applies)
    reuses_energy_pass: bool = False  # the local update differentiates the per-site
                                      # quantity the energy evaluates (E_q[log p] for VI,
                                      # log E_cavity[p^α] for PEP), so the engine takes
                                      # the derivatives from the energy pass
    ascends: str | None = None        # the energy its iteration increases for small
                                      # enough steps ("vfe": CVI is natural-gradient
                                      # ascent of the ELBO), which the step control
                                      # (``Settings.backtrack``) watches
    line_search: bool = False         # its J is ∇ log p(y|m) and its fixed point the
                                      # mode of Ψ = log p(y|f) − ½fᵀK⁻¹f: under the
                                      # step control a step that lowers Ψ is shortened
                                      # (``bnlab.engine.line_search``)
    mixing: Mixing | None = None      # how Anderson acceleration may mix its steps
    secant_cavity: bool = False       # its site precision −P\\B(αB + P\\)⁻¹ takes B from
                                      # secant pairs (pep_qn): float64 cannot resolve it
                                      # where the likelihood's curvature nearly cancels
                                      # the cavity's precision (``Likelihood.check_method``)
    init_aux: Callable[[int, int], Any] = _no_aux   # per-site method state (BFGS)
    options: tuple = ()               # keyword options ``make_local`` accepts
    iteration_of: str | None = None   # the method whose site iteration this one runs
                                      # unchanged, its sites scored by its own energy
                                      # ('ep_like': VI's, Li et al. 2023 eq. 11): a
                                      # surface may read both energies off one run
