"""The inference loop shared by every site method and model: init / step / run.

One iteration (Wilkinson et al. 2023, Alg. 1–3):
  1. the method maps the likelihood and the current marginals to per-site (J, H);
  2. the damped site update of eq. (9) (sites whose update is not valid — a non-PD
     cavity — keep their value);
  3. the model's global update gives the new marginals and log_norm;
  4. the method's energy is evaluated at the new state. For CVI and Power EP (and their
     Riemannian and heuristic forms) the energy's cubature pass also gives the next
     step's derivatives — of the same E_q[log p(y_n|f_n)] (the ELBO's) or log Z at the
     same cavity (the PEP energy's) — which the state carries (``State.derivatives``),
     so a step makes one cubature pass, not two.
Step control (``Settings.backtrack``, for the methods whose iteration ascends the
ELBO: CVI and its Riemannian form, and the VI sites of 'ep_like'): a step that lowers
the ELBO is rejected — the state stays, the trace records it with ``accepted = False``
— and this and every later proposal use half the step. The step never grows back: near
the fixed point a step fails because the damped map is unstable there (an eigenvalue
below −1, a period-doubling), which persists; letting it double again after every
accepted step made CVI alternate between the two forever (at a probit point of prior
variance e^7.6). With a
fixed ρ, CVI can settle into a two-cycle (a large prior variance with ρ = 0.5 does),
whose last iterate is neither converged nor the ELBO's optimum; with the control it
is an ascent method and converges. Convergence is judged on the change an undamped
step would make: the max relative site change over ρ_k/ρ, so a reduced step is never
mistaken for convergence. Off, ρ_k = ρ throughout and the iteration is the papers'
fixed-step one.
With ``Settings.accelerate`` (for CVI and 'ep_like' under the step control, for EP and
Power EP, and for damped Laplace; ``Method.mixing``) the proposal is the
Anderson-mixed iterate of the last few accepted steps (``bnlab.engine.anderson``): a mixed step
that lowers the ELBO (CVI), whose plain residual grows (EP, PEP, Laplace), or that
leaves the posterior or an energy's cavity not PD, is rejected without halving ρ — it
only clears the history, the next step is a plain one, and the run does not diverge on
it. The fixed point is the same, reached in fewer iterations (benchmarks/README.md,
surface.py).

Convergence, one rule for every site method: a step converges when it is accepted and
the change an undamped step would make (``undamped_change``: the max relative site
change over ρ_k/ρ) is below ``tol`` and the energy moved by at most ρ_k·tol relative
(``energy_settled``). The rule reads the sites, which for the
quasi-Newton forms include their BFGS matrices' effect; those stop moving at a fixed
point because a secant pair below its rounding error is not used
(``methods.quasi_newton.SECANT_RTOL``).

If the new posterior is not positive definite the step is *rejected*, the iteration is
recorded with ``posterior_psd = False`` and the run stops as diverged (the paper
reports such methods at their "last stable step"). A step whose sites, mean or energy
are not finite is rejected the same way, with a NaN energy. Its flags say why
(``stop_reason``): ``cavity_psd = False`` with a PD posterior means the EP-family
energy is undefined because a cavity of the proposed state is not PD (power EP, PL and
the EP-like energy need every cavity); ``posterior_psd = True`` with both flags set
means an overflowing iteration (no PSD verdict on non-finite sites). The PSD flags
always describe the proposed state, whether or not it was accepted.

The state a diverged step returns is the *best* valid one seen (``state.Best``).

``Engine.step_pure`` reads as one iteration — propose (``propose_pure``), mix
(``_mixed``), global update, energy, judge (``_judge``), choose the next state
(``_next_state``), record (``_step_info``) — and each policy is its own method: the
step control ``_step_size``, ``_ascent_fell`` and ``_next_step_size``; Anderson
mixing ``_mixed``, ``_mixed_step_worse`` (the residual safeguard) and ``_next_history``;
the PD/finiteness rejection ``_validity``.

Everything is a pure function of (params, X, y, settings, state), so it jit-compiles
and vmaps over hyperparameters; the step's own branches (Anderson mixing, its residual
safeguard) are ``batch_axis.cond``, which a batched surface keeps as branches taken
for the whole batch rather than selects that run both. ``Engine`` objects are cached per (model structure,
method, cubature), so repeated calls reuse compiled code.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .. import cubature
from . import anderson
from .._runtime import exported
from .._runtime.compiled import CompiledCache
from .energies import energy as compute_energy
from .energies import energy_and_derivatives
from ..methods.base import LocalInput
from ..methods.registry import resolve
from ..posterior import global_update
from ..sites import (Marginals, Sites, damped_update, init_sites, initial_precision,
                     max_relative_change, min_eigenvalue, site_residual)
from ..linalg import dense
from ..linalg.small_blocks import inv_small
from ..results import Trace
from .state import Best, State, StepInfo, undamped_change
from .step_control import StepControl

__all__ = ["Engine", "get_engine", "trace_length"]


def _cavity_min_precision(marg: Marginals, sites: Sites, alpha):
    P = jax.vmap(inv_small)(marg.cov)
    return min_eigenvalue(P - alpha * sites.prec)


class _Verdict(NamedTuple):
    """What a step's judgement decided (``Engine._judge``)."""
    accepted: jnp.ndarray      # valid, not lower in the objective, passed the safeguard
    diverged: jnp.ndarray      # a plain step that is not PD or not finite: the run stops
    fell: jnp.ndarray          # rejected by the step control (the objective fell)
    finite_sites: jnp.ndarray  # the proposed sites are finite (the PSD flags need it)


