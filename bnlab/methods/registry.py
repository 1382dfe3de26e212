"""Method names → site methods (DESIGN.md's list), with clear errors for the
combinations that do not exist."""
from __future__ import annotations

from typing import NamedTuple

from ..anderson import DEPTH
from .base import Method
from .linearisation import pl2_gn_local, pl2_local, pl_local
from .newton import laplace_gn_local, laplace_local, taylor_local
from .power_ep import pep_local
from .quasi_newton import (B0_SCALE, PEP_B0_SCALE, bfgs_init, laplace_qn_local, pep_qn_local,
                           pl2_qn_local, vi_qn_local)
from .riemannian import heuristic, riemannian
from .variational import vi_gn_local, vi_local

__all__ = ["METHOD_NAMES", "SITE_METHODS", "build_method", "HEURISTIC_BASES", "MEAN_ONLY"]

# name: (energy, psd_guaranteed, uses_alpha, description); psd_guaranteed: every
# iterate's posterior and cavities are PD in exact arithmetic for any data and ρ (the
# README's column; the methods that are so only for log-concave likelihoods are in
# NONNEGATIVE_SITES_IF_LOG_CONCAVE); uses_alpha: α is a run-time setting (EP's α is
# fixed at 1, so it is not, and takes the closed forms for α = 1)
SITE_METHODS = {
    "laplace": ("laplace", False, False, "Newton on log p(y|f) at the mean (Laplace)"),
    "laplace_gn": ("laplace", True, False, "Laplace with a Gauss–Newton Hessian"),
    "laplace_qn": ("laplace", True, False, "Laplace with damped-BFGS Hessians"),
    "laplace_riemann": ("laplace", True, False, "Laplace with the Riemannian PSD correction"),
    "taylor": ("laplace", True, False, "Taylor linearisation (iterated EKS)"),
    "vi": ("vfe", False, False, "natural-gradient variational inference (CVI)"),
    "vi_gn": ("vfe", True, False, "variational Gauss–Newton"),
    "vi_qn": ("vfe", True, False, "variational quasi-Newton (damped BFGS)"),
    "vi_riemann": ("vfe", True, False, "VI with the Riemannian PSD correction"),
    "ep": ("pep", False, False, "expectation propagation (Power EP with α = 1)"),
    "pep": ("pep", False, True, "Power EP with power α"),
    "pep_qn": ("pep", False, True, "Power EP with damped-BFGS tilted Hessians"),
    "pep_riemann": ("pep", True, True, "Power EP with the Riemannian PSD correction"),
    "pl": ("ep", True, False, "posterior linearisation (SLR)"),
    "pl2": ("ep", False, False, "second-order posterior linearisation"),
    "pl2_gn": ("ep", True, False, "second-order PL with a Gauss–Newton Hessian"),
    "pl2_qn": ("ep", True, False, "second-order PL with damped-BFGS Hessians"),
    "pl2_riemann": ("ep", True, False, "second-order PL with the Riemannian PSD correction"),
    "heuristic": (None, True, False, "a base method with the heuristic diagonal PSD fix"),
    "ep_like": ("ep", False, False, "VI sites scored by the EP energy (Li et al. 2023)"),
}
METHOD_NAMES = tuple(SITE_METHODS) + ("gkl",)
#: Methods whose site precisions stay ≥ 0 for a log-concave likelihood with one latent:
#: −H is −∇² log p, E[−∇² log p], GᵀG, AᵀΩ⁻¹A, a negative-definite BFGS matrix, the
#: heuristic diagonal, EP moment matching (tilted variance ≤ cavity variance) or the
#: PD-preserving Riemannian step. Not pl2 (∇Ω terms) nor pep_qn (paper-sign R).
NONNEGATIVE_SITES_IF_LOG_CONCAVE = frozenset(SITE_METHODS) - {"pl2", "pep_qn"}
HEURISTIC_BASES = ("laplace", "vi", "pep", "pl2")
#: Methods evaluated at the posterior mean only (their J, H and the Laplace energy never
#: read C_nn), so the global update may skip the marginal variances.
MEAN_ONLY = frozenset({"laplace", "laplace_gn", "laplace_qn", "laplace_riemann", "taylor"})
#: Methods whose local update differentiates what an energy they evaluate at the same
#: state differentiates — E_q[log p(y_n|f_n)] (VI and 'ep_like': the ELBO) or
#: log E_cavity[p^α] (PEP and EP: the PEP energy): the engine takes the derivatives from
#: the energy pass of the previous step (their Riemannian and heuristic forms inherit
#: this). 'ep_like' reports the EP energy but evaluates the ELBO too, for its step
#: control (``ASCENDS_ELBO``), and that pass gives its CVI derivatives. 'vi_gn' takes
#: its J = ∇_m L̄ from the ELBO's pass (its Gauss–Newton H needs a pass of its own), and
#: 'vi_qn' and 'pep_qn' the secant's gradient at the current mean (the one at the previous
#: mean needs a pass of its own). Not PL (its energy is EP's, its update SLR), which has
#: no pass to share.
REUSES_ENERGY_PASS = frozenset({"vi", "vi_gn", "vi_qn", "ep", "pep", "pep_qn", "ep_like"})
#: Methods whose iteration is natural-gradient ascent of the ELBO (CVI, Khan & Lin 2017;
#: Wilkinson et al. 2023 eq. 15), so that a small enough step increases it: the engine
#: may reject a step that lowers the ELBO and halve ρ (``Settings.backtrack``). The
#: Riemannian form agrees with CVI to first order in ρ (eq. 58). Not the Gauss–Newton,
#: quasi-Newton or heuristic forms: their H is not the ELBO's, so no step size is
#: guaranteed to increase it.
ASCENDS_ELBO = frozenset({"vi", "vi_riemann", "ep_like"})


