"""The lab: sidebar settings, and the Live / Compare / Surfaces pages.

One ``Lab`` per browser session (``panel serve`` runs the app script per session), so
sessions never share state. The settings live in the page URL."""
from __future__ import annotations

from pathlib import Path

import panel as pn

from .compare import CompareView
from .controls import Controls, Status
from .live import LiveView
from .settings import URL_PARAMS, LabSettings
from .surfaces import SurfacesView
from .tours import TourPanel, tour_list_markdown

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
        self.status = Status()
        self.controls = Controls(self.settings, self.status)
        self.live = LiveView(self.settings, self.status)
        self.compare = CompareView(self.settings)
        self.surfaces = SurfacesView(self.settings)
        self.tabs = pn.Tabs(("Live", self.live), ("Compare", self.compare),
                            ("Surfaces", self.surfaces),
                            ("About", pn.pane.Markdown(ABOUT + "\n" + tour_list_markdown(),
                                                       max_width=760)),
                            dynamic=False, sizing_mode="stretch_both")
        self.tour = TourPanel(self)

    def sync_url(self):
        """Two-way binding between the settings and the page's query string."""
        if pn.state.location is not None:
            pn.state.location.sync(self.settings, {p: p for p in URL_PARAMS})

    def start(self):
        """Called once the page is loaded: first build (JAX compiles here), after the
        ``?tour=`` step's settings when the URL opens a tour."""
        self.tour.open_from_url()
        if self.live.runner is None:
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
            main=[self.tour, self.tabs], sidebar_width=340, raw_css=[css], accent="#1f5fa8",
            font_url="data:text/css,", **extra)

    def __panel__(self):
        return pn.Row(pn.Column(self.controls, width=340), pn.Column(self.tour, self.tabs),
                      sizing_mode="stretch_both")


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
