"""Live view: run / step / pause / reset an inference run and watch the posterior band,
the predictive, the energy trace, the PSD strip, the sites and a two-point ellipse."""
from __future__ import annotations

import logging
import threading
import time

import holoviews as hv
import panel as pn
import param
from panel.io.state import set_curdoc

from . import markup, palette
from .controls import Status
from .layout import controls_row
from .live_plots import LivePlots
from .local_picture import local_picture, where
from .mcmc_ref import MCMCReference
from .problem import SettingError, build_problem
from .runner import STOP_REASONS, Runner, make_runner
from .settings import URL_PARAMS, LabSettings

log = logging.getLogger(__name__)

#: settings that define the run (changing them restarts it); speed paces it and the
#: cap bounds it, neither changes the iteration
RUN_PARAMS = tuple(p for p in URL_PARAMS if p not in ("speed", "max_iters")) + ("csv_text",)
MAX_FPS = 20
#: iterations between two looks at the clock while a run is solved without animation
SOLVE_CHUNK = 10
#: seconds between two frames of a run solved without animation (big problems only)
SOLVE_FRAME_S = 1.0
#: runs of all sessions that compute at once; the others' ticks wait their turn, so a
#: class pressing Run together shares the cores instead of over-subscribing them
_COMPUTING = threading.BoundedSemaphore(4)


def page_connected(doc) -> bool:
    """Whether a browser page still holds ``doc``'s session open: False once its last
    WebSocket closed (Bokeh keeps the session until ``unused_session_lifetime`` ends);
    True outside a server (a notebook, a test)."""
    context = getattr(doc, "session_context", None)
    session = getattr(context, "session", None)
    return session is None or session.connection_count > 0


def _bokeh_pane(fig, css_classes=()):
    """A Bokeh pane in a Column that carries a CSS class (for tests and styling)."""
    return pn.Column(pn.pane.Bokeh(fig, sizing_mode="stretch_width"),
                     css_classes=list(css_classes), sizing_mode="stretch_width", margin=0)