class Mixing(NamedTuple):
    """How the engine Anderson-mixes a method's steps (``Settings.accelerate``,
    ``bnlab.anderson``)."""
    guard: str                 # what a mixed step must pass: "objective" or "residual"
    min_history: int = 1       # secant pairs (accepted steps since the history was last
                               # cleared) needed before a step is mixed
    damped_only: bool = False  # mix only when ρ < 1 (the undamped map is Newton's)
    depth: int = DEPTH         # secant pairs kept


#: The methods whose steps the engine may Anderson-mix, and how. Guards: "objective" — a
#: mixed step must not lower the ELBO (the ``ASCENDS_ELBO`` methods, under the step
#: control); "residual" — the plain step's relative change at the mixed iterate must not
#: exceed the one at the current iterate (EP, Power EP and Laplace, which ascend nothing
#: the engine evaluates).
#: Laplace mixes only when damped: its undamped step is Newton's, which converges
#: quadratically (mixing slowed it, 4.1 → 4.9 iterations per point on the surface
#: benchmark's grid at ρ = 1), while near the mode the damped step contracts by only
#: 1 − ρ, the linear rate mixing removes. And it mixes from two secant pairs on: with
#: one, at large σ² the iteration alternated between a plain step and a rejected mixed
#: one for tens of iterations. On that grid at ρ = 0.5 (benchmarks/README.md,
#: "Surfaces"): cold runs 34.1 → 21.2 iterations on average with one pair, 17.9 with
#: two; warm-started 24.2 → 9.2 and 8.8 (EP and CVI were 2–4 % slower with two).
#: CVI keeps ten secant pairs: on that grid 21.5 → 19.8 iterations warm-started (at
#: most 175 → 128), 29.7 → 28.5 cold, against five (twenty: 19.4 and 28.6); EP was no
#: faster with ten and Laplace slower (8.8 → 10.5 warm).
#: Not mixed: the Riemannian forms, whose point is that every iterate's site precisions
#: stay PD (notes §1.17), which a linear extrapolation does not keep (laplace_riemann,
#: tried: 12 % of that grid then diverged cold); laplace_gn and taylor (tried as Laplace
#: is mixed: 36.0 → 19.2 iterations cold and 25.9 → 9.3 warm, but 1.1 % of the grid then
#: diverged cold, where their plain iteration converges everywhere); the QN forms, whose
#: BFGS state follows the plain path; the PL and heuristic forms (not tried).
ACCELERATED = {"vi": Mixing("objective", depth=10), "ep_like": Mixing("objective", depth=10),
               "ep": Mixing("residual"), "pep": Mixing("residual"),
               "laplace": Mixing("residual", min_history=2, damped_only=True)}

