"""The MCMC reference for the live view: posterior band and samples of latent pairs
from ``bnlab.mcmc`` (the gold standard), with the numbers that say how far to trust
it: log p(y) as the interval bidirectional Monte Carlo gives (forward AIS's lower and
reverse AIS's upper estimate, two standard errors out) and whether it is narrower than
``bnlab.mcmc.GAP_TOLERANCE``, the split-R̂ and bulk ESS of the β = 1 chains, and the
AIS weights' effective sample size."""
from __future__ import annotations

import threading

import numpy as np


#: below this effective sample size the band is flagged as rough
MIN_ESS = 100
#: the default schedule (chains × temperatures × ESS moves per temperature), and how a
#: repeated request on the same problem refines it: four times the temperatures, up
#: to MAX_TEMPS (AIS's log-weight variance falls roughly as 1 / temperatures)
NUM_CHAINS, NUM_TEMPS, STEPS_PER_TEMP, REFINE, MAX_TEMPS = 256, 1000, 2, 4, 16_000


def schedule_ladder() -> tuple[int, ...]:
    """Every schedule the lab runs (temperatures): the default, then each refinement of
    the one before (``next_schedule``), up to MAX_TEMPS."""
    ladder = [NUM_TEMPS]
    while ladder[-1] < MAX_TEMPS:
        ladder.append(min(ladder[-1] * REFINE, MAX_TEMPS))
    return tuple(ladder)