class Engine(StepControl):
    """Compiled init / step / run for one (model, method, cubature) combination."""

    def __init__(self, model, method_name, rule_spec, options):
        self.model = model
        self.lik = model.likelihood
        #: what fixes the compiled code (``get_engine``'s key): its ``repr`` names the
        #: engine's programs across processes (``bnlab._runtime.exported``)
        self.key = (model.structure_key(), method_name, tuple(rule_spec), tuple(options))
        self.rule = cubature.make_rule(rule_spec[0], rule_spec[1], model.num_latents)
        self.method, local_options = resolve(method_name, **dict(options))
        self.local = self.method.make_local(self.lik, self.rule, **local_options)
        self.structure = global_update(model)
        self._marginals = self.structure.marginals
        nonnegative = (self.lik.log_concave and model.num_latents == 1
                       and self.method.nonnegative_if_log_concave)
        self.nonnegative_sites = nonnegative
        self.accelerated = self.method.mixing             # None, or a methods.Mixing
        # how ``State.best`` ranks iterates (module docstring)
        self.merit_kind = "elbo" if "vfe" in (self.method.energy, self.method.ascends) \
            else "residual"
        if nonnegative and self.structure.marginals_nonnegative is not None:
            self._marginals = self.structure.marginals_nonnegative
        # what each iteration needs: mean-only methods skip the marginal variances
        # (the returned state of ``run`` has them, computed once at the end)
        self._step_marginals = self._marginals
        self.mean_only = (self.method.mean_only
                          and self.structure.marginals_mean_only is not None)
        if self.mean_only:
            self._step_marginals = (self.structure.marginals_mean_only_nonnegative if nonnegative
                                    else self.structure.marginals_mean_only)
        self.init = self._exported("init", jax.jit(self.init_pure))
        self.propose = jax.jit(self.propose_pure)
        self._step = self._exported("step", jax.jit(self._step_without_prior))
        self._runs = {}          # trace length → jitted run_pure
        self.predict = self._exported("predict", jax.jit(self.predict_pure))
        self.log_predictive = self._exported("log_predictive", jax.jit(self.log_predictive_pure))

    def __repr__(self):
        return f"Engine{self.key!r}"

    def _exported(self, name, jitted):
        """``jitted``, called through its stored ``jax.export`` (``_runtime.exported``:
        a new process neither traces nor lowers it)."""
        def call(*args):
            return exported.call(jitted, (self, name), args)
        return call

    # -- pure functions (compose them under vmap / grad) --------------------------------
    def _alpha(self, settings):
        """α as a traced value for Power EP with a run-time α, else the Python number
        1.0, so that EP's site update and energy, and the EP energy of ep_like and PL,
        take a likelihood's closed form for α = 1 (probit: R&W eq. 3.82), not cubature."""
        return settings.alpha if self.method.uses_alpha else 1.0

    def _energy(self, params, y, marg, sites, settings):
        """(energy, objective, derivatives for the next local update or ()): the
        method's energy, the one it ascends (NaN if none) and, for the methods that
        reuse it, the derivatives from the pass of the ascended energy if any, else of
        the method's own ('ep_like': the ELBO's pass gives its CVI derivatives)."""
        m = self.method
        args = (self.lik, self.rule, params["likelihood"], y, marg, sites, self._alpha(settings))
        values, derivatives = {}, ()
        if m.reuses_energy_pass:
            kind = m.ascends or m.energy
            values[kind], derivatives = energy_and_derivatives(kind, *args)
        for kind in {m.energy, m.ascends} - {None} - set(values):
            values[kind] = compute_energy(kind, *args)
        return values[m.energy], values.get(m.ascends, jnp.asarray(jnp.nan)), derivatives

    def init_pure(self, params, X, y, settings, sites=None) -> State:
        """The state before the first step, at ``sites`` or ``cold_sites``."""
        prior = self.structure.prepare(self.model, params, X)
        if sites is None:
            sites = self.cold_sites(params, X.shape[0])
        return self.start_pure(params, y, settings, prior, sites)

    def cold_sites(self, params, num_data) -> Sites:
        """A cold start's sites (``init_sites``; traceable), at the likelihood's own site
        precision where it has one (``Likelihood.initial_site_precision``: a Gaussian's
        1/σ_n², so that the first posterior is no worse conditioned than the answer's;
        from 0.01 at σ² = 1e17 and σ_n² = 1e12 with inputs within 1e-3 lengthscales,
        I + 0.01K was singular to float64 and EP diverged with a NaN energy where the
        problem itself is well conditioned), else at ``sites.initial_precision`` of the
        largest prior variance. ``infer`` and every surface point start here."""
        own = self.lik.initial_site_precision(params["likelihood"])
        if own is None:
            own = initial_precision(jnp.max(jnp.stack(
                [kp["variance"] for kp in params["kernel"]])))
        return init_sites(num_data, self.model.num_latents, own)

    def _prior_scale(self, params, X):
        """The prior variance of each latent at each input, (N, D): the scale at which
        site changes are judged (``bnlab.sites.max_relative_change``)."""
        return jnp.diagonal(self.model.prior_variance(params, X), axis1=-2, axis2=-1)

    def start_pure(self, params, y, settings, prior, sites) -> State:
        """``init_pure`` from a prepared prior (``structure.prepare``): the starting
        state at ``sites`` (the batched surfaces restart a point from its prior)."""
        N = sites.nat1.shape[0]
        with dense.once():                   # once per run: compiled small, not unrolled
            marg = self._marginals(prior, sites)
        aux = self.method.init_aux(N, self.model.num_latents)
        energy, objective, derivatives = self._energy(params, y, marg, sites, settings)
        step_size = jnp.asarray(settings.rho, float)
        history = (anderson.empty(ravel_pytree(sites)[0].size, self.accelerated.depth)
                   if self.accelerated else ())
        iteration = jnp.asarray(0)
        merit = (self._elbo_merit(energy, objective) if self.merit_kind == "elbo"
                 else jnp.asarray(jnp.inf))
        best = Best(sites, marg, aux, energy, objective, derivatives, merit, iteration)
        return State(prior, sites, marg, aux, energy, objective, step_size, derivatives, history,
                     iteration, best)

    def _elbo_merit(self, energy, objective):
        """−ELBO: the energy where it is the ELBO, else the ascended objective (+∞ where
        NaN, so that a later valid iterate replaces it)."""
        merit = -(energy if self.method.energy == "vfe" else objective)
        return jnp.where(jnp.isnan(merit), jnp.inf, merit)

    def _with_best(self, state: State, residual) -> Best:
        """``state.best``, replaced by ``state`` where it is better: by the ELBO, or by
        ``residual`` (the undamped change of the step proposed from ``state``). NaN is
        never better."""
        merit = (self._elbo_merit(state.energy, state.objective) if self.merit_kind == "elbo"
                 else residual)
        candidate = Best(state.sites, state.marginals, state.aux, state.energy, state.objective,
                         state.derivatives, merit, state.iteration)
        better = merit < state.best.merit
        return jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), candidate,
                                      state.best)

    def propose_pure(self, params, X, y, settings, state: State):
        """The method's local updates and the damped site update (eq. 9), before the
        global update. Returns (proposed sites, new aux, per-site ok flags)."""
        marg, sites = state.marginals, state.sites
        N = y.shape[0]
        # α is shared by every site, not mapped: a non-PEP method then sees the Python
        # 1.0 of ``_alpha`` and EP's site update takes the same closed form as its energy
        reuse = self.method.reuses_energy_pass
        inp = LocalInput(params["likelihood"], y, marg.mean, marg.cov, marg.cond_var,
                         sites.nat1, sites.prec, self._alpha(settings),
                         jnp.broadcast_to(settings.rho, (N,)), state.aux,
                         state.derivatives if reuse else None, site_residual(marg, sites),
                         marg.share)
        axes = LocalInput(None, 0, 0, 0, 0, 0, 0, None, 0, 0, 0 if reuse else None, 0, 0)
        upd, aux = jax.vmap(self.local, in_axes=(axes,))(inp)
        proposal = damped_update(sites, upd.J, upd.H, upd.mean, settings.rho)
        keep = upd.ok
        new_sites = Sites(jnp.where(keep[:, None], proposal.nat1, sites.nat1),
                          jnp.where(keep[:, None, None], proposal.prec, sites.prec))
        return new_sites, aux, upd.ok

    # -- one iteration: step_pure and the policies it applies ---------------------------
    def step_pure(self, params, X, y, settings, state: State):
        """One iteration: propose the damped site update at ρ_k, mix it (``accelerate``),
        take the global update and the energy, judge the proposal, choose the next state
        and record the step. A step whose posterior is not PD (or that overflows) is
        rejected and the run diverges, returning the best iterate seen (``State.best``);
        under the step control a step that lowers the ELBO is rejected and the next one
        halved; a rejected Anderson-mixed step only clears the history (module
        docstring)."""
        rho = self._step_size(settings, state)
        at_rho = settings._replace(rho=rho)
        plain, aux, site_ok = self.propose_pure(params, X, y, at_rho, state)
        sites, mix = self._mixed(state, plain, settings)
        marg = self._step_marginals(state.prior, sites)
        sites, marg, search = self._searched(params, y, at_rho, state, sites, marg, mix)
        energy, objective, derivatives = self._energy(params, y, marg, sites, settings)
        proposal = State(state.prior, sites, marg, aux, energy, objective, rho, derivatives,
                         state.history)
        verdict = self._judge(params, X, y, at_rho, state, proposal, mix, search.mixed_fell)
        # the plain step's change: the residual at the current state, whichever step is
        # taken; a site whose local update failed (a singular tilted system, a cavity
        # that is not PD) keeps its old value, which is no evidence of a fixed point:
        # Poisson EP at counts of 1e4 refused every site and read as converged at once
        change = jnp.where(jnp.all(site_ok),
                           max_relative_change(state.sites, plain, self._prior_scale(params, X)),
                           jnp.inf)
        # a plain step the line search cannot shorten into an ascent of Ψ starts at Ψ's
        # mode to float64 (``line_search.search``): no change is left to make
        change = jnp.where(search.stalled, 0.0, change)
        undamped = undamped_change(change, settings.rho, rho)
        best = self._with_best(state, undamped)
        out = self._next_state(state, proposal, best, verdict,
                               self._next_history(state, mix, verdict.accepted),
                               self._next_step_size(rho, verdict.fell, mix.extrapolated))
        settled = search.settled & self._energy_settled(at_rho, state, energy)
        return out, self._step_info(settings, proposal, out, change, undamped, verdict, settled)

    # judging the proposal: validity (PD, finite) and the two rejection tests above
    def _validity(self, proposal: State):
        """(valid, finite_sites): the proposal's posterior is PD and its sites, mean and
        energy finite. A PD posterior can still have blown up (the heuristic fix bounds
        the site precisions, not the site means); −∞ energies are legitimate, NaN are
        not."""
        sites = proposal.sites
        finite_sites = jnp.all(jnp.isfinite(sites.nat1)) & jnp.all(jnp.isfinite(sites.prec))
        finite = (finite_sites & jnp.all(jnp.isfinite(proposal.marginals.mean))
                  & ~jnp.isnan(proposal.energy))
        return proposal.marginals.psd & finite, finite_sites

    def _judge(self, params, X, y, settings, state: State, proposal: State, mix,
               mixed_fell) -> _Verdict:
        """Whether the proposal is accepted: valid, not lower in the ascended objective
        (``_ascent_fell``) and, if mixed, passing the residual safeguard
        (``_mixed_step_worse``) and not lowering Ψ (``mixed_fell``, ``_searched``). An
        invalid plain step diverges the run; an invalid mixed one is only rejected.
        ``settings`` carries ρ_k."""
        valid, finite_sites = self._validity(proposal)
        invalid = ~valid
        diverged = invalid & ~mix.extrapolated      # a failed extrapolation is only rejected
        fell = self._ascent_fell(settings, state, proposal, invalid)
        worse = mixed_fell | self._mixed_step_worse(params, X, y, settings, proposal, mix,
                                                    invalid)
        return _Verdict(~invalid & ~fell & ~worse, diverged, fell, finite_sites)

    def _next_state(self, state: State, proposal: State, best: Best, verdict: _Verdict,
                    history, step_size) -> State:
        """The state after the step: each field a step changes is the proposal's where it
        was accepted, the best iterate's where the run diverged (module docstring), else
        the current one (a rejected step keeps its iterate and iteration number). The
        prior passes through untouched (a select over it would copy the N×N factors
        every step)."""
        accepted, diverged = verdict.accepted, verdict.diverged

        def keep(new, old, at_best):
            return jax.tree_util.tree_map(
                lambda a, b, c: jnp.where(accepted, a, jnp.where(diverged, c, b)),
                new, old, at_best)
        return State(state.prior, keep(proposal.sites, state.sites, best.sites),
                     keep(proposal.marginals, state.marginals, best.marginals),
                     keep(proposal.aux, state.aux, best.aux),
                     keep(proposal.energy, state.energy, best.energy),
                     keep(proposal.objective, state.objective, best.objective), step_size,
                     keep(proposal.derivatives, state.derivatives, best.derivatives), history,
                     keep(state.iteration + 1, state.iteration, best.iteration), best)

    def _step_info(self, settings, proposal: State, out: State, change, undamped,
                   verdict: _Verdict, settled) -> StepInfo:
        """The step's trace record. Its PSD flags and minimum site/cavity precisions are
        the proposed state's (what a rejection was about); its energy the next state's,
        NaN where the run diverged; ``converged``: accepted with an undamped change
        below ``tol`` (module docstring), the energy ``settled``
        (``state.energy_settled``) and, for the line-searched methods, Ψ too
        (``_searched``)."""
        sites, marg, finite_sites = proposal.sites, proposal.marginals, verdict.finite_sites
        if self.mean_only:           # these methods have no cavity (nor was C computed)
            cavity_ok, min_cavity = jnp.asarray(True), jnp.asarray(jnp.nan)
        else:
            cav = _cavity_min_precision(marg, sites, self._alpha(settings))
            # like posterior_psd: no verdict on non-finite sites
            cavity_ok, min_cavity = jnp.all(cav > 0) | ~finite_sites, jnp.min(cav)
        return StepInfo(
            energy=jnp.where(verdict.diverged, jnp.nan, out.energy),
            step_size=proposal.step_size,
            max_change=change,
            posterior_psd=marg.psd | ~finite_sites,    # False: finite sites, not PD
            cavity_psd=cavity_ok,
            min_site_precision=jnp.min(min_eigenvalue(sites.prec)),
            min_cavity_precision=min_cavity,
            accepted=verdict.accepted, diverged=verdict.diverged,
            converged=verdict.accepted & (undamped < settings.tol) & settled)

    def step(self, params, X, y, settings, state: State):
        """Jitted ``step_pure``. The prior passes through a step unchanged, and returning
        it from the compiled call would copy its N×N factors, so the call leaves it out
        and it is put back here."""
        out, info = self._step(params, X, y, settings, state)
        return out._replace(prior=state.prior), info

    def _step_without_prior(self, params, X, y, settings, state: State):
        out, info = self.step_pure(params, X, y, settings, state)
        return out._replace(prior=None), info

    def run(self, params, X, y, settings, max_iters: int, sites=None):
        """Jitted ``run_pure``. ``max_iters`` is a run-time value: one compiled program
        serves every max_iters up to its trace length (``trace_length``)."""
        length = trace_length(max_iters)
        if length not in self._runs:
            self._runs[length] = self._exported(
                f"run{length}", jax.jit(functools.partial(self.run_pure, trace_length=length)))
        return self._runs[length](params, X, y, settings, jax.device_put(int(max_iters)), sites)

    def run_pure(self, params, X, y, settings, max_iters, sites=None, trace_length=None):
        """Iterate to convergence (or max_iters, or divergence: then ``state`` is the best
        iterate, ``state.iteration`` says which). Returns
        (state, trace, n_iters, converged, diverged); the trace has ``trace_length``
        (default: max_iters, which must then be a Python int) entries, NaN after n."""
        state0 = self.init_pure(params, X, y, settings, sites)
        length = int(max_iters) if trace_length is None else trace_length
        nan = jnp.full(length, jnp.nan)
        false = jnp.zeros(length, dtype=bool)
        trace0 = Trace(nan, nan, nan, false, false, nan, nan, false)

        def cond(carry):
            _, _, i, converged, diverged = carry
            return (i < max_iters) & ~converged & ~diverged

        def body(carry):
            state, trace, i, _, _ = carry
            state, info = self.step_pure(params, X, y, settings, state)
            trace = Trace(*(t.at[i].set(getattr(info, f)) for t, f in zip(trace, Trace._fields)))
            return state, trace, i + 1, info.converged, info.diverged

        carry = (state0, trace0, jnp.asarray(0), jnp.asarray(False), jnp.asarray(False))
        state, trace, n, converged, diverged = jax.lax.while_loop(cond, body, carry)
        if self.mean_only:
            with dense.once():
                state = state._replace(marginals=self._marginals(state.prior, state.sites))
        return state, trace, n, converged, diverged

    def predict_pure(self, params, X, state: State, Xs):
        """Latent predictive mean (Ns, D) and covariance blocks (Ns, D, D)."""
        return self.structure.predict(self.model, params, X, state.prior, state.sites,
                                      state.marginals, Xs)

    def log_predictive_pure(self, params, X, state: State, Xs, ys):
        """log ∫ p(y*|f*) q(f*) df* per test point."""
        mean, cov = self.predict_pure(params, X, state, Xs)
        return jax.vmap(lambda y_, m, C: self.lik.log_predictive(
            params["likelihood"], y_, m, C, self.rule))(ys, mean, cov)


def trace_length(max_iters: int) -> int:
    """Compiled trace length for a run of at most ``max_iters`` iterations: 256 (the
    usual limits share one compiled program), else the next power of two."""
    return max(256, 1 << (int(max_iters) - 1).bit_length())


_ENGINES = CompiledCache(maxsize=48)


def get_engine(model, method_name, rule_spec=("gauss_hermite", 20), options=()):
    """The cached engine: models with the same structure (kernel types, likelihood type
    and link) share compiled code, since every number lives in ``params``."""
    key = (model.structure_key(), method_name, tuple(rule_spec), tuple(sorted(options)))
    return _ENGINES.get(key, lambda: Engine(model, method_name, tuple(rule_spec),
                                            tuple(sorted(options))))
