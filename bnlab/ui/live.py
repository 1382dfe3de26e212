"""Live view: run / step / pause / reset an inference run and watch the posterior band,
the predictive, the energy trace, the PSD strip, the sites and a two-point ellipse."""
from __future__ import annotations

import threading

import panel as pn
import param

from . import markup
from .controls import Status
from .live_plots import LivePlots
from .mcmc_ref import MCMCReference
from .problem import SettingError, build_problem
from .runner import Runner, make_runner
from .settings import URL_PARAMS, LabSettings

#: settings that define the run (changing them restarts it); speed only paces it
RUN_PARAMS = tuple(p for p in URL_PARAMS if p != "speed") + ("csv_text",)
MAX_FPS = 20


class LiveView(pn.viewable.Viewer):
    """One per browser session. ``rebuild()`` makes a new ``Runner`` from the settings;
    ``run()`` starts a periodic callback that steps it at ``settings.speed``."""

    running = param.Boolean(default=False)
    message = param.String(default="")

    def __init__(self, settings: LabSettings, status: Status, **params):
        super().__init__(**params)
        self.settings, self.status = settings, status
        self.runner: Runner | None = None
        self.problem = None
        self.selected: list[int] = []
        self.mcmc = MCMCReference()
        self._callback = None
        self._lock = threading.Lock()
        self._build_layout()
        settings.param.watch(self._on_settings, list(RUN_PARAMS))
        settings.param.watch(self._on_speed, ["speed"])

    # -- layout ---------------------------------------------------------------------
    def _build_layout(self):
        self.plots = LivePlots()
        self.plots.src["data"].selected.on_change("indices", self._on_tap)
        def bk(fig, css_classes=()):
            """A Bokeh pane in a Column that carries a CSS class (for tests and styling)."""
            return pn.Column(pn.pane.Bokeh(fig, sizing_mode="stretch_width"),
                             css_classes=list(css_classes), sizing_mode="stretch_width", margin=0)

        self.panes = {"band": bk(self.plots.band, css_classes=["bn-band"]),
                      "energy": bk(self.plots.energy, css_classes=["bn-energy"]),
                      "predictive": bk(self.plots.predictive),
                      "psd": bk(self.plots.psd, css_classes=["bn-psd"]),
                      "site_prec": bk(self.plots.site_prec), "site_nat1": bk(self.plots.site_nat1),
                      "joint": pn.pane.Bokeh(self.plots.joint)}
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
        self.pick_i = pn.widgets.IntInput(label="Point i", value=0, start=0, width=90)
        self.pick_j = pn.widgets.IntInput(label="Point j", value=1, start=0, width=90)
        pick = pn.widgets.Button(label="Show pair", width=90, align="end")
        pick.on_click(lambda e: self.select_pair(self.pick_i.value, self.pick_j.value))
        reason = MCMCReference.reason()
        self.mcmc_button = pn.widgets.Button(label="MCMC reference", width=140,
                                             disabled=reason is not None,
                                             description=reason or "sample the exact posterior "
                                             "(AIS + elliptical slice sampling; a few seconds)")
        self.mcmc_button.on_click(lambda e: self.compute_mcmc())
        self.status_pane = pn.pane.HTML("", css_classes=["bn-status"], sizing_mode="stretch_width")
        self.description = pn.pane.Markdown("", sizing_mode="stretch_width", margin=(0, 10))
        P = self.panes
        self.layout = pn.Column(
            pn.Row(self.run_button, self.pause_button, self.step_button, self.reset_button,
                   self.speed, self.mcmc_button, sizing_mode="stretch_width"),
            self.status_pane, self.description, P["band"],
            pn.Row(P["energy"], P["predictive"], sizing_mode="stretch_width"),
            P["psd"],
            pn.Row(P["site_prec"], P["site_nat1"], sizing_mode="stretch_width"),
            pn.Row(pn.Column(pn.pane.Markdown("**Two points** — the joint Gaussian q(fᵢ, fⱼ) "
                                              "of two latent values; click two data points in "
                                              "the posterior plot or pick their indices."),
                             pn.Row(self.pick_i, self.pick_j, pick)), P["joint"]),
            sizing_mode="stretch_width")

    def __panel__(self):
        return self.layout

    # -- building a run -------------------------------------------------------------
    def _on_settings(self, *events):
        self.rebuild()

    def rebuild(self):
        """New problem and runner from the settings; errors go next to their control."""
        self.pause()
        s = self.settings
        errors = {}
        try:
            problem = build_problem(s)
            self.status.input_dim = problem.input_dim
            runner = make_runner(problem, s)
        except SettingError as exc:
            errors[exc.control] = str(exc)
        except (ValueError, TypeError) as exc:
            errors["method"] = str(exc)
        if errors:
            self.status.errors = errors
            self.message = next(iter(errors.values()))
            self._render_status()
            return False
        with self._lock:
            self.problem, self.runner = problem, runner
            self.selected = [i for i in self.selected if i < len(problem.x_plot)]
            self.mcmc.recall(problem)   # the same problem keeps its reference
        self.status.errors = {}
        self.description.object = (f"*{problem.description}* — {len(problem.x_plot)} training "
                                   f"points, {problem.input_dim}-D inputs.")
        self.push()
        return True

    # -- driving --------------------------------------------------------------------
    def step(self, k: int = 1):
        if self.runner is None:
            return
        with self._lock:
            self.runner.step(k)
        self.push()

    def reset(self):
        self.pause()
        if self.runner is not None:
            self.runner.reset()
            self.push()

    def run(self):
        if self.runner is None or self.running:
            return
        period, _ = self._pace()
        if self._callback is None:
            self._callback = pn.state.add_periodic_callback(self._tick, period=period, start=False)
        self._callback.period = period
        self._callback.start()
        self.running = True
        self.run_button.disabled, self.pause_button.disabled = True, False

    def pause(self):
        if self._callback is not None and self._callback.running:
            self._callback.stop()
        was_running, self.running = self.running, False
        self.run_button.disabled, self.pause_button.disabled = False, True
        if was_running and self.runner is not None:
            self._render_status(self.runner.snapshot()["status"])

    def _pace(self):
        """(callback period in ms, iterations per tick) for the chosen speed."""
        speed = float(self.settings.speed)
        period = max(1000.0 / MAX_FPS, 1000.0 / speed)
        return int(period), max(1, int(round(speed * period / 1000.0)))

    def _on_speed(self, *_):
        if self._callback is not None:
            self._callback.period = self._pace()[0]

    def _tick(self):
        if not self._lock.acquire(blocking=False):
            return          # the previous tick is still drawing: skip, never pile up
        try:
            runner = self.runner
            if runner is None:
                return
            runner.step(self._pace()[1])
        finally:
            self._lock.release()
        self.push()
        if runner.diverged or runner.converged:
            self.pause()

    # -- two points and MCMC --------------------------------------------------------
    def _on_tap(self, attr, old, new):
        """Bokeh selection on the data points: the last two clicked form the pair."""
        if self.problem is None or not new:
            return
        sel = (self.selected + [int(new[-1])])[-2:]
        if len(sel) == 2 and sel[0] != sel[1]:
            self.select_pair(*sel)
        else:
            self.selected = sel[-1:]
            self.push()

    def select_pair(self, i: int, j: int):
        self.selected = [int(i), int(j)]
        self.pick_i.value, self.pick_j.value = int(i), int(j)
        self.push()

    def compute_mcmc(self):
        if self.problem is None:
            return
        self.mcmc_button.loading = True
        try:
            self.mcmc.compute(self.problem)
        except ValueError as exc:
            self.message = f"MCMC reference: {exc}"
            self._render_status()
            return
        finally:
            self.mcmc_button.loading = False
        self.push()
        self.status_pane.object += (f" · MCMC (AIS) log p(y) ≈ <b>{self.mcmc.log_z:.3f}</b> ± "
                                    f"{self.mcmc.log_z_se:.3f}")

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
        """Send the current run's plot data to every plot in one batched update."""
        runner = self.runner
        if runner is None:
            return
        snap = runner.snapshot()
        with pn.io.hold():
            self.plots.update(snap, tuple(self.selected), self.mcmc.band(), self.joint_data(),
                              self.problem.x_label)
            self.message = ""
            self._render_status(snap["status"])

    def _render_status(self, st=None):
        if self.message:
            self.status_pane.object = markup.error(self.message)
            return
        if st is None:
            return
        why = ("gave a posterior that is not positive definite" if not st["last_step_psd"]
               else "needed a cavity that is not positive definite (its energy is undefined)"
               if not st["last_step_cavity_psd"]
               else "produced non-finite values (the iteration blew up)")
        state = (f"<b class='bn-bad'>diverged</b>: a step {why}; the last good iterate is shown"
                 if st["diverged"] else
                 "<b class='bn-good'>converged</b>" if st["converged"] else
                 "running" if self.running else "paused")
        control = (f" · {st['rejected']} proposed step(s) rejected by the safeguards; "
                   f"ρ is now <b>{st['step_size']:.3g}</b>" if st["rejected"] else "")
        self.status_pane.object = (f"Method <b>{self.settings.method}</b> · iteration "
                                   f"<b>{st['iteration']}</b> · energy <b>{st['energy']:.4f}</b>"
                                   f" · {state}{control}")