class MCMCReference:
    """Holds MCMC samples of the latent values at the training inputs for one problem.
    The samples depend only on the data, the model's prior and likelihood and the
    hyperparameters (``problem_key``), so the live view keeps them while only the
    method, α or ρ change."""

    def __init__(self):
        # the pages read the samples while the Live page may replace or drop them (in
        # another thread); reentrant: ``truth_for`` reads the band under it
        self._lock = threading.RLock()
        self.clear()

    def clear(self):
        with self._lock:
            self.samples = None       # (S, N) samples of f₁ at the training inputs
            self.x = self.key = None
            self.num_temps = None

    @staticmethod
    def problem_key(problem) -> str:
        """What the exact posterior depends on (``bnlab.mcmc.posterior_key``): data, the
        exact model AIS samples (a sparse or Markov model's full GP), hyperparameters."""
        from bnlab import mcmc
        return mcmc.posterior_key(problem.model, problem.X, problem.y, problem.params)

    def holds(self, problem) -> bool:
        """Whether the samples held are of ``problem``'s posterior."""
        with self._lock:
            return self.samples is not None and self.key == self.problem_key(problem)

    def keep_for(self, problem) -> bool:
        """Keep the samples if they belong to ``problem``'s posterior, else drop them."""
        if self.holds(problem):
            return True
        self.clear()
        return False

    def truth_for(self, problem) -> dict | None:
        """What another page overlays as the truth for ``problem``: the band, log p(y) ±
        its standard error and the weighted samples, if the samples held are of this
        problem's posterior (else None; nothing is dropped)."""
        with self._lock:
            if not self.holds(problem):
                return None
            return {"band": self.band(), "log_z": self.log_z, "log_z_se": self.log_z_se,
                    "log_z_upper": self.log_z_upper, "log_z_upper_se": self.log_z_upper_se,
                    "interval": self.interval, "converged": self.converged,
                    "samples": self.samples, "weights": self.weights, "ess": self.ess,
                    "num_chains": self.num_chains, "num_temps": self.num_temps}

    def next_schedule(self, problem) -> int:
        """The number of temperatures of the next run: the default, or a refinement of
        a run on the same problem that is rough (weights' ESS below ``MIN_ESS``) or not
        resolved (its interval wider than the tolerance)."""
        if not self.holds(problem):
            return NUM_TEMPS
        if self.ess >= MIN_ESS and self.converged:
            return self.num_temps
        return min(self.num_temps * REFINE, MAX_TEMPS)

    def compute(self, problem, num_temps=None, num_chains=NUM_CHAINS,
                steps_per_temp=STEPS_PER_TEMP, seed=0, tolerance=None, start="ep"):
        """Bidirectional Monte Carlo with elliptical-slice transitions
        (``bnlab.mcmc.ais``, annealed from ``start``): weighted posterior samples of the
        latents and log p(y)'s interval."""
        from bnlab import mcmc
        num_temps = self.next_schedule(problem) if num_temps is None else int(num_temps)
        res = mcmc.ais(problem.model, problem.X, problem.y, params=problem.params,
                       num_temps=num_temps, num_chains=num_chains,
                       steps_per_temp=steps_per_temp, seed=seed, start=start,
                       tolerance=mcmc.GAP_TOLERANCE if tolerance is None else tolerance)
        D = problem.model.num_latents
        f = np.asarray(res.samples)[:, ::D]                  # latent f₁ at each input
        logw = np.asarray(res.log_weights, float)
        w = np.exp(logw - logw.max())
        key = self.problem_key(problem)
        with self._lock:
            self.weights = w / w.sum()
            self.samples, self.x = f, problem.x_plot
            self.log_z, self.log_z_se, self.ess = res.log_z, res.log_z_se, res.ess
            self.log_z_upper, self.log_z_upper_se = res.log_z_upper, res.log_z_upper_se
            self.interval, self.converged = res.interval, res.converged
            self.tolerance, self.rhat, self.bulk_ess = res.tolerance, res.rhat, res.bulk_ess
            self.num_temps, self.num_chains = num_temps, num_chains
            self.started_from = res.started_from
            self.key = key

    def summary_html(self) -> str:
        """Beside the band: log p(y)'s interval and its verdict, the two AIS estimates
        ± their standard errors, the weights' ESS of chains and the β = 1 chains' R̂ and
        bulk ESS; a warning when the ESS is below ``MIN_ESS`` (numbers only: nothing
        user-typed)."""
        if self.samples is None:
            return ""
        lo, hi = self.interval
        longer = min(self.num_temps * REFINE, MAX_TEMPS)
        again = (f"press “MCMC reference” again for {longer} temperatures"
                 if self.num_temps < MAX_TEMPS else
                 f"{MAX_TEMPS} temperatures is the most the lab runs; this posterior is "
                 "too far from AIS's start here")
        line = (f"MCMC reference (bidirectional AIS from {self.started_from}, "
                f"{self.num_chains} chains × "
                f"{self.num_temps} temperatures): log p(y) ∈ <b class='bn-interval'>"
                f"[{lo:.3f}, {hi:.3f}]</b> (forward AIS: log p(y) ≈ <b>{self.log_z:.3f}</b>"
                f" ± {self.log_z_se:.3f}; reverse AIS ≈ {self.log_z_upper:.3f} ± "
                f"{self.log_z_upper_se:.3f}; standard errors) · effective sample size "
                f"<b class='bn-ess'>{self.ess:.0f}</b> of {self.num_chains} (weights) · "
                f"posterior chains: split-R̂ {self.rhat:.3f}, bulk ESS {self.bulk_ess:.0f}<br>")
        if self.converged:
            line += (f"<span class='bn-resolved'>Resolved: the interval is {hi - lo:.3f} "
                     f"nats wide (tolerance {self.tolerance:g}), so gaps to the "
                     "approximations larger than that are real.</span>")
        else:
            line += (f"<span class='bn-warn'>Not resolved: the interval is {hi - lo:.3f} "
                     f"nats wide (tolerance {self.tolerance:g}), so smaller gaps to the "
                     f"approximations are not settled; {again}.</span>")
        if self.ess < MIN_ESS:
            line += (f"<br><span class='bn-warn'>⚠ ESS below {MIN_ESS}: a few chains carry "
                     "most of the weight, so the band and the standard error are rough "
                     f"(the error is likely underestimated); {again}.</span>")
        return line

    def band(self):
        with self._lock:
            if self.samples is None:
                return None
            order = np.argsort(self.x)
            m = self.weights @ self.samples
            sd = np.sqrt(np.maximum(self.weights @ (self.samples - m) ** 2, 0.0))
            m, sd = m[order], sd[order]
            return {"x": self.x[order], "mean": m, "lower": m - 2 * sd, "upper": m + 2 * sd}

    def pair(self, i: int, j: int):
        with self._lock:
            if self.samples is None:
                return None
            draws = np.random.default_rng(0).choice(len(self.weights), 400, p=self.weights)
            return self.samples[draws][:, [i, j]]
