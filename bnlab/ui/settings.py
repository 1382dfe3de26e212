"""The lab's settings as one ``param.Parameterized`` object.

Every control of the app is a parameter here, so the state can be tested without a
browser, synchronised with the page URL, and copied between sessions. ``reasons()``
says which controls are meaningless or impossible for the current combination and why
(the app disables them and shows the reason)."""
from __future__ import annotations

import param

from bnlab.gkl import COVARIANCES
from bnlab.methods import DIRECT, REGISTRY, takes_alpha, takes_base

from . import catalog
from .presets import preset_changes


#: the covariance structures whose size is a rank K (the sidebar's band control)
RANKED_STRUCTURES = ("chevron", "subspace", "factor_analysis")


def step_controlled() -> tuple[list, list]:
    """The methods whose step the step control shortens, read from their records when
    asked (registered methods included): (those whose iteration ascends the ELBO,
    those with a line search on Laplace's Ψ, ``bnlab.engine.line_search``)."""
    return (sorted(n for n, m in REGISTRY.items() if m.ascends == "vfe"),
            sorted(n for n, m in REGISTRY.items() if m.line_search))


def accelerated() -> dict:
    """{method: ``Mixing``} of the methods Anderson acceleration may mix, from their
    records."""
    return {n: m.mixing for n, m in REGISTRY.items() if m.mixing is not None}


#: the control that sets each likelihood hyperparameter (a key of the likelihood's
#: ``init_params()``): a likelihood whose hyperparameters are among these needs no UI edit
LIKELIHOOD_CONTROLS = {"noise": "lik_scale", "scale": "lik_scale", "df": "df"}


#: parameters written to / read from the page URL (a teacher's shareable link)
URL_PARAMS = ("dataset", "n", "likelihood", "kernel", "lengthscale", "variance", "period",
              "lik_scale", "df", "model", "num_inducing", "method", "base", "alpha", "rho",
              "backtrack", "accelerate", "covariance", "band", "cubature_order", "speed",
              "max_iters")


