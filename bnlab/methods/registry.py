"""The method registry: one ``Method`` record per name, the variants written as
compositions of a base method (``riemannian(VI)``, ``heuristic(base)``), and clear
errors for the combinations that do not exist.

Why each property is what it is:

- **psd_guaranteed**: every iterate's posterior and cavities are PD in exact arithmetic
  for any data and ρ — −H is a Gauss–Newton GᵀG, a negative-definite damped-BFGS
  matrix, PL's AᵀΩ⁻¹A, the heuristic diagonal, or the Riemannian update keeps the site
  precisions PD (the README's column; the methods that are so only for log-concave
  likelihoods have ``nonnegative_if_log_concave``). Not
  pep_qn (R = P\\\\(αB + P\\\\)⁻¹ with the paper's sign keeps −RB PSD only while
  −P\\\\ < αB ≤ 0).
- **nonnegative_if_log_concave**: site precisions stay ≥ 0 for a log-concave likelihood
  with one latent: −H is −∇² log p, E[−∇² log p], GᵀG, AᵀΩ⁻¹A, a negative-definite BFGS
  matrix, the heuristic diagonal, EP moment matching (tilted variance ≤ cavity variance)
  or the PD-preserving Riemannian step. Not pl2 (its ∇Ω terms) nor pep_qn.
- **mean_only**: the Laplace family's J, H and energy never read C_nn.
- **reuses_energy_pass**: the local update differentiates what the energy evaluates at
  the same state — E_q[log p(y_n|f_n)] (VI, 'ep_like', whose step control evaluates the
  ELBO too) or log E_cavity[p^α] (PEP, EP); 'vi_gn' takes its J from the ELBO's pass,
  'vi_qn' and 'pep_qn' the secant's gradient at the current mean. Not PL (its energy is
  EP's, its update SLR), which has no pass to share.
- **ascends**: CVI is natural-gradient ascent of the ELBO (Khan & Lin 2017; Wilkinson et
  al. 2023 eq. 15), so a small enough step increases it and the engine may reject a step
  that lowers it; the Riemannian form agrees with CVI to first order in ρ (eq. 58). Not
  the Gauss–Newton, quasi-Newton or heuristic forms: their H is not the ELBO's.
- **line_search**: Laplace, its Gauss–Newton, quasi-Newton and Riemannian forms (and
  the heuristic fix around it) take J = ∇ log p(y|m) exactly, so their fixed point is
  the mode of Ψ = log p(y|f) − ½fᵀK⁻¹f and their step an ascent direction of it
  (``bnlab.engine.line_search``). Not taylor: its J is ∇νᵀΣ⁻¹(y − ν), which is not
  ∇ log p where Σ depends on f, and its fixed point is not Ψ's mode.
- **mixing** (Anderson acceleration): "objective"-guarded for the ELBO ascents (CVI keeps
  ten secant pairs, which took fewer iterations than five); "residual"-guarded for EP,
  Power EP and Laplace. Laplace mixes only when damped (its undamped step is Newton's,
  which converges quadratically, while the damped step contracts by only 1 − ρ near the
  mode, the linear rate mixing removes) and from two secant pairs on (with one, at large
  σ² the iteration alternated between a plain and a rejected mixed step). Not mixed: the
  Riemannian forms, whose point is a path of PD sites that a linear extrapolation does
  not keep; laplace_gn and taylor (mixed, part of a surface grid diverged where the
  plain iteration converges); the QN forms, whose BFGS state follows the plain path; PL
  and the heuristic forms.
"""
from __future__ import annotations

from dataclasses import replace

from .base import Method, Mixing
from .direct import DirectMethod
from .linearisation import pl2_gn_local, pl2_local, pl_local
from .newton import laplace_gn_local, laplace_local, taylor_local
from .power_ep import pep_local
from .quasi_newton import (bfgs_init, laplace_qn_local, pep_qn_local, pl2_qn_local,
                           vi_qn_local)
from .riemannian import heuristic_local, riemannian_local
from .variational import vi_gn_local, vi_local

__all__ = ["REGISTRY", "DIRECT", "METHOD_NAMES", "HEURISTIC_BASES", "register", "unregister",
           "resolve", "takes_alpha", "takes_base", "method_names", "check_method_name",
           "riemannian", "heuristic"]


def riemannian(base: Method) -> Method:
    """``base`` with the Riemannian PSD correction of its H (eq. 58): same energy, same
    reuse of the energy pass, not Anderson-mixed (mixing would not keep the PD path);
    site precisions stay PD from PD initial sites for any finite H."""
    return replace(base, name=base.name + "_riemann", psd_guaranteed=True, mixing=None,
                   make_local=lambda lik, rule: riemannian_local(base.make_local(lik, rule)),
                   description=f"{base.description}, with the Riemannian PSD correction")


