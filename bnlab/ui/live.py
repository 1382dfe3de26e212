"""Live page: run / step / pause / reset an inference run and watch the posterior band,
the predictive, the energy trace, the PSD strip, the sites and a two-point ellipse. The
run itself is the page's model (``live_model.LiveModel``); this view draws it."""
from __future__ import annotations

import time

import panel as pn
from panel.io.state import set_curdoc

from . import markup, palette
from .controls import Status
from .layout import bokeh_pane, controls_row
from .live_controls import RunControls
from .live_model import LiveModel
from .live_plots import LivePlots
from .local_picture import run_point_picture
from .live_status import status_line
from .settings import LabSettings


def page_connected(doc) -> bool:
    """Whether a browser page still holds ``doc``'s session open: False once its last
    WebSocket closed (Bokeh keeps the session until ``unused_session_lifetime`` ends);
    True outside a server (a notebook, a test)."""
    context = getattr(doc, "session_context", None)
    session = getattr(context, "session", None)
    return session is None or session.connection_count > 0


def _of_model(name: str):
    """The model's ``name``, read and set through the page: the lab, tours, exports and
    scripts drive and read the Live page."""
    return property(lambda self: getattr(self.model, name),
                    lambda self, value: setattr(self.model, name, value))


class LiveView(pn.viewable.Viewer):
    """One per browser session: the Live page of a ``LiveModel`` (``model``), which it
    draws (as the model's ``Screen``) and whose parameters it follows: ``busy`` covers
    the plots; the driving controls (``RunControls``) follow it too."""

    (runner, problem, mcmc, selected, point, running, closed, rebuild, step, reset,
     solve, pause, compute_mcmc, close) = map(_of_model, (
        "runner", "problem", "mcmc", "selected", "point", "running", "closed", "rebuild",
        "step", "reset", "solve", "pause", "compute_mcmc", "close"))

    def __init__(self, settings: LabSettings, status: Status, **params):
        super().__init__(**params)
        self.settings, self.status = settings, status
        self._local_drawn = 0.0          # when the point's picture was last redrawn (≤ 1/s)
        self.colours = palette.current()  # the session's theme, read while it is built
        self.model = LiveModel(settings, status, screen=self)
        self._build_layout()
        self.model.param.watch(self._on_busy, ["busy"], onlychanged=False)

    # -- layout ---------------------------------------------------------------------
    def _build_layout(self):
        self.controls = RunControls(self.model, self.run)
        self.plots = LivePlots()
        self.plots.src["data"].selected.on_change("indices", self._on_tap)
        self.panes = {"band": bokeh_pane(self.plots.band, css_classes=["bn-band"])}
        self.pick_i = pn.widgets.IntInput(label="Point i", value=0, start=0, width=90)
        self.pick_j = pn.widgets.IntInput(label="Point j", value=1, start=0, width=90)
        self.status_pane = markup.html_pane("", css_classes=["bn-status"],
                                            sizing_mode="stretch_width")
        self.gap_toggle = pn.widgets.Checkbox(label="Energy plot: distance to the latest "
                                              "energy, log scale", value=False)
        self.gap_toggle.param.watch(self._on_gap_toggle, "value")
        self.mcmc_pane = markup.html_pane("", css_classes=["bn-mcmc"],
                                          sizing_mode="stretch_width", visible=False)
        self.description = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        # a clicked point's q(fᵢ), cavity, tilted distribution and MCMC marginal
        # (shown and hidden through its Column: ``visible`` on a HoloViews pane reaches
        # its Bokeh pane, which then copies the figure's stylesheet objects into a
        # parameter that takes strings, and the served page's update fails)
        self.local_pane = pn.pane.HoloViews(None, width=300, height=340, linked_axes=False)
        close = pn.widgets.Button(label="✕ Close", width=80, margin=(0, 10))
        close.on_click(lambda e: self.close_local())
        self.local_box = pn.Column(self.local_pane, close, css_classes=["bn-local"],
                                   visible=False, margin=0)
        self.layout = pn.Column(
            self.controls, self.status_pane, self.description, self.mcmc_pane,
            pn.Row(self.panes["band"], self.local_box, sizing_mode="stretch_width"),
            sizing_mode="stretch_width")

    def show_all(self):
        """Build and add the plots held back from the first page: energy, distance, PSD
        strip, predictive, sites, two points. A browser builds every figure of a page
        before it paints any (Bokeh reads each glyph's CSS visuals, one forced style
        recalculation after another), and these seven took most of a first visit's
        wait; the server, too, builds them only now."""
        if self.model.closed or self.plots.built:
            return
        self.plots.build_rest()
        P = self.panes
        P.update({"energy": bokeh_pane(self.plots.energy, css_classes=["bn-energy"]),
                  "gap": bokeh_pane(self.plots.gap, css_classes=["bn-gap"]),
                  "predictive": bokeh_pane(self.plots.predictive),
                  "psd": bokeh_pane(self.plots.psd, css_classes=["bn-psd"]),
                  "site_prec": bokeh_pane(self.plots.site_prec),
                  "site_nat1": bokeh_pane(self.plots.site_nat1),
                  "joint": pn.Column(pn.pane.Bokeh(self.plots.joint), margin=0)})
        self._show_energy_or_gap()
        for pane in P.values():
            pane.loading = self.model.busy
        pick = pn.widgets.Button(label="Show pair", width=90, align="end")
        pick.on_click(lambda e: self.select_pair(self.pick_i.value, self.pick_j.value))
        self.layout.extend([
            self.gap_toggle, pn.Row(P["energy"], P["gap"], sizing_mode="stretch_width"),
            P["psd"],
            P["predictive"], pn.Row(P["site_prec"], P["site_nat1"], sizing_mode="stretch_width"),
            pn.Row(pn.Column(pn.pane.Markdown("**Two points** — the joint Gaussian q(fᵢ, fⱼ) "
                                              "of two latent values; click two data points in "
                                              "the posterior plot or pick their indices."),
                             controls_row(self.pick_i, self.pick_j, pick)), P["joint"])])

    def __panel__(self):
        return self.layout

    def _on_gap_toggle(self, event):
        if self.plots.built:               # else ``show_all`` reads the toggle
            self._show_energy_or_gap()

    def _show_energy_or_gap(self):
        gap = self.gap_toggle.value
        self.panes["energy"].visible, self.panes["gap"].visible = not gap, gap

    # -- following the model ----------------------------------------------------------
    def _on_busy(self, event):
        """A problem being built covers the plots (the layouts: Panel's Bokeh pane
        cannot load), which also takes their clicks."""
        for pane in self.panes.values():
            pane.loading = event.new

    def run(self):
        """Animate the run in this session's page (its document current on the run's
        thread, so that the ticks' drawing reaches the session's event loop) while the
        page is open."""
        doc = pn.state.curdoc
        self.model.run(lambda: set_curdoc(doc), lambda: page_connected(doc))

    def replay(self):
        """The run again from its start, animated: the iterations a tour step (which
        shows the stop at once, ``solve``) went through."""
        self.model.reset()
        self.run()

    def describe(self, problem):
        self.description.object = (f"*{problem.description}* — {len(problem.x_plot)} "
                                   f"training points, {problem.input_dim}-D inputs.")

    def show_no_run(self):
        self.show_status()
        self.description.object = ""
        pn.state.execute(self._draw_no_run, schedule="auto")

    def show_tick(self, runner, taken: int, stopped: bool, generation: int):
        """A tick's plots are changed on the server's event loop, under the document's
        lock (``pn.state.execute``): Bokeh refuses document changes from elsewhere."""
        pn.state.execute(lambda: self._draw_tick(runner, taken, stopped, generation),
                         schedule="auto")

    def _draw_tick(self, runner, taken: int, stopped: bool, generation: int):
        """The plots (and, when the run stopped, the buttons and the status line) after
        a tick, on the event loop; nothing for a closed session or a replaced run."""
        if not self.model.tick_shown(runner, stopped, generation):
            return
        if taken:
            self.push()
        elif stopped:            # nothing moved: the status changes, the plots do not
            self.show_status(runner.snapshot()["status"])

    # -- two points -------------------------------------------------------------------
    def _on_tap(self, attr, old, new):
        """Bokeh's selection on the data points (``LiveModel.tap``)."""
        if self.model.tap(new):
            self._local_drawn = 0.0
            if len(self.model.selected) == 2:
                self.pick_i.value, self.pick_j.value = self.model.selected
            self.push()

    def close_local(self):
        """Put the clicked point's picture away: the band has the width again."""
        self.model.point = None
        self.local_box.visible = False

    def select_pair(self, i: int, j: int):
        self.model.selected = [int(i), int(j)]
        self.pick_i.value, self.pick_j.value = int(i), int(j)
        self.push()

    # -- drawing --------------------------------------------------------------------
    def push(self):
        """Send the current run's plot data to every plot in one batched update. The
        data are read here, on the caller's thread (a button's or a setting's callback
        runs on a Panel worker thread); the plots, plain Bokeh models that Panel does not
        route to the event loop itself, are changed by ``_draw`` on the event loop,
        under the document's lock, after any change already queued there (so a
        rebuild's busy overlay goes on before its new data and off after them)."""
        m = self.model
        runner, problem = m.runner, m.problem     # read once: close() may run beside
        if runner is None or problem is None or m.closed:
            return
        frame = (runner, runner.snapshot(), tuple(m.selected), m.mcmc.band(),
                 m.joint_data(), problem.x_label, self._local_frame(runner, problem))
        pn.state.execute(lambda: self._draw(*frame), schedule="auto")

    def _local_frame(self, runner, problem):
        """The clicked point's local picture (``local_picture``), or None to leave the
        one drawn: no point, or a run redrawing it within the last second."""
        point = self.model.point
        if point is None or (self.model.running and time.monotonic() - self._local_drawn < 1.0):
            return None
        self._local_drawn = time.monotonic()
        return run_point_picture(runner, problem, point, self.model.mcmc.truth_for(problem),
                                 self.colours)

    def _draw(self, runner, snap, selected, mcmc_band, joint, x_label, local=None):
        m = self.model
        if m.closed or runner is not m.runner:
            return
        with pn.io.hold():
            if local is not None:
                self.local_pane.object, self.local_box.visible = local, True
            self.plots.update(snap, selected, mcmc_band, joint, x_label)
            self.mcmc_pane.object = m.mcmc.summary_html()
            self.mcmc_pane.visible = m.mcmc.samples is not None
            m.message = ""
            self.show_status(snap["status"])

    def _draw_no_run(self):
        """Empty plots while the settings cannot be built (on the event loop, as
        ``_draw``): nothing of the previous run is left to be read as the new one's."""
        if self.model.closed or self.model.runner is not None:
            return
        with pn.io.hold():
            self.plots.clear()
            self.mcmc_pane.visible = self.local_box.visible = False

    def show_status(self, st=None):
        m = self.model
        if m.message:
            self.status_pane.object = markup.error(m.message)
        elif st is not None:
            self.status_pane.object = status_line(st, self.settings.method, m.running,
                                                  m.cancelled)
