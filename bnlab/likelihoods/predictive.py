"""The predictive moments of y at many points at once, for views that redraw often."""
from __future__ import annotations

import jax

from .. import cubature as cub
from .._runtime import exported
from .._runtime.compiled import CompiledCache

__all__ = ["predictive_moments"]

_COMPILED = CompiledCache(maxsize=16)


def predictive_moments(likelihood, params, mean, cov, cubature=("gauss_hermite", 20)):
    """E[y] and Var[y], (Ns,) each, under ∫ p(y|f) N(f | mean_n, cov_n) df at Ns points:
    ``mean`` (Ns, D) and ``cov`` (Ns, D, D) are latent predictive moments (those of
    ``Stepper.predict``, say), ``params`` the likelihood's own (a model's
    ``params["likelihood"]``). Where the likelihood has no closed form the expectation
    takes the ``cubature`` rule (name, order) in D dimensions. Compiled once per
    likelihood structure and rule, so the lab's bands cost no compilation per frame,
    and stored as an exported program (``bnlab._runtime.exported``), so a new process
    (the lab's next server) neither traces nor lowers it."""
    name, order = cubature[0], int(cubature[1])
    D = likelihood.num_latents
    key = (likelihood.structure_key(), name, order, D)

    def build():
        rule = cub.make_rule(name, order, D)
        return jax.jit(lambda lp, m, C: jax.vmap(
            lambda mn, Cn: likelihood.predictive_moments(lp, mn, Cn, rule))(m, C))
    jitted = _COMPILED.get(key, build)
    return exported.call(jitted, ("predictive_moments", key), (params, mean, cov))
