"""The record of a method family that optimises q(f) = N(m, S) directly instead of
updating sites (G-KL, Challis & Barber 2013): no J, H, damping or α, so none of
``Method``'s fields apply. ``bnlab.infer``, the surfaces and the lab read what they need
from this record; the family registers it (``bnlab.methods.register``), and the
registry lists it in ``DIRECT``, beside the site methods' ``REGISTRY``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["DirectMethod"]


@dataclass(frozen=True, eq=False)
class DirectMethod:
    """Everything ``infer`` and the surfaces need to run a direct family.

    ``infer(model, X, y, *, params, max_iters, tol, cubature, **options)`` runs it on data
    ``infer`` has validated and returns a ``bnlab.Result``; ``options`` names the keyword
    options it takes. ``bound_at_optimum(params, X, y, *, model, max_iters, tol,
    cubature, **options)`` is the optimised energy as a pure function of the
    hyperparameters (jit-able, vmap-able over ``params``), for surfaces and learning;
    it takes the ``bound_options`` among ``options``. ``check(model, params, options)``
    raises a ValueError where float64 or the optimiser cannot resolve the family with
    these options at these hyperparameters (``bnlab.infer.check_resolution``)."""
    name: str
    description: str
    infer: Callable[..., Any]
    bound_at_optimum: Callable[..., Any]
    options: tuple = ()
    bound_options: tuple = ()
    energy: str | None = None      # the ``Method.energy`` kind of its bound ("vfe": an
                                   # ELBO), for ``Likelihood.check_energy``
    check: Callable[..., None] | None = None

    #: no site precision from a secant: the refusals for ``Method.secant_cavity`` never
    #: apply (``Likelihood.check_method`` reads it of any record it is given)
    secant_cavity = False