class LiveView(pn.viewable.Viewer):
    """One per browser session. ``rebuild()`` makes a new ``Runner`` from the settings;
    ``run()`` animates it at ``settings.speed``, ``solve()`` runs it to its stop at once.

    Every run (an animation or a solve) carries a generation number: starting one, a
    pause, a rebuild or closing the page draws a new number, and a run whose number is
    no longer current takes no further step and draws nothing. So no interleaving of
    clicks, tour steps and ticks, on whatever threads they arrive, can leave two runs
    going or a stale frame on screen."""

    running = param.Boolean(default=False)
    cancelled = param.Boolean(default=False, doc="paused by the user before the run stopped")
    busy = param.Boolean(default=False, doc="a new problem is being built (JAX compiles)")
    message = param.String(default="")
    references = param.Integer(default=0, doc="MCMC references computed (other pages "
                                              "watch it to overlay the new one)")

    def __init__(self, settings: LabSettings, status: Status, **params):
        super().__init__(**params)
        self.settings, self.status = settings, status
        self.runner: Runner | None = None
        self.problem = None
        self.selected: list[int] = []
        self.point: int | None = None    # the clicked point whose local picture is shown
        self._local_drawn = 0.0          # when it was last redrawn (a run redraws it ≤ 1/s)
        self.colours = palette.current()  # the session's theme, read while it is built
        self.mcmc = MCMCReference()
        self._generation = 0             # the current run's number (see the class doc)
        self._generation_lock = threading.Lock()
        self._lock = threading.Lock()
        self._draw_pending = False       # a tick's drawing is queued on the event loop
        self.closed = False
        self._build_layout()
        settings.param.watch(self._on_settings, list(RUN_PARAMS))
        settings.param.watch(self._on_cap, ["max_iters"])

    # -- layout ---------------------------------------------------------------------
    def _build_layout(self):
        self.plots = LivePlots()
        self.plots.src["data"].selected.on_change("indices", self._on_tap)
        self.panes = {"band": _bokeh_pane(self.plots.band, css_classes=["bn-band"])}
        self.run_button = pn.widgets.Button(label="▶ Run", color="success", width=90)
        self.pause_button = pn.widgets.Button(label="❚❚ Pause", width=90, disabled=True)
        self.step_button = pn.widgets.Button(label="Step", color="primary", width=90)
        self.reset_button = pn.widgets.Button(label="↺ Reset", width=90)
        self.run_button.on_click(lambda e: self.run())
        self.pause_button.on_click(lambda e: self.pause())
        self.step_button.on_click(lambda e: self.step())
        self.reset_button.on_click(lambda e: self.reset())
        self.speed = pn.widgets.FloatSlider.from_param(self.settings.param.speed,
                                                       label="Speed (iterations / s)", width=220)
        self.cap = pn.widgets.IntInput.from_param(self.settings.param.max_iters,
                                                  label="Iteration cap", width=110,
                                                  css_classes=["bn-cap"])
        self.pick_i = pn.widgets.IntInput(label="Point i", value=0, start=0, width=90)
        self.pick_j = pn.widgets.IntInput(label="Point j", value=1, start=0, width=90)
        self.mcmc_button = pn.widgets.Button(label="MCMC reference", width=140,
                                             description=markup.tooltip_below(
                                                 "sample the exact posterior (AIS + elliptical "
                                                 "slice sampling over 256 chains; tens of "
                                                 "seconds; again: a longer schedule)"))
        self.mcmc_button.on_click(lambda e: self.compute_mcmc())
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
            controls_row(self.run_button, self.pause_button, self.step_button,
                         self.reset_button, self.speed, self.cap, self.mcmc_button),
            self.status_pane, self.description, self.mcmc_pane,
            pn.Row(self.panes["band"], self.local_box, sizing_mode="stretch_width"),
            sizing_mode="stretch_width")

    def show_all(self):
        """Build and add the plots held back from the first page: energy, distance, PSD
        strip, predictive, sites, two points. A browser builds every figure of a page
        before it paints any (Bokeh reads each glyph's CSS visuals, one forced style
        recalculation after another), and these seven took most of a first visit's
        wait; the server, too, builds them only now."""
        if self.closed or self.plots.built:
            return
        self.plots.build_rest()
        P = self.panes
        P.update({"energy": _bokeh_pane(self.plots.energy, css_classes=["bn-energy"]),
                  "gap": _bokeh_pane(self.plots.gap, css_classes=["bn-gap"]),
                  "predictive": _bokeh_pane(self.plots.predictive),
                  "psd": _bokeh_pane(self.plots.psd, css_classes=["bn-psd"]),
                  "site_prec": _bokeh_pane(self.plots.site_prec),
                  "site_nat1": _bokeh_pane(self.plots.site_nat1),
                  "joint": pn.Column(pn.pane.Bokeh(self.plots.joint), margin=0)})
        self._show_energy_or_gap()
        for pane in P.values():
            pane.loading = self.busy
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

    # -- building a run -------------------------------------------------------------
    def _on_settings(self, *events):
        self.rebuild()

    def rebuild(self):
        """New problem and runner from the settings; errors go next to their control.
        While it builds (JAX compiles a new data shape, likelihood or method: seconds),
        the plots carry a busy overlay that also takes their clicks, and the driving
        buttons are off: the old problem is never shown as the new one. Settings that
        cannot be built drop the old run too (its plots are emptied, Run and Step stay
        off until the settings are fixed): Run would otherwise go on with the previous
        model under the new settings' names."""
        self._halt()
        s = self.settings
        errors = {}
        self._set_busy(True)
        try:
            try:
                problem = build_problem(s)
                self.status.input_dim = problem.input_dim
                runner = make_runner(problem, s)
            except SettingError as exc:
                errors[exc.control] = str(exc)
            except (ValueError, TypeError) as exc:
                errors["method"] = str(exc)
            except Exception as exc:         # the engine failed, not the settings: say so
                log.exception("bnlab: building the run failed")
                errors["method"] = (f"The run could not be built ({type(exc).__name__}: "
                                    f"{exc}). Change a setting or reload the page to try "
                                    f"again; the server's log has the details.")
            if errors:
                with self._lock:
                    self.problem = self.runner = None
                self.status.errors = errors
                self.message = next(iter(errors.values()))
                self._render_status()
                self.description.object = ""
                pn.state.execute(self._draw_no_run, schedule="auto")
                return False
            with self._lock:
                self.problem, self.runner = problem, runner
                self.selected = [i for i in self.selected if i < len(problem.x_plot)]
                if self.point is not None and self.point >= len(problem.x_plot):
                    self.point = None
                self.mcmc.keep_for(problem)
                self.cancelled = False
            self.status.errors = {}
            self.description.object = (f"*{problem.description}* — {len(problem.x_plot)} "
                                       f"training points, {problem.input_dim}-D inputs.")
            self.push()
            return True
        finally:
            self._set_busy(False)

    def _set_busy(self, busy: bool):
        self.busy = busy
        for pane in self.panes.values():    # (the layouts: Panel's Bokeh pane cannot load)
            pane.loading = busy
        self._enable_buttons()

    def _enable_buttons(self):
        """The driving buttons work only while there is a run and it is not being
        rebuilt."""
        off = self.busy or self.runner is None
        for b in (self.step_button, self.reset_button, self.mcmc_button):
            b.disabled = off
        self.run_button.disabled = off or self.running
        self.pause_button.disabled = not self.running

    # -- driving --------------------------------------------------------------------
    def step(self, k: int = 1):
        if self.runner is None or self.busy:
            return
        with self._lock:
            self.runner.step(k)
            self.cancelled = False
        self.push()

    def reset(self):
        self._halt()
        self.cancelled = False
        if self.runner is not None and not self.busy:
            self.runner.reset()
            self.push()

    def run(self):
        """Animate the run: a thread of its own steps it every ``_pace()`` until it stops,
        is paused or is replaced (``_animate``)."""
        if self.runner is None or self.running or self.busy:
            return
        generation = self._start_generation()
        self.running, self.cancelled = True, False
        self._enable_buttons()
        threading.Thread(target=self._animate, args=(generation, pn.state.curdoc),
                         name="bnlab-run", daemon=True).start()

    def replay(self):
        """The run again from its start, animated: the iterations a tour step (which
        shows the stop at once, ``solve``) went through."""
        self.reset()
        self.run()

    def _start_generation(self) -> int:
        """A new current run number (held only for the increment: the event loop calls
        this while a step may hold ``_lock``)."""
        with self._generation_lock:
            self._generation += 1
            return self._generation

    def _animate(self, generation: int, doc):
        """The animation's loop: a tick per period while ``generation`` is current and the
        page is open (a closed tab's run stops at once, not when Bokeh discards its
        session 15 s later). The session's document is made current on this thread, so
        that the ticks' drawing reaches the session's event loop (``pn.state.execute``)."""
        with set_curdoc(doc):
            while generation == self._generation and not self.closed:
                if not page_connected(doc):
                    self._halt()
                    return
                start = time.monotonic()
                with _COMPUTING:
                    self._tick(generation)
                time.sleep(max(0.0, self._pace()[0] / 1000.0 - (time.monotonic() - start)))

    def solve(self, cancelled=lambda: False) -> bool:
        """Run the problem from its start to its stop (converged, diverged, the cap,
        stalled) without animation and show where it stopped: what a tour step shows.
        It counts as running (Pause stops it, a rebuild replaces it); a frame is drawn
        every ``SOLVE_FRAME_S`` on problems slow enough to need one. False if there was
        no run, or if it was paused, replaced or ``cancelled()`` before its stop."""
        runner = self.runner
        if runner is None or self.busy:
            return False
        self._halt()
        generation = self._start_generation()
        with self._lock:                 # after a tick under way, which then sees its end
            runner.reset()
        self.running, self.cancelled = True, False
        self._enable_buttons()
        shown, stopped = time.monotonic(), False
        try:
            while generation == self._generation and runner is self.runner and not (
                    self.closed or cancelled()):
                with _COMPUTING, self._lock:
                    runner.step(SOLVE_CHUNK)
                if runner.stop_reason() is not None:
                    stopped = True
                    break
                if time.monotonic() - shown > SOLVE_FRAME_S:
                    self.push()
                    shown = time.monotonic()
        finally:
            if generation == self._generation:
                self._halt()
                self.cancelled = not stopped
        self.push()
        return stopped

    def pause(self):
        """The Pause button: the run stops before it converged, and the status says so."""
        if self._halt() and self.runner is not None:
            self.cancelled = self.runner.stop_reason() is None
            self._render_status(self.runner.snapshot()["status"])

    def _halt(self) -> bool:
        """End the current run's generation, so that it takes no further step and
        pushes no frame; True if the run was running."""
        self._start_generation()
        was_running, self.running = self.running, False
        self._enable_buttons()
        return was_running

    def _pace(self):
        """(callback period in ms, iterations per tick) for the chosen speed."""
        speed = float(self.settings.speed)
        period = max(1000.0 / MAX_FPS, 1000.0 / speed)
        return int(period), max(1, int(round(speed * period / 1000.0)))

    def _on_cap(self, *_):
        """A new cap applies to the current run (a run stopped at the old cap may go on)."""
        if self.runner is not None:
            self.runner.set_cap(int(self.settings.max_iters))
            self.push()

    def _tick(self, generation: int | None = None):
        """One tick of Run: the steps and their plot data are computed here (on the
        animation's thread), the plots are changed by ``_draw_tick`` on the server's
        event loop, under the document's lock (``pn.state.execute``): Bokeh refuses
        document changes from elsewhere. A tick whose drawing is still queued is
        skipped, so ticks never pile up; so is a tick of a run no longer current."""
        if generation is None:
            generation = self._generation
        if self.closed or self._draw_pending or not self._lock.acquire(blocking=False):
            return
        try:
            runner = self.runner
            if runner is None or self.busy or generation != self._generation:
                return
            taken = runner.step(self._pace()[1])
            stopped = runner.stop_reason() is not None
            runner.snapshot()
        finally:
            self._lock.release()
        self._draw_pending = True
        pn.state.execute(lambda: self._draw_tick(runner, taken, stopped, generation),
                         schedule="auto")

    def _draw_tick(self, runner, taken: int, stopped: bool, generation: int):
        """The plots (and, when the run stopped, the buttons and the status line) after
        a tick, on the event loop; nothing for a closed session or a replaced run, and
        a stop ends only the run that stopped."""
        self._draw_pending = False
        if self.closed or runner is not self.runner:
            return
        if stopped and generation == self._generation:
            self._halt()
        if taken:
            self.push()
        elif stopped:            # nothing moved: the status changes, the plots do not
            self._render_status(runner.snapshot()["status"])

    def close(self):
        """Release the session's run (its browser page is gone): end the current run,
        drop the runner, the problem and the MCMC reference."""
        self.closed = True
        self._start_generation()
        with self._lock:
            self.runner = self.problem = None
            self.mcmc.clear()

    # -- two points and MCMC --------------------------------------------------------
    def _on_tap(self, attr, old, new):
        """Bokeh selection on the data points: the last two clicked form the pair. A
        tap on overlapping or nearby points selects them all: the one that is not the
        previous pick is taken, so two neighbours can form a pair."""
        if self.problem is None or not new or self.busy:
            return
        fresh = [int(i) for i in new if int(i) not in self.selected[-1:]]
        sel = (self.selected + [fresh[-1] if fresh else int(new[-1])])[-2:]
        self.point, self._local_drawn = sel[-1], 0.0
        if len(sel) == 2 and sel[0] != sel[1]:
            self.select_pair(*sel)
        else:
            self.selected = sel[-1:]
            self.push()

    def close_local(self):
        """Put the clicked point's picture away: the band has the width again."""
        self.point = None
        self.local_box.visible = False

    def select_pair(self, i: int, j: int):
        self.selected = [int(i), int(j)]
        self.pick_i.value, self.pick_j.value = int(i), int(j)
        self.push()

    def compute_mcmc(self, num_temps: int | None = None):
        """AIS on the current problem (kept while only the method, α or ρ change); a
        second press on a problem whose run was rough refines the schedule, a copied
        link names its own (``num_temps``)."""
        if self.problem is None or self.busy:
            return
        self.mcmc_button.loading = True
        try:
            self.mcmc.compute(self.problem, num_temps=num_temps)
        except ValueError as exc:
            self.message = f"MCMC reference: {exc}"
            self._render_status()
            return
        finally:
            self.mcmc_button.loading = False
        self.push()
        self.references += 1

    # -- drawing --------------------------------------------------------------------
    def joint_data(self):
        if self.runner is None or len(self.selected) != 2:
            return None
        try:
            view = self.runner.joint_view(*self.selected)
        except ValueError as exc:
            return {"error": str(exc)}
        view["samples"] = self.mcmc.pair(*self.selected)
        return view

    def push(self):
        """Send the current run's plot data to every plot in one batched update. The
        data are read here, on the caller's thread (a button's or a setting's callback
        runs on a Panel worker thread); the plots, plain Bokeh models that Panel does not
        route to the event loop itself, are changed by ``_draw`` on the event loop,
        under the document's lock, after any change already queued there (so a
        rebuild's busy overlay goes on before its new data and off after them)."""
        runner, problem = self.runner, self.problem     # read once: close() may run beside
        if runner is None or problem is None or self.closed:
            return
        frame = (runner, runner.snapshot(), tuple(self.selected), self.mcmc.band(),
                 self.joint_data(), problem.x_label, self._local_frame(runner, problem))
        pn.state.execute(lambda: self._draw(*frame), schedule="auto")

    def _local_frame(self, runner, problem):
        """The clicked point's local picture (``local_picture``), or None to leave the
        one drawn: no point, or a run redrawing it within the last second."""
        point = self.point
        if point is None or (self.running and time.monotonic() - self._local_drawn < 1.0):
            return None
        self._local_drawn = time.monotonic()
        label = where(problem, point)
        try:
            pic = runner.local(point)
        except ValueError as exc:
            return hv.Curve([]).opts(title=str(exc), xlabel=f"f at {label}")
        return local_picture(pic, label, self.mcmc.truth_for(problem), point, self.colours,
                             legend_position="bottom", fontsize={"title": 10})

    def _draw(self, runner, snap, selected, mcmc_band, joint, x_label, local=None):
        if self.closed or runner is not self.runner:
            return
        with pn.io.hold():
            if local is not None:
                self.local_pane.object, self.local_box.visible = local, True
            self.plots.update(snap, selected, mcmc_band, joint, x_label)
            self.mcmc_pane.object = self.mcmc.summary_html()
            self.mcmc_pane.visible = self.mcmc.samples is not None
            self.message = ""
            self._render_status(snap["status"])

    def _draw_no_run(self):
        """Empty plots while the settings cannot be built (on the event loop, as
        ``_draw``): nothing of the previous run is left to be read as the new one's."""
        if self.closed or self.runner is not None:
            return
        with pn.io.hold():
            self.plots.clear()
            self.mcmc_pane.visible = self.local_box.visible = False

    def _render_status(self, st=None):
        if self.message:
            self.status_pane.object = markup.error(self.message)
            return
        if st is None:
            return
        stop = st.get("stop")
        if stop == "converged":
            state = "<b class='bn-good'>converged</b>"
        elif stop is not None and stop.startswith("diverged"):
            why = STOP_REASONS[stop].removeprefix("diverged: ")
            state = (f"<b class='bn-bad'>diverged</b>: {why}; the last good iterate is shown")
        elif stop == "cap":
            state = (f"<b class='bn-warn'>cap reached</b>: stopped at the iteration cap "
                     f"({st['max_iters']}) before converging")
        elif stop == "stalled":
            why = STOP_REASONS[stop].removeprefix("stopped: ")
            state = f"<b class='bn-warn'>stalled</b>: {why}"
        elif self.running:
            state = "<b>running</b>"
        elif self.cancelled:
            state = "<b class='bn-warn'>cancelled</b>: paused before converging (▶ Run goes on)"
        else:
            state = "ready" if st["iteration"] == 0 else "paused"
        control = (f" · {st['rejected']} proposed step(s) rejected by the safeguards"
                   if st["rejected"] else "")
        if st["rejected"] and st["step_size"] < st["first_step_size"] * (1 - 1e-9):
            # the step control halves ρ; an Anderson-mixed step is rejected without
            control += f"; ρ reduced to <b>{st['step_size']:.3g}</b>"
        if st["rejected"]:
            control += (" <span class='bn-reason'>(a proposed step that would make a "
                        "covariance not positive definite, overflow, or lower the ELBO is "
                        "not taken: the iterate stays, amber in the PSD strip)</span>")
        self.status_pane.object = (f"Method <b>{self.settings.method}</b> · iteration "
                                   f"<b>{st['iteration']}</b> · energy <b>{st['energy']:.4f}</b>"
                                   f" · {state}{control}")
