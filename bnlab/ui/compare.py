"""Compare page: two methods side by side on the same data and hyperparameters, and an
α explorer that sweeps the Power-EP power from VI (α → 0) to EP (α = 1)."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import param

from . import catalog, markup
from .problem import build_problem
from .runner import Runner
from .settings import LabSettings

ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
MAX_ITERS = 300
SITE_METHODS = [m for m in catalog.METHODS if m != "gkl"]


def converge(problem, method, settings: LabSettings, alpha=None, max_iters=MAX_ITERS) -> Runner:
    """A Runner stepped until it converges, diverges or reaches ``max_iters``."""
    a = settings.effective_alpha() if alpha is None else alpha
    r = Runner(problem, method, alpha=a, rho=settings.rho, tol=1e-6, backtrack=settings.backtrack,
               accelerate=settings.accelerate,
               cubature_order=settings.cubature_order,
               options=settings.method_options() if method == settings.method else ())
    while r.iteration < max_iters and not (r.converged or r.diverged):
        r.step(1)
    return r


def _band(snap, label, colour, dash="solid"):
    b = snap["bands"]["f1"]
    return (hv.Area((b["x"], b["lower"], b["upper"]), "x", ["lower", "upper"], label=f"{label} ± 2σ")
            .opts(color=colour, alpha=0.15, line_alpha=0)
            * hv.Curve((b["x"], b["mean"]), "x", "f", label=f"{label} mean")
            .opts(color=colour, line_width=2, line_dash=dash))


def comparison_plots(snaps: dict, x_label="x"):
    """Bands of each method over the data, and their energy traces, from snapshots."""
    colours = ("#1f5fa8", "#c2571a")
    bands, traces = [], []
    for (name, snap), c in zip(snaps.items(), colours):
        bands.append(_band(snap, name, c))
        t = snap["trace"]
        ok = np.isfinite(t["energy"])
        traces.append(hv.Curve((t["iteration"][ok], t["energy"][ok]), "iteration", "energy",
                               label=name).opts(color=c, line_width=2))
    data = next(iter(snaps.values()))["data"]
    pts = hv.Scatter((data["x"], data["y"]), "x", "f").opts(color="#555555", size=3, alpha=0.6)
    return (hv.Overlay(bands + [pts]).opts(title="Posterior of each method", xlabel=x_label,
                                           ylabel="latent f / data",
                                           responsive=True, min_height=300,
                                           legend_position="right"),
            hv.Overlay(traces).opts(title="Energy per iteration", responsive=True,
                                    min_height=260, legend_position="bottom_right"))


def alpha_plots(sweep: dict, index: int, x_label="x"):
    """Converged energy against α (with the VI and EP values) and the posterior at α."""
    a, e = np.asarray(sweep["alpha"]), np.asarray(sweep["energy"])
    curve = (hv.Curve((a, e), "α", "energy", label="Power EP(α)").opts(color="#1f5fa8", line_width=2)
             * hv.Scatter((a, e), "α", "energy").opts(color="#1f5fa8", size=6)
             * hv.Scatter(([a[index]], [e[index]]), "α", "energy", label="shown")
             .opts(color="#d62728", size=12, marker="circle")
             * hv.HLine(sweep["vi_energy"]).opts(color="#4c9a2a", line_dash="dashed")
             * hv.Text(a[0], sweep["vi_energy"], " VI (ELBO)", halign="left", valign="bottom",
                       fontsize=9))
    snap = sweep["snaps"][index]
    bands = (_band(sweep["vi_snap"], "VI", "#4c9a2a", "dashed")
             * _band(sweep["snaps"][-1], "EP (α = 1)", "#c2571a", "dotted")
             * _band(snap, f"PEP α = {a[index]:g}", "#1f5fa8"))
    data = snap["data"]
    bands = bands * hv.Scatter((data["x"], data["y"]), "x", "f").opts(color="#555555", size=3)
    return (curve.opts(title="Converged energy against α", responsive=True, min_height=260),
            bands.opts(title="Posterior: VI → PEP(α) → EP", xlabel=x_label, ylabel="latent f / data",
                       responsive=True,
                       min_height=300, legend_position="right"))


class CompareView(pn.viewable.Viewer):
    method_a = param.Selector(default="laplace", objects=SITE_METHODS)
    method_b = param.Selector(default="ep", objects=SITE_METHODS)
    alpha_index = param.Integer(default=len(ALPHAS) // 2, bounds=(0, len(ALPHAS) - 1))

    def __init__(self, settings: LabSettings, **params):
        super().__init__(**params)
        self.settings = settings
        self.snaps, self.sweep = None, None
        self.error = pn.pane.HTML("", sizing_mode="stretch_width")
        self.table = pn.pane.HTML("", sizing_mode="stretch_width")
        self.progress = pn.indicators.Progress(value=0, max=len(ALPHAS) + 1, visible=False,
                                               width=300)
        run = pn.widgets.Button(label="Run both to convergence", color="primary")
        run.on_click(lambda e: self.run_pair())
        sweep = pn.widgets.Button(label="Sweep α from 0 to 1", color="primary")
        sweep.on_click(lambda e: self.run_sweep())
        self.pair_pane = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self.pair_trace = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self.alpha_energy = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self.alpha_band = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self.alpha_slider = pn.widgets.DiscreteSlider(label="Show α", options=list(ALPHAS),
                                                      value=ALPHAS[self.alpha_index], width=300)
        self.alpha_slider.param.watch(self._on_alpha, "value")
        self.layout = pn.Column(
            pn.pane.Markdown("### Two methods, same data and hyperparameters"),
            pn.Row(pn.widgets.Select.from_param(self.param.method_a, label="Method A", width=200),
                   pn.widgets.Select.from_param(self.param.method_b, label="Method B", width=200),
                   run),
            self.error, self.table, pn.Row(self.pair_pane, self.pair_trace),
            pn.pane.Markdown("### α explorer — Power EP between VI (α → 0) and EP (α = 1)"),
            pn.Row(sweep, self.alpha_slider, self.progress),
            pn.Row(self.alpha_energy, self.alpha_band), sizing_mode="stretch_width")

    def __panel__(self):
        return self.layout

    def _problem(self):
        try:
            self.error.object = ""
            return build_problem(self.settings)
        except ValueError as exc:
            self.error.object = markup.error(exc)
            return None

    def run_pair(self):
        problem = self._problem()
        if problem is None:
            return
        snaps, rows = {}, []
        for m in (self.method_a, self.method_b):
            try:
                r = converge(problem, m, self.settings)
            except ValueError as exc:
                self.error.object = markup.error(f"{m}: {exc}")
                return
            snaps[m] = r.snapshot()
            status = "diverged" if r.diverged else ("converged" if r.converged else "not converged")
            rows.append(f"<tr><td>{m}</td><td>{r.energy[-1]:.4f}</td><td>{r.iteration}</td>"
                        f"<td>{status}</td></tr>")
        self.snaps = snaps
        self.table.object = ("<table><tr><th>method</th><th>energy (≈ log p(y))</th>"
                             "<th>iterations</th><th>status</th></tr>" + "".join(rows) + "</table>")
        band, trace = comparison_plots(snaps, problem.x_label)
        self.pair_pane.object, self.pair_trace.object = band, trace

    def run_sweep(self):
        problem = self._problem()
        if problem is None:
            return
        self.progress.visible, self.progress.value = True, 0
        try:
            vi = converge(problem, "vi", self.settings)
            self.progress.value = 1
            snaps, energies = [], []
            for k, a in enumerate(ALPHAS):
                r = converge(problem, "ep" if a == 1.0 else "pep", self.settings, alpha=a)
                snaps.append(r.snapshot())
                energies.append(r.energy[-1] if not r.diverged else np.nan)
                self.progress.value = k + 2
        except ValueError as exc:
            self.error.object = markup.error(exc)
            return
        finally:
            self.progress.visible = False
        self.sweep = {"alpha": ALPHAS, "energy": energies, "snaps": snaps,
                      "vi_energy": vi.energy[-1], "vi_snap": vi.snapshot(), "x_label": problem.x_label}
        self._draw_sweep()

    def _on_alpha(self, event):
        self.alpha_index = ALPHAS.index(event.new)
        if self.sweep is not None:
            self._draw_sweep()

    def _draw_sweep(self):
        energy, band = alpha_plots(self.sweep, self.alpha_index, self.sweep["x_label"])
        with pn.io.hold():
            self.alpha_energy.object, self.alpha_band.object = energy, band
