"""The protocol every site method follows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp

__all__ = ["LocalInput", "LocalUpdate", "Method"]


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


class LocalUpdate(NamedTuple):
    J: jnp.ndarray          # (D,)
    H: jnp.ndarray          # (D, D)
    mean: jnp.ndarray       # (D,) the mean in "J − H m": posterior, or cavity for PEP
    ok: jnp.ndarray         # () bool; False keeps the old site (e.g. non-PSD cavity)


@dataclass(frozen=True, eq=False)
class Method:
    """A site method. ``local`` maps a LocalInput to (LocalUpdate, new aux)."""
    name: str
    energy: str                       # "laplace" | "vfe" | "pep"
    local: Callable[[LocalInput], tuple]
    psd_guaranteed: bool
    uses_alpha: bool = False
    init_aux: Callable[[int, int], Any] = lambda n, d: ()
    description: str = ""
    uses_covariance: bool = True      # False: local updates and energy need only m_n
    reuses_energy_pass: bool = False  # True: the local update differentiates the same
                                      # per-site quantity the energy evaluates (E_q[log p]
                                      # for VI, log E_cavity[p^α] for PEP), so the engine
                                      # computes the derivatives in the energy pass
    ascends: str | None = None        # the energy its iteration increases for small
                                      # enough steps ("vfe": CVI is natural-gradient
                                      # ascent of the ELBO), which the engine's step
                                      # control (``Settings.backtrack``) watches; the
                                      # energy pass of a method that reuses it is this one