def heuristic(base: Method) -> Method:
    """``base`` with the heuristic diagonal PSD fix (§4.5.1): always PSD, latents
    independent per site; its energy and its reuse of the energy pass are the base's."""
    return replace(base, name="heuristic", psd_guaranteed=True, mixing=None, ascends=None,
                   nonnegative_if_log_concave=True,
                   make_local=lambda lik, rule: heuristic_local(base.make_local(lik, rule)),
                   description=f"heuristic {base.name}")


def _quasi_newton(name, energy, make_local, description, **fields):
    """A damped-BFGS form: per-site B starts at the surrogate's curvature
    (``methods.quasi_newton``), ξ is ``qn_damping``."""
    return Method(name=name, energy=energy,
                  make_local=lambda lik, rule, qn_damping: make_local(lik, rule, qn_damping),
                  description=description, init_aux=bfgs_init, options=("qn_damping",),
                  **fields)


_LAPLACE = Method(name="laplace", energy="laplace", make_local=laplace_local,
                  psd_guaranteed=False, description="Newton on log p(y|f) at the mean (Laplace)",
                  mean_only=True, line_search=True,
                  mixing=Mixing("residual", min_history=2, damped_only=True))
_VI = Method(name="vi", energy="vfe", make_local=vi_local, psd_guaranteed=False,
             description="natural-gradient variational inference (CVI)",
             reuses_energy_pass=True, ascends="vfe", mixing=Mixing("objective", depth=10))
_PEP = Method(name="pep", energy="pep", make_local=pep_local, psd_guaranteed=False,
              description="Power EP with power α", uses_alpha=True,
              reuses_energy_pass=True, mixing=Mixing("residual"))
_PL2 = Method(name="pl2", energy="ep", make_local=pl2_local, psd_guaranteed=False,
              description="second-order posterior linearisation",
              nonnegative_if_log_concave=False)

#: name → Method; ``register`` adds to it.
REGISTRY: dict[str, Method] = {m.name: m for m in (
    _LAPLACE,
    Method(name="laplace_gn", energy="laplace", make_local=laplace_gn_local,
           psd_guaranteed=True, description="Laplace with a Gauss–Newton Hessian",
           mean_only=True, line_search=True),
    _quasi_newton(name="laplace_qn", energy="laplace", make_local=laplace_qn_local,
                  description="Laplace with damped-BFGS Hessians",
                  psd_guaranteed=True, mean_only=True, line_search=True),
    riemannian(_LAPLACE),
    Method(name="taylor", energy="laplace", make_local=taylor_local, psd_guaranteed=True,
           description="Taylor linearisation (iterated EKS)", mean_only=True),
    _VI,
    Method(name="vi_gn", energy="vfe", make_local=vi_gn_local, psd_guaranteed=True,
           description="variational Gauss–Newton", reuses_energy_pass=True),
    _quasi_newton(name="vi_qn", energy="vfe", make_local=vi_qn_local,
                  description="variational quasi-Newton (damped BFGS)",
                  psd_guaranteed=True, reuses_energy_pass=True),
    riemannian(_VI),
    replace(_PEP, name="ep", uses_alpha=False,
            description="expectation propagation (Power EP with α = 1)"),
    _PEP,
    _quasi_newton(name="pep_qn", energy="pep", make_local=pep_qn_local,
                  description="Power EP with damped-BFGS tilted Hessians",
                  psd_guaranteed=False, uses_alpha=True, secant_cavity=True,
                  reuses_energy_pass=True, nonnegative_if_log_concave=False),
    riemannian(_PEP),
    Method(name="pl", energy="ep", make_local=pl_local, psd_guaranteed=True,
           description="posterior linearisation (SLR)"),
    _PL2,
    Method(name="pl2_gn", energy="ep", make_local=pl2_gn_local, psd_guaranteed=True,
           description="second-order PL with a Gauss–Newton Hessian"),
    _quasi_newton(name="pl2_qn", energy="ep", make_local=pl2_qn_local,
                  description="second-order PL with damped-BFGS Hessians", psd_guaranteed=True),
    replace(riemannian(_PL2), nonnegative_if_log_concave=True),
    replace(_VI, name="ep_like", energy="ep", iteration_of="vi",
            description="VI sites scored by the EP energy (Li et al. 2023)"),
)}
#: the bases ``method="heuristic"`` may wrap (``base=``)
HEURISTIC_BASES = ("laplace", "vi", "pep", "pl2")
#: name → ``DirectMethod``: the families that optimise q directly, not by site updates
#: (``bnlab.gkl`` registers G-KL's record when bnlab is imported)
DIRECT: dict[str, DirectMethod] = {}
REGISTRY["heuristic"] = replace(heuristic(_VI), description="a base method with the heuristic "
                                "diagonal PSD fix")