_NONEXISTENT = {
    "pep_gn": "there is no Power-EP Gauss–Newton method: Bonnet's and Price's theorems do "
              "not apply to the PEP surrogate target (Wilkinson et al. 2023, §5). Use "
              "'pep_qn', 'pep_riemann' or method='heuristic' with base='pep'.",
    "ep_gn": "there is no EP Gauss–Newton method (see 'pep_gn').",
    "pl_gn": "PL already has a Gauss–Newton form (PSD); use 'pl', or 'pl2_gn'.",
    "pl_qn": "use 'pl2_qn' (for likelihoods whose noise does not depend on f they coincide).",
    "taylor_gn": "Taylor/EKS already is the generalised Gauss–Newton method; use 'taylor'.",
}

_LOCALS = {
    "laplace": laplace_local, "laplace_gn": laplace_gn_local, "taylor": taylor_local,
    "vi": vi_local, "vi_gn": vi_gn_local, "ep": pep_local, "pep": pep_local,
    "pl": pl_local, "pl2": pl2_local, "pl2_gn": pl2_gn_local, "ep_like": vi_local,
}
_QN = {"laplace_qn": laplace_qn_local, "vi_qn": vi_qn_local, "pl2_qn": pl2_qn_local,
       "pep_qn": pep_qn_local}


def check_method_name(name: str):
    if name in _NONEXISTENT:
        raise ValueError(f"method {name!r}: {_NONEXISTENT[name]}")
    if name not in METHOD_NAMES:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHOD_NAMES)}")


def build_method(name: str, likelihood, rule, *, base: str = "vi", qn_damping: float = 0.5) -> Method:
    """The site method ``name`` for ``likelihood`` with cubature ``rule``.

    ``base`` picks the method the heuristic PSD fix wraps; ``qn_damping`` is ξ of the
    damped BFGS update (the paper's experiments use 0.3–0.5)."""
    check_method_name(name)
    if name == "gkl":
        raise ValueError("'gkl' optimises (m, C) directly and has no site update")
    if name == "heuristic":
        if base not in HEURISTIC_BASES:
            raise ValueError(f"heuristic: base must be one of {HEURISTIC_BASES}, got {base!r}")
        inner = build_method(base, likelihood, rule)
        return Method("heuristic", inner.energy, heuristic(inner.local), True,
                      inner.uses_alpha, inner.init_aux, f"heuristic {base}",
                      inner.uses_covariance, inner.reuses_energy_pass)
    energy, psd, uses_alpha, description = SITE_METHODS[name]
    if not 0 < qn_damping < 1:
        raise ValueError(f"qn_damping ξ must lie in (0, 1), got {qn_damping}")
    if name in _QN:
        scale = PEP_B0_SCALE if name == "pep_qn" else B0_SCALE
        return Method(name, energy, _QN[name](likelihood, rule, qn_damping), psd, uses_alpha,
                      bfgs_init(scale), description, name not in MEAN_ONLY,
                      name in REUSES_ENERGY_PASS)
    if name.endswith("_riemann"):
        inner = build_method(name[: -len("_riemann")], likelihood, rule)
        return Method(name, energy, riemannian(inner.local), psd, uses_alpha,
                      inner.init_aux, description, name not in MEAN_ONLY,
                      inner.reuses_energy_pass, _ascends(name))
    return Method(name, energy, _LOCALS[name](likelihood, rule), psd, uses_alpha,
                  description=description, uses_covariance=name not in MEAN_ONLY,
                  reuses_energy_pass=name in REUSES_ENERGY_PASS, ascends=_ascends(name))


def _ascends(name):
    return "vfe" if name in ASCENDS_ELBO else None
