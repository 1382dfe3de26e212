"""The step control and Anderson acceleration of ``bnlab.engine.loop.Engine`` (its
module docstring states the rules): ρ_k under ``Settings.backtrack``, the ELBO's ascent
test, the line search on Laplace's Ψ (``line_search``), the Anderson-mixed proposal
and its residual safeguard, and the mixing history. A mixin: ``Engine`` provides
``method``, ``lik``, ``accelerated``, ``nonnegative_sites`` and ``propose_pure``."""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ..sites import Sites
from . import anderson, batch_axis, line_search
from .state import ASCENT_SLACK, State, energy_settled

__all__ = ["StepControl"]


class _Mix(NamedTuple):
    """A step's Anderson mixing: whether the proposal is the mixed iterate, and the
    secant pair of the current state (flattened sites x_k and the plain step's change
    G(x_k) − x_k), None for a method that is never mixed; ``clipped``: the mixed
    iterate had a negative site precision, clipped at 0 (``StepControl._mixed``)."""
    extrapolated: jnp.ndarray
    x: Any
    residual: Any
    clipped: Any = False


class StepControl:
    """The step-size and mixing decisions of one engine step."""

    # step control (``Settings.backtrack``)
    def _step_size(self, settings, state: State):
        """ρ_k of this step: the state's under the step control (never above the
        settings' ρ), else ρ."""
        return jnp.where(settings.backtrack, jnp.minimum(state.step_size, settings.rho),
                         settings.rho)

    def _ascent_fell(self, settings, state: State, proposal: State, invalid):
        """Under the step control, for a method that ascends an objective (the ELBO): does
        the valid proposal lower it by more than ``ASCENT_SLACK``·(1 + |objective|), i.e.
        beyond its rounding error? Such a step is rejected. False for the other methods."""
        if self.method.ascends is None:
            return jnp.asarray(False)
        slack = ASCENT_SLACK * (1 + jnp.abs(state.objective))
        return settings.backtrack & ~invalid & (proposal.objective < state.objective - slack)

    def _next_step_size(self, rho, fell, extrapolated):
        """ρ_{k+1}: half ρ_k after a plain step that lowered the objective, else ρ_k. It
        never grows back (module docstring: the failure near the fixed point is an
        unstable damped map, which persists); a mixed step that fell keeps ρ_k — the
        plain step was not tried."""
        return jnp.where(fell & ~extrapolated, 0.5 * rho, rho)

    def _searched(self, params, y, settings, state: State, sites, marg, mix):
        """(sites, marginals, ``line_search.Search``) of the proposal at ρ_k
        (``settings``): for a method whose fixed point is Ψ's mode
        (``Method.line_search``) a plain step that lowers Ψ is shortened, a mixed one is
        to be rejected, and convergence waits for Ψ (``line_search.search``)."""
        if not self.method.line_search:
            return sites, marg, line_search.Search(jnp.asarray(False), jnp.asarray(True))
        return line_search.search(self.lik, params["likelihood"], y, settings, state.marginals,
                                  state.sites, sites, marg, mix.extrapolated)

    def _energy_settled(self, settings, state: State, energy):
        """The step left the energy settled (``state.energy_settled``), which every
        method's convergence waits for."""
        return energy_settled(settings, state.energy, energy)

    # Anderson acceleration (``Settings.accelerate``, ``Method.mixing``)
    def _mixed(self, state: State, plain: Sites, settings):
        """(proposed sites, ``_Mix``): the Anderson-mixed iterate when ``accelerate`` is
        on (for the ELBO-guarded methods, with the step control, their safeguard), the
        history holds the method's ``Mixing.min_history`` secant pairs and, for a
        ``damped_only`` method, ρ < 1; else the plain damped step. Where the method's
        sites are non-negative (a log-concave likelihood) the mixed precisions are
        clipped at 0, which the cheap √Λ̄ form of the marginals needs, and ``_Mix``
        says whether any was (the residual safeguard rejects such a step). Without
        mixing, the plain step and no secant pair."""
        if not self.accelerated:
            return plain, _Mix(jnp.asarray(False), None, None)
        x, unravel = ravel_pytree(state.sites)
        residual = ravel_pytree(plain)[0] - x

        def mixed():
            sites = unravel(anderson.extrapolate(state.history, x, residual))
            if not self.nonnegative_sites:
                return sites, jnp.asarray(False)
            return (sites._replace(prec=jnp.maximum(sites.prec, 0.0)),
                    jnp.any(sites.prec < 0))

        use = settings.accelerate & (state.history.count >= self.accelerated.min_history)
        if self.accelerated.damped_only:
            use = use & (settings.rho < 1)
        if self.accelerated.guard == "objective":
            use = use & settings.backtrack
        sites, clipped = batch_axis.cond(use, mixed, lambda: (plain, jnp.asarray(False)))
        return sites, _Mix(use, x, residual, clipped)

    def _mixed_step_worse(self, params, X, y, settings, proposal: State, mix, invalid):
        """The residual safeguard (``Mixing.guard == "residual"``: EP, Power EP, damped
        Laplace, which ascend nothing the engine evaluates): does the plain step from a
        valid mixed proposal change the sites (relatively, in 2-norm) more than the plain
        step from the current state? Its local update reuses the proposal's energy pass,
        so it costs O(N), and it runs only for a valid mixed proposal. For EP and Power
        EP, which have no Ψ to guard them (``_searched``), a mixed iterate whose
        precisions were clipped at 0 (``_mixed``) is worse without the test: the
        clipped sites are not the secant model's point, and the norm, whose floor of 1
        lies far above site precisions of order 1/σ² at a large prior variance σ², does
        not see their loss (probit EP cycled at the iteration cap through such steps,
        flagged, at energies from −6.1 to +5.4 where log p(y) is −8.7 … −9.3, ten points
        at σ² = 1e3 … 1e5). False for the other methods (the ELBO-guarded ones judge a
        mixed step by ``_ascent_fell``)."""
        if not (self.accelerated and self.accelerated.guard == "residual"):
            return jnp.asarray(False)

        def residual_grew():
            current = anderson.relative_norm(mix.residual, mix.x)
            plain, _, _ = self.propose_pure(params, X, y, settings, proposal)
            x = ravel_pytree(proposal.sites)[0]
            return anderson.relative_norm(ravel_pytree(plain)[0] - x, x) > current

        clipped = jnp.asarray(False) if self.method.line_search else mix.clipped
        return clipped | batch_axis.cond(mix.extrapolated & ~invalid & ~clipped,
                                         residual_grew, lambda: jnp.asarray(False))

    def _next_history(self, state: State, mix, accepted):
        """The Anderson history after the step: the secant pair (x_k, G(x_k) − x_k) of
        the current state pushed where the step was accepted, cleared where it was
        rejected (the next step is then a plain one)."""
        if not self.accelerated:
            return state.history
        return jax.tree_util.tree_map(
            lambda a, b: jnp.where(accepted, a, b),
            anderson.push(state.history, mix.x, mix.residual), anderson.clear(state.history))