def method_names() -> tuple:
    """Every name ``infer`` accepts now, site methods first (the ones ``register`` added
    included: read it where the list is used, not once at import)."""
    return tuple(REGISTRY) + tuple(DIRECT)


def __getattr__(name):
    """``METHOD_NAMES``: ``method_names()`` when read, so that it holds the direct
    families, which register after this module is imported, and the methods
    ``register`` added."""
    if name == "METHOD_NAMES":
        return method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: bnlab's own methods (``unregister`` removes only the others)
_BUILT_IN = set(REGISTRY)

_NONEXISTENT = {
    "pep_gn": "there is no Power-EP Gauss–Newton method: Bonnet's and Price's theorems do "
              "not apply to the PEP surrogate target (Wilkinson et al. 2023, §5). Use "
              "'pep_qn', 'pep_riemann' or method='heuristic' with base='pep'.",
    "ep_gn": "there is no EP Gauss–Newton method (see 'pep_gn').",
    "pl_gn": "PL already has a Gauss–Newton form (PSD); use 'pl', or 'pl2_gn'.",
    "pl_qn": "use 'pl2_qn' (for likelihoods whose noise does not depend on f they coincide).",
    "taylor_gn": "Taylor/EKS already is the generalised Gauss–Newton method; use 'taylor'.",
}


def register(method: Method | DirectMethod, *, built_in: bool = False):
    """Add ``method`` to the registry: ``infer`` and the surfaces accept its name from
    then on, and a lab built after it offers it, with the controls its record implies
    (α from ``uses_alpha``, the step control from ``ascends``, acceleration from
    ``mixing``). A ``Method`` joins ``REGISTRY``, a ``DirectMethod`` ``DIRECT``.
    ``built_in``: one of bnlab's own families, which ``unregister`` refuses."""
    if method.name in REGISTRY or method.name in DIRECT or method.name in _NONEXISTENT:
        raise ValueError(f"a method named {method.name!r} already exists")
    if not isinstance(method, (Method, DirectMethod)):
        raise TypeError(f"register takes a Method or a DirectMethod record, got "
                        f"{type(method).__name__}")
    (DIRECT if isinstance(method, DirectMethod) else REGISTRY)[method.name] = method
    if built_in:
        _BUILT_IN.add(method.name)
    return method


def unregister(name: str) -> Method:
    """Remove a method ``register`` added (the built-in ones stay) and return it."""
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in method: only registered ones can be removed")
    if name not in REGISTRY and name not in DIRECT:
        raise ValueError(f"no registered method named {name!r}")
    return (REGISTRY if name in REGISTRY else DIRECT).pop(name)


def check_method_name(name: str):
    if name in _NONEXISTENT:
        raise ValueError(f"method {name!r}: {_NONEXISTENT[name]}")
    if name not in REGISTRY and name not in DIRECT:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(method_names())}")


def resolve(name: str, *, base: str = "vi", qn_damping: float = 0.5) -> tuple[Method, dict]:
    """The site method ``name`` and the options its ``make_local`` takes.

    ``base`` picks the method the heuristic PSD fix wraps; ``qn_damping`` is ξ of the
    damped BFGS update (the paper's experiments use 0.3–0.5)."""
    check_method_name(name)
    if name in DIRECT:
        raise ValueError(f"{name!r} optimises (m, C) directly and has no site update")
    if not 0 < qn_damping < 1:
        raise ValueError(f"qn_damping ξ must lie in (0, 1), got {qn_damping}")
    method = REGISTRY[name]
    if takes_base(name):
        if base not in HEURISTIC_BASES:
            raise ValueError(f"heuristic: base must be one of {HEURISTIC_BASES}, got {base!r}")
        method = heuristic(REGISTRY[base])
    options = {"qn_damping": qn_damping}
    return method, {k: v for k, v in options.items() if k in method.options}


def takes_base(name: str) -> bool:
    """Whether method ``name`` wraps a base method, chosen by ``base=`` among
    ``HEURISTIC_BASES``: the heuristic PSD fix does (§4.5.1)."""
    return name == "heuristic"


def takes_alpha(name: str, *, base: str = "vi") -> bool:
    """Whether the Power-EP power α is a run-time setting of method ``name``: the
    ``uses_alpha`` of the record it runs as (for 'heuristic', the fix around ``base``,
    which takes α when the base does). 'ep' is Power EP at α = 1, fixed; the direct
    methods (G-KL, ``DIRECT``) have no α. The one rule the lab and scripts ask."""
    if name in DIRECT:
        return False
    return resolve(name, base=base)[0].uses_alpha
