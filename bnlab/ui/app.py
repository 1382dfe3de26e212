"""The lab: sidebar settings, and the Live / Compare / Surfaces pages.

One ``Lab`` per browser session (``panel serve`` runs the app script per session), so
sessions never share state. The settings live in the page URL."""
from __future__ import annotations

from pathlib import Path

import panel as pn

from .compare import CompareView
from .controls import Controls, Status
from .live import LiveView
from .settings import URL_PARAMS, LabSettings, link_notice, parse_link
from .surfaces import SurfacesView

ASSETS = Path(__file__).resolve().parents[2] / "assets"

ABOUT = """
### What is this?
A lab for **approximate Bayesian inference in Gaussian-process models**. Pick a data set,
a likelihood, a kernel and an inference method in the sidebar, then press **Run** (or
**Step**) on the *Live* page and watch the approximation converge — or fail.

* *Posterior*: the latent function's mean and a ±2σ band; grey dots are the data.
* *Energy*: the method's approximation of the log marginal likelihood, per iteration.
* *PSD status*: a red square marks an iteration where the posterior or a cavity
  distribution stopped being a valid Gaussian (not positive definite).
* *Sites*: the Gaussian factors that stand in for each data point's likelihood.
* *Two points*: click two data points to see the joint Gaussian of their latent values.

*Compare* runs two methods side by side and sweeps the Power-EP power α from
variational inference (α → 0) to EP (α = 1). *Surfaces* maps the approximate
marginal likelihood over a grid of hyperparameters.

The address bar always holds the current settings: copy it to share this exact demo.
"""


class Lab(pn.viewable.Viewer):
    def __init__(self, **params):
        super().__init__(**params)
        self.settings = LabSettings()
        self.link_errors = {}
        self.status = Status()
        self.controls = Controls(self.settings, self.status)
        self.live = LiveView(self.settings, self.status)
        self.compare = CompareView(self.settings)
        self.surfaces = SurfacesView(self.settings)
        self.tabs = pn.Tabs(("Live", self.live), ("Compare", self.compare),
                            ("Surfaces", self.surfaces),
                            ("About", pn.pane.Markdown(ABOUT, max_width=760)),
                            dynamic=False, sizing_mode="stretch_both")

    def sync_url(self):
        """Two-way binding between the settings and the page's query string. A shared
        link is read value by value (``parse_link``): its valid values apply, an
        invalid one keeps its default and is named in a notification when the page
        loads, and the address bar is rewritten with the settings in force."""
        loc = pn.state.location
        if loc is None:
            return
        good, self.link_errors = parse_link(loc.search or "")
        if good:
            self.settings.apply_link(good)
        # the bad values are reported by ``start``; sync's own all-or-nothing update
        # of the query then has nothing else to apply
        loc.sync(self.settings, {p: p for p in URL_PARAMS}, on_error=lambda _: None)

    def start(self):
        """Called once the page is loaded: first build (JAX compiles here)."""
        if self.link_errors:
            # the address bar: the page's own query reaches the server with the page,
            # so it is corrected now, to the values in force
            s = self.settings
            pn.state.location.update_query(**{k: s.param[k].serialize(getattr(s, k))
                                              for k in self.link_errors})
            if pn.state.notifications is not None:
                pn.state.notifications.warning(link_notice(self.link_errors), duration=0)
        self.live.rebuild()

    def template(self):
        css = (ASSETS / "lab.css").read_text() if (ASSETS / "lab.css").exists() else ""
        # the Fast design fetches Open Sans from Google; classrooms may be offline, so
        # use the system sans-serif instead of a failing request
        fast = pn.theme.fast.Fast
        fast._resources = {k: v for k, v in fast._resources.items() if k != "font"}
        logo = ASSETS / "logo.svg"
        extra = {"logo": str(logo)} if logo.exists() else {}
        return pn.template.FastListTemplate(
            title="bnlab — approximate inference lab", sidebar=[self.controls],
            main=[self.tabs], sidebar_width=340, raw_css=[css], accent="#1f5fa8",
            font_url="data:text/css,", **extra)

    def __panel__(self):
        return pn.Row(pn.Column(self.controls, width=340), self.tabs, sizing_mode="stretch_both")


def serve_resources_locally():
    """Every script and stylesheet of the page (Bokeh's, Panel's, the template's) comes
    from this server, whatever the environment asks (``BOKEH_RESOURCES=cdn`` sends the
    page to cdn.bokeh.org and cdn.holoviz.org): a classroom may have no internet, or
    forbid it, and the page must be complete from the lab server alone."""
    from bokeh.settings import settings
    settings.resources = "server"


def serve_lab():
    """Build the per-session app (the body of apps/lab.py)."""
    serve_resources_locally()
    lab = Lab()
    lab.sync_url()
    pn.state.onload(lab.start)
    return lab.template()