class LabSettings(param.Parameterized):
    dataset = param.Selector(default="classification_1d", objects=list(catalog.DATASETS))
    n = param.Integer(default=0, bounds=(0, 2000),
                      doc="number of synthetic points before the train/test split (0: preset size)")
    likelihood = param.Selector(default="auto", objects=list(catalog.likelihood_choices()))
    kernel = param.Selector(default="matern52", objects=list(catalog.KERNELS))
    lengthscale = param.Number(default=1.0, bounds=(1e-3, 1e3), softbounds=(0.05, 20))
    variance = param.Number(default=1.0, bounds=(1e-4, 1e5), softbounds=(0.05, 20))
    period = param.Number(default=2 * 3.14159, bounds=(1e-2, 1e3), softbounds=(0.5, 20))
    lik_scale = param.Number(default=0.1, bounds=(1e-4, 1e3), softbounds=(0.01, 2),
                             doc="noise variance (Gaussian, product) or scale (Student-t, Laplace)")
    df = param.Number(default=4.0, bounds=(0.5, 100), softbounds=(1, 30))
    model = param.Selector(default="full", objects=list(catalog.MODELS))
    num_inducing = param.Integer(default=20, bounds=(2, 500))
    method = param.Selector(default="vi", objects=list(catalog.methods()))
    base = param.Selector(default="vi", objects=list(catalog.BASES))
    alpha = param.Number(default=0.5, bounds=(0.001, 1.0))
    rho = param.Number(default=0.5, bounds=(0.01, 1.0))
    backtrack = param.Boolean(default=True, doc="reject a step that lowers the ELBO and "
                              "halve ρ (the methods that ascend it: vi, vi_riemann, ep_like)")
    accelerate = param.Boolean(default=True, doc="Anderson-mix the site updates (same "
                               "fixed point, fewer iterations; off: the papers' iteration)")
    covariance = param.Selector(default="full", objects=list(COVARIANCES))
    band = param.Integer(default=5, bounds=(1, 200))
    cubature_order = param.Integer(default=20, bounds=(2, 60))
    speed = param.Number(default=10.0, bounds=(1.0, 60.0), doc="iterations per second")
    max_iters = param.Integer(default=1000, bounds=(1, 100_000),
                              doc="iteration cap: a run that has neither converged nor "
                              "diverged by then stops and says so")
    csv_text = param.String(default="", precedence=-1, doc="the uploaded CSV (not in the URL)")

    def __init__(self, **params):
        # the methods and likelihoods there are now (``register`` or an entry added to
        # ``bnlab.likelihoods.LIKELIHOODS`` since import included)
        choices = {"method": list(catalog.methods()),
                   "likelihood": list(catalog.likelihood_choices())}
        chosen = {name: params.pop(name) for name in choices if name in params}
        super().__init__(**params)
        for name, objects in choices.items():
            self.param[name].objects = objects
        self.param.update(**chosen)
        self._pinned = frozenset()
        self.param.watch(self._on_dataset, list(URL_PARAMS) + ["csv_text"])

    def _on_dataset(self, *events):
        """A newly chosen data set brings its preset (``presets.PRESETS``), except for
        the settings changed together with it."""
        changed = {e.name: e for e in events}
        if "dataset" not in changed:
            return
        ev = changed["dataset"]
        defaults = {k: self.param[k].default for k in URL_PARAMS}
        changes = preset_changes(ev.old, ev.new, self.url_state(), defaults,
                                 keep=set(changed) | self._pinned)
        if changes:
            self.param.update(**changes)

    def apply_link(self, values: dict):
        """Set a link's values at once; a data set in it brings its preset only for
        the settings the link does not name."""
        self._pinned = frozenset(values)
        try:
            self.param.update(**values)
        finally:
            self._pinned = frozenset()

    # -- derived -------------------------------------------------------------------
    def resolved_likelihood(self, dataset_likelihood: str | None = None) -> str:
        if self.likelihood != "auto":
            return self.likelihood
        lik = dataset_likelihood or _preset_likelihood(self.dataset)
        return catalog.DATASET_LIKELIHOOD.get(lik, lik)

    def effective_alpha(self) -> float:
        return float(self.alpha) if self.takes_alpha() else 1.0

    def method_options(self) -> tuple:
        if takes_base(self.method):
            return (("base", self.base),)
        return ()

    def structured(self) -> bool:
        """Whether the sidebar's method takes a covariance structure (a direct family
        whose record lists the option, ``bnlab.methods.DIRECT``)."""
        return self.method in DIRECT and "covariance" in DIRECT[self.method].options

    def direct_options(self) -> dict:
        """The covariance structure's options for a direct family: the structure, and
        the sidebar's band as the band B (banded) or the rank K (chevron, subspace,
        factor analysis)."""
        cov = self.covariance
        return {"covariance": cov, "band": self.band if cov == "banded" else None,
                "rank": self.band if cov in RANKED_STRUCTURES else None}

    def options_for(self, method: str) -> tuple:
        """The options ``method`` runs with in the lab: the sidebar's (the heuristic
        fix's base) for the sidebar's own method, the defaults for any other (Compare's
        pair, the surfaces)."""
        return self.method_options() if method == self.method else ()

    def takes_alpha(self, method: str | None = None) -> bool:
        """Whether α is a setting of ``method`` (default the sidebar's) as the lab runs
        it: its record's ``uses_alpha`` (``bnlab.methods.takes_alpha``)."""
        method = self.method if method is None else method
        return takes_alpha(method, **dict(self.options_for(method)))

    def reasons(self, input_dim: int = 1) -> dict:
        """{parameter name: why it is disabled} for the current combination."""
        out = self._likelihood_reasons()
        if not self.takes_alpha():
            with_alpha = [n for n in REGISTRY if takes_alpha(n)]
            out["alpha"] = (f"α is the Power-EP power: only for {', '.join(with_alpha)} "
                            "(ep is α = 1)")
        if not takes_base(self.method):
            out["base"] = "only for the heuristic PSD fix"
        if self.method in DIRECT:
            out["rho"] = f"{self.method} optimises (m, C) directly: there is no site damping"
        if not self.structured():
            with_structure = [n for n, d in DIRECT.items() if "covariance" in d.options]
            out["covariance"] = out["band"] = ("covariance structure applies to "
                                               f"{', '.join(with_structure)} only")
        (ascending, searched), mixed = step_controlled(), accelerated()
        if self.method not in ascending + searched:
            out["backtrack"] = ("only for the methods whose iteration ascends the ELBO "
                                f"({', '.join(ascending)}) or Laplace's Ψ "
                                f"({', '.join(searched)}); the others have no "
                                "objective a shorter step is sure to increase")
        if self.method not in mixed:
            out["accelerate"] = (f"only for {', '.join(sorted(mixed))}: "
                                 "vi_riemann's point is a PD path mixing would not keep, "
                                 "the other forms are not mixed")
        elif mixed[self.method].guard == "objective" and not self.backtrack:
            out["accelerate"] = "needs the step control: the ELBO test is its safeguard"
        if self.structured() and self.covariance not in ("banded",) + RANKED_STRUCTURES:
            out["band"] = "only for banded (band B) / chevron, subspace, factor analysis (rank K)"
        if self.kernel != "periodic":
            out["period"] = "only for the periodic kernel"
        if self.dataset in ("breast_cancer", "csv"):
            out["n"] = "the size is fixed by the data"
        if self.model != "sparse":
            out["num_inducing"] = "only for the sparse model"
        return out

    def _likelihood_reasons(self) -> dict:
        """The likelihood's controls that do not apply, read from the likelihood: its
        hyperparameters (``init_params()``) and ``exact_expectations``."""
        try:
            lik = catalog.make_likelihood(self.resolved_likelihood())
        except ValueError:        # no longer in bnlab.likelihoods.LIKELIHOODS: the run says so
            return {}
        controls = {LIKELIHOOD_CONTROLS.get(name) for name in lik.init_params()}
        out = {}
        if lik.exact_expectations:
            out["cubature_order"] = f"expectations are exact for a {lik.label} likelihood"
        if "lik_scale" not in controls:
            out["lik_scale"] = f"the {lik.label} likelihood has no noise parameter"
        if "df" not in controls:
            out["df"] = f"degrees of freedom: the {lik.label} likelihood has none"
        return out

    def model_reasons(self, input_dim: int = 1) -> dict:
        """{model option: why it cannot be chosen} (options, not parameters)."""
        out = {}
        if input_dim != 1:
            out["markov"] = f"Markov GPs need 1-D inputs; these data have {input_dim}"
        elif not catalog.KERNELS[self.kernel].markovian:
            out["markov"] = "Markov GPs need a Matérn kernel (state-space form)"
        return out

    def url_state(self) -> dict:
        return {k: getattr(self, k) for k in URL_PARAMS}

    def why_invalid(self, name: str, value) -> str | None:
        """Why ``value`` cannot be the setting ``name`` (None if it can), in words."""
        p = self.param[name]
        if isinstance(p, param.Selector):
            if value in p.objects:
                return None
            return f"must be one of {', '.join(map(str, p.objects))}"
        try:
            type(self)(**{name: value})
        except Exception:  # param raises ValueError or TypeError by check
            if isinstance(p, param.Boolean):
                return "must be true or false"
            kind = "a whole number" if isinstance(p, param.Integer) else "a number"
            lo, hi = p.bounds or (None, None)
            return f"must be {kind} from {lo:g} to {hi:g}" if lo is not None else f"must be {kind}"
        return None


