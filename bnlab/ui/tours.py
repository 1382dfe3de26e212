"""Guided tours: the demos the lab exists for, as narrated sequences of steps.

A tour is data: each step is a short text, the sidebar settings it applies (every
``URL_PARAMS`` setting, from its default, the tour's base and the step's own values, so
a step looks the same whatever the user changed in between), the page to show, values
for that page's own controls, and actions to perform on arrival (compute the MCMC
reference, run, sweep α …). ``?tour=<key>`` in the page URL opens one (``&step=<k>``
at its k-th step); the ``tour_panel.TourPanel`` above the pages shows the text with
Back / Next / Exit, and the user may play with every control between steps.

Every claim a step's text makes was checked on these settings with the engine (see
``tests/ui/test_ui_tours.py``, which re-checks the ones a change of the engine could
break)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .settings import URL_PARAMS, LabSettings

#: what a step may do on arrival, each a call on the session's ``Lab`` given a
#: ``cancelled()`` test (true once another step was asked for)
ACTIONS = {
    # the reference of this problem if the session does not hold it yet (a second press
    # would refine a rough one: a tour's step only asks for it to be shown)
    "mcmc": lambda lab, cancelled: lab.live.mcmc.samples is None and lab.live.compute_mcmc(),
    # the converged picture at once; the tour's Replay button animates the iterations
    "run": lambda lab, cancelled: lab.live.solve(cancelled),
    "pair": lambda lab, cancelled: lab.compare.run_pair(),
    "sweep": lambda lab, cancelled: lab.compare.run_sweep(),
    "surface": lambda lab, cancelled: lab.surfaces.compute(),
}
TABS = ("Live", "Compare", "Surfaces", "About")


@dataclass(frozen=True)
class Step:
    """One stop of a tour: ``text`` (Markdown), ``settings`` (sidebar values on top of
    the tour's base), ``tab`` (the page shown), ``page`` (that page's own controls,
    {parameter or widget name: value}) and ``actions`` (``ACTIONS`` keys, in order)."""
    text: str
    settings: Mapping = field(default_factory=dict)
    tab: str = "Live"
    page: Mapping = field(default_factory=dict)
    actions: tuple = ()

    def __post_init__(self):
        if self.tab not in TABS:
            raise ValueError(f"unknown tab {self.tab!r}; the lab's pages are {TABS}")
        unknown = [a for a in self.actions if a not in ACTIONS]
        if unknown:
            raise ValueError(f"unknown tour action(s) {unknown}; known: {sorted(ACTIONS)}")
        bad = set(self.settings) - set(URL_PARAMS)
        if bad:
            raise ValueError(f"a tour sets only the lab's URL settings; not {sorted(bad)}")


@dataclass(frozen=True)
class Tour:
    key: str                      # the ?tour= value
    title: str
    summary: str                  # one line for the list of tours
    base: Mapping                 # settings every step starts from
    steps: tuple = field(default_factory=tuple)

    def settings(self, k: int) -> dict:
        """Every URL setting at step ``k``: defaults, then the base, then the step."""
        values = {p: LabSettings.param[p].default for p in URL_PARAMS}
        values.update(self.base)
        values.update(self.steps[k].settings)
        return values


_MCMC = ("The dashed band, “MCMC ± 2σ”, is the **MCMC reference** (annealed importance sampling "
         "with elliptical slice sampling): the exact posterior up to Monte-Carlo error.")

_SEPARATED = {"dataset": "separated_1d", "likelihood": "probit", "kernel": "matern52",
              "lengthscale": 2.0, "variance": 100.0, "rho": 0.5}

ALPHA = Tour(
    key="alpha", title="α from VI to EP",
    summary="Power EP's α moves the approximation from variational inference (α → 0) to "
            "EP (α = 1), with MCMC as truth.",
    base=_SEPARATED,
    steps=(
        Step("**Power EP, α = 10⁻³**: next to its α → 0 limit, variational inference "
             "(the Gaussian q that maximises the ELBO; choose method vi to see it: the "
             "energy agrees to a few thousandths). The data: two separated classes, "
             "probit likelihood, signal variance σ² = 100, so each latent's posterior is "
             "strongly skewed. " + _MCMC + " This band is the narrowest of the tour: "
             "minimising KL(q‖p) makes q under-cover.", {"method": "pep", "alpha": 0.001},
             actions=("run", "mcmc")),
        Step("**Power EP, α = 0.25**: each site is fitted to the α-th power of its "
             "likelihood term. The band widens a little towards MCMC's, and the energy "
             "(status line) rises above VI's ELBO.", {"method": "pep", "alpha": 0.25},
             actions=("run", "mcmc")),
        Step("**Power EP, α = 0.5**: wider again, higher energy.",
             {"method": "pep", "alpha": 0.5}, actions=("run", "mcmc")),
        Step("**Power EP, α = 0.75**.", {"method": "pep", "alpha": 0.75},
             actions=("run", "mcmc")),
        Step("**EP** (α = 1): moment matching of each tilted distribution (KL(p‖q) "
             "locally). The widest band of the family, the closest to MCMC's (still about "
             "15 % narrower here), and the "
             "highest energy, the closest to MCMC's log p(y) in the status line. The "
             "means hardly move with α: on these data α changes the spread.",
             {"method": "ep"}, actions=("run", "mcmc")),
        Step("**The α explorer** (Compare page) runs Power EP to convergence at 21 values "
             "of α from 10⁻³ to 1, all at once: the converged energy against α, rising "
             "from VI's ELBO (dashed) to EP's, below MCMC's log p(y) (the solid line); under "
             "it VI's and EP's bands as outlines and the slider's α filled between them — "
             "move the slider, or press ▶ to play α from VI to EP — and MCMC's; last, at "
             "one data point, q(fᵢ) against the tilted distribution and MCMC's marginal "
             "(histogram).", {"method": "pep", "alpha": 0.5}, tab="Compare",
             page={"alpha_slider": 0.5, "pair_open": False}, actions=("mcmc", "sweep")),
    ))

SKEWED = Tour(
    key="skewed", title="Laplace, VI and EP on a skewed posterior",
    summary="Probit classification with separated classes: Laplace's mode-centred "
            "Gaussian against VI and EP, with MCMC as truth.",
    base=_SEPARATED,
    steps=(
        Step("**Laplace**: a Gaussian at the posterior's mode with the curvature there. "
             "The classes are separated, so each latent's posterior is skewed away from "
             "the boundary, with a long tail the mode does not see: Laplace's mean stays "
             "far too close to zero. " + _MCMC, {"method": "laplace"},
             actions=("run", "mcmc")),
        Step("**VI**: the best Gaussian in KL(q‖p). Its mean moves out to MCMC's; its "
             "band stays narrower.", {"method": "vi"}, actions=("run", "mcmc")),
        Step("**EP**: moment matching. About VI's mean, and a band wider than VI's, "
             "closer to MCMC's.",
             {"method": "ep"}, actions=("run", "mcmc")),
        Step("**Side by side** (Compare page): Laplace against EP run to convergence, the "
             "bands overlaid with MCMC's and their energies (Laplace's is the "
             "lower) against MCMC's log p(y); pick other methods A and B to compare.",
             {"method": "ep"}, tab="Compare",
             page={"method_a": "laplace", "method_b": "ep", "pair_open": True},
             actions=("mcmc", "pair")),
    ))

CAVITIES = Tour(
    key="cavities", title="When EP's cavities lose positive-definiteness",
    summary="Student-t regression with outliers: undamped EP (ρ = 1) needs a cavity that "
            "is not a Gaussian; damping, the Riemannian and the heuristic fixes keep it.",
    base={"dataset": "robust_1d", "likelihood": "student_t", "df": 4.0, "lik_scale": 0.1,
          "kernel": "matern52", "lengthscale": 1.0, "variance": 1.0},
    steps=(
        Step("**Undamped EP** (ρ = 1) on regression data with 10 % gross outliers and a "
             "Student-t likelihood (ν = 4). The Student-t is not log-concave, so sites may "
             "take negative precisions, and here a cavity (the posterior with one site "
             "removed) ends up with negative variance: the next step's energy is undefined. The status line reports the "
             "divergence and the PSD strip turns red in the cavity row.",
             {"method": "ep", "rho": 1.0}, actions=("run",)),
        Step("**Damping** (ρ = 0.5): each site moves only half-way to its EP update. "
             "Every cavity stays positive definite and EP converges.",
             {"method": "ep", "rho": 0.5}, actions=("run",)),
        Step("**Riemannian correction** (pep_riemann with α = 1, undamped): the site "
             "update follows the Riemannian gradient, whose step keeps the precision "
             "positive definite. It converges at ρ = 1, to nearly the same energy as damped "
             "EP but not the same: EP's fixed point has a few negative site precisions, "
             "which this path, keeping every one positive, cannot reach.",
             {"method": "pep_riemann", "alpha": 1.0, "rho": 1.0}, actions=("run",)),
        Step("**Heuristic fix** (base pep with α = 1, undamped): negative site precisions "
             "are clipped on the diagonal. It also converges at ρ = 1, within about 10⁻³ "
             "of EP's energy like the Riemannian step; both move the fixed point, this one "
             "by changing its equations (a clipped precision is no longer EP's update).",
             {"method": "heuristic", "base": "pep", "alpha": 1.0, "rho": 1.0},
             actions=("run",)),
    ))

SPARSE = Tour(
    key="sparse", title="Sparse: FITC (α = 1) to VFE (α → 0)",
    summary="Power EP on a sparse GP with few inducing points: α = 1 is FITC, α → 0 is "
            "the variational free energy (VFE).",
    base={"dataset": "regression_1d", "likelihood": "gaussian",
          "kernel": "matern52", "lengthscale": 1.0, "variance": 1.0, "model": "sparse",
          "num_inducing": 5, "rho": 0.5},
    steps=(
        Step("**FITC**: Power EP with α = 1 on a sparse GP with only M = 5 inducing "
             "points (Bui, Yan & Turner 2017) — Gaussian regression, so each run takes a "
             "few iterations. Note the energy in the status line.",
             {"method": "ep"}, actions=("run",)),
        Step("**α = 0.5**: between FITC and VFE; the energy drops.",
             {"method": "pep", "alpha": 0.5}, actions=("run",)),
        Step("**α = 0.01**: close to the variational limit; the energy is near VFE's.",
             {"method": "pep", "alpha": 0.01}, actions=("run",)),
        Step("**VI** on the sparse model is VFE (Titsias 2009): its energy is a lower "
             "bound on log p(y), the lowest of these four.", {"method": "vi"},
             actions=("run",)),
        Step("**The α explorer** on the sparse model: the converged energy rises from VFE "
             "(dashed) to FITC (α = 1). Set M = 8 in the sidebar and sweep again: with "
             "more inducing points the two ends come close together.",
             {"method": "pep", "alpha": 0.5}, tab="Compare",
             page={"alpha_slider": 0.5, "pair_open": False},
             actions=("sweep",)),
    ))

SURFACE = Tour(
    key="surface", title="The marginal-likelihood surface and its MCMC truth",
    summary="Each method's log p(y | θ) over (signal variance, lengthscale), with the MCMC "
            "surface's contours dashed on top.",
    base={"dataset": "classification_1d", "likelihood": "probit", "kernel": "matern52",
          "rho": 0.5},
    steps=(
        Step("**Surfaces**: each method's approximation of log p(y | θ)/n on a 7 × 7 grid "
             "of signal variance (rows) and lengthscale (columns), MCMC's (AIS) surface "
             "beside them, each argmax a red ×. The first computation takes a few "
             "minutes (MCMC is cached on disk for the next visitor). Here all four pick "
             "the same cell; at the × Laplace lies lowest, then VI, then EP, and MCMC "
             "above them (the slice below runs through the ×). MCMC's log p(y) is an "
             "interval: forward AIS bounds it from below, reverse AIS from above, both "
             "annealed from EP's posterior to the exact one. At most cells that interval "
             "is narrower than the gaps between the methods, a few thousandths per "
             "point, so their order is settled; where it is too wide to order them "
             "(large signal variance with short lengthscales, where the posterior is "
             "most skewed), MCMC's panel is grey and its dashed contour, drawn on the "
             "other panels elsewhere, is left out; the line under the panels counts "
             "those cells, which a longer MCMC schedule narrows. Add a learning "
             "trajectory to see where each method's hyperparameter optimisation ends.",
             tab="Surfaces",
             page={"axis0": "variance", "lo0": 0.3, "hi0": 30.0, "axis1": "lengthscale",
                   "lo1": 0.3, "hi1": 5.0, "points": 7,
                   "methods": ["laplace", "vi", "ep", "mcmc"]},
             actions=("surface",)),
    ))

TOURS = {t.key: t for t in (ALPHA, SKEWED, CAVITIES, SPARSE, SURFACE)}


def tour_list_markdown() -> str:
    """The About page's list of tours, each a link that opens it."""
    return "### Guided tours\n" + "\n".join(
        f"* [{t.title}](?tour={t.key}) — {t.summary}" for t in TOURS.values())
