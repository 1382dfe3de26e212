"""The loop's vocabulary: ``Settings``, ``State`` and the best iterate ``Best``, the
per-step ``StepInfo`` and the stopping rule's measure (``undamped_change``); the per-run
``Trace`` and ``stop_reason`` are every family's (``bnlab.results``).

The state a diverged step returns is not the last accepted iterate but the *best* valid
one seen (``State.best``, the start included, so never one worse than the start): an
iteration on its way to failing can degrade for many steps before a check stops it
(an overflowing one runs the means far out first). "Best" is measured by
``Best.merit`` (lower is better; ``Engine.merit_kind``):

- for the methods whose energy or ascended objective is the ELBO (the VI family,
  heuristic VI, ep_like) the ELBO: a lower bound on log p(y), and the higher it is the
  smaller KL[q‖p], whatever path the iteration took;
- for every other method the fixed-point residual, the same undamped change the
  convergence test reads: their answer is defined as a fixed point, not as an
  optimum of the energy they report. The EP energy is only stationary at EP's fixed
  point (a saddle, not a maximum); PL and its variants report the EP energy of sites
  that EP would not choose, so the iterate with the highest EP energy is the one
  closest to EP's answer, not PL's; and the Laplace energy is not maximised at the
  mode (on the lab's probit preset at n = 60 Newton's iterates pass −23.30 on the
  way to the mode's −23.38). Ranking by those energies would prefer iterates away
  from the method's answer; the iterate closest to satisfying the method's own
  equations is the one to show.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..sites import Marginals, Sites

__all__ = ["Settings", "make_settings", "State", "Best", "StepInfo", "ASCENT_SLACK",
           "undamped_change", "energy_settled"]


class Settings(NamedTuple):
    alpha: Any   # Power-EP power (ignored by non-PEP methods)
    rho: Any     # damping ρ ∈ (0, 1]: the (largest) step
    tol: Any     # convergence: max relative site change of an undamped step < tol/ρ
    backtrack: Any = False   # step control for the methods that ascend the ELBO
    accelerate: Any = False  # Anderson acceleration (``anderson``; CVI's needs ``backtrack``)


def make_settings(alpha=1.0, damping=0.5, tol=1e-8, backtracking=False,
                  acceleration=False) -> Settings:
    """``Settings`` as the device arrays the compiled step takes (one place for every
    caller: ``infer``, learning, the lab's runner)."""
    return Settings(*jax.device_put((float(alpha), float(damping), float(tol),
                                     bool(backtracking), bool(acceleration))))


#: Relative slack of the step control: a step is rejected only when the ELBO falls by
#: more than this times (1 + |ELBO|), above its rounding error.
ASCENT_SLACK = 1e-10


class Best(NamedTuple):
    """The best valid iterate seen so far (module docstring): what a diverged step
    returns. Its fields are those of ``State`` that a step changes."""
    sites: Sites
    marginals: Marginals
    aux: Any
    energy: jnp.ndarray
    objective: jnp.ndarray
    derivatives: Any
    merit: jnp.ndarray      # lower is better: −ELBO, or the undamped residual (+∞ until
                            # measured: a residual is known only once a step is proposed)
    iteration: jnp.ndarray  # the iteration that produced it (0: the start)


class State(NamedTuple):
    prior: Any
    sites: Sites
    marginals: Marginals
    aux: Any
    energy: jnp.ndarray
    objective: jnp.ndarray  # the energy the method ascends (``Method.ascends``), or NaN
    step_size: jnp.ndarray  # ρ_k of the next proposal (ρ unless the step control cut it)
    derivatives: Any = ()   # the next local update's (J, H), or () (see step 4 above)
    history: Any = ()       # ``anderson.History`` for the methods it may mix (Method.mixing)
    iteration: Any = 0      # the iteration that produced this iterate (0: the start; a
                            # rejected step keeps it, a diverged one returns the best's)
    best: Any = ()          # ``Best``: the best valid iterate seen, this one included
                            # once measured


class StepInfo(NamedTuple):
    energy: jnp.ndarray            # the method's energy after the step (log p(y) approx.)
    step_size: jnp.ndarray         # ρ used
    max_change: jnp.ndarray        # max relative site change
    posterior_psd: jnp.ndarray     # posterior covariance PD after the step
    cavity_psd: jnp.ndarray        # every cavity (power α; 1 for non-PEP) PD at the new state;
                                   # True for the mean-only (Laplace-family) methods
    min_site_precision: jnp.ndarray
    min_cavity_precision: jnp.ndarray
    accepted: jnp.ndarray          # the proposal became the state
    diverged: jnp.ndarray          # rejected as non-PD or non-finite: the run stops,
                                   # and the state returned is the best iterate
    converged: jnp.ndarray         # accepted, and ``undamped_change`` < tol

    @property
    def psd(self):
        return self.posterior_psd & self.cavity_psd


def undamped_change(max_change, rho, rho_k):
    """The convergence measure: the max relative site change of a step of ρ_k, scaled
    to the settings' ρ (a step the control shortened is never mistaken for convergence)."""
    return max_change * (rho / rho_k)


def energy_settled(settings, old_energy, energy):
    """The step changed the energy by at most ρ_k·tol·(1 + |energy|): the convergence
    test's second half, beside ``undamped_change`` (a non-finite energy does not hold
    it up). The site test alone stops too early wherever the energy is far more
    sensitive than the sites' prior scale: a line-searched method's damped site
    precisions approach W(m̂) by 1 − ρ a step, while ½log|I + KΛ̄| moves by about K_nn
    times their change (3e-7 nats at σ² = e¹⁰ on the 281-point logit benchmark);
    under Gaussian noise σ_n² = 1e-12 a mean within 1e-8 of its fixed point still costs
    the ELBO or Laplace's energy δ²/σ_n² ≈ 1e-4 nats (taylor and vi_qn 'converged' at
    −6.014750 where log p(y) = −6.014642)."""
    scale = 1.0 + jnp.abs(old_energy)
    return ~(jnp.abs(energy - old_energy) > settings.rho * settings.tol * scale)