def parse_link(search: str) -> tuple[dict, dict]:
    """A shared link's query string (``?alpha=0.3&method=pep``) → ({name: value} of its
    valid settings, {name: (text as typed, why it is not valid)} of the others). One bad
    value costs only itself: the link's other settings still apply. Names that are not
    settings are ignored."""
    from urllib.parse import parse_qsl
    good, bad = {}, {}
    check = LabSettings()
    for name, text in parse_qsl(search.lstrip("?"), keep_blank_values=True):
        if name not in URL_PARAMS:
            continue
        value = _from_text(LabSettings.param[name], text)
        why = check.why_invalid(name, text if value is None else value)
        if value is not None and why is None:
            good[name] = value
            bad.pop(name, None)
        else:
            bad[name] = (text, why or "is not a value of this setting")
            good.pop(name, None)
    return good, bad


def link_notice(bad: dict) -> str:
    """The notification for a link's invalid values (escaped: a link is typed by anyone)."""
    import html
    items = "; ".join(f"{html.escape(name)} = “{html.escape(text[:60])}” {html.escape(why)}"
                      for name, (text, why) in bad.items())
    return (f"This link has values the lab cannot use, so their defaults are kept: {items}. "
            "Its other settings are applied, and the address bar now holds what is shown.")


def _from_text(p, text: str):
    """The typed value of a query-string text for parameter ``p`` (None if it has none)."""
    t = text.strip()
    try:
        if isinstance(p, param.Boolean):
            return {"true": True, "false": False}.get(t.lower())
        if isinstance(p, param.Integer):
            return int(t)
        if isinstance(p, param.Number):
            v = float(t)
            return v if v == v and abs(v) != float("inf") else None
    except ValueError:
        return None
    return text


def _preset_likelihood(dataset: str) -> str:
    from bnlab import datasets
    if dataset in datasets.SYNTHETIC:
        return datasets.SYNTHETIC[dataset][1]
    return "bernoulli" if dataset == "breast_cancer" else "unknown"
