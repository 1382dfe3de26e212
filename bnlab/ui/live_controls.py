"""The Live page's driving controls: Run, Pause, Step, Reset, the speed, the iteration
cap and the MCMC reference's button. They follow the page's model (``LiveModel``): the
buttons work only while there is a run and it is not being rebuilt, Run only while the
run is not running and Pause only while it is; the MCMC button spins while it samples."""
from __future__ import annotations

import panel as pn

from . import markup
from .layout import controls_row
from .live_model import LiveModel


class RunControls(pn.viewable.Viewer):
    """The row of controls of ``model``'s run; ``run()`` starts the animation (the
    view's, which knows the session's page)."""

    def __init__(self, model: LiveModel, run):
        super().__init__()
        self.model, settings = model, model.settings
        self.run_button = pn.widgets.Button(label="▶ Run", color="success", width=90)
        self.pause_button = pn.widgets.Button(label="❚❚ Pause", width=90, disabled=True)
        self.step_button = pn.widgets.Button(label="Step", color="primary", width=90)
        self.reset_button = pn.widgets.Button(label="↺ Reset", width=90)
        self.run_button.on_click(lambda e: run())
        self.pause_button.on_click(lambda e: model.pause())
        self.step_button.on_click(lambda e: model.step())
        self.reset_button.on_click(lambda e: model.reset())
        speed = pn.widgets.FloatSlider.from_param(settings.param.speed,
                                                  label="Speed (iterations / s)", width=220)
        cap = pn.widgets.IntInput.from_param(settings.param.max_iters, label="Iteration cap",
                                             width=110, css_classes=["bn-cap"])
        self.mcmc_button = pn.widgets.Button(label="MCMC reference", width=140,
                                             description=markup.tooltip_below(
                                                 "sample the exact posterior (AIS + elliptical "
                                                 "slice sampling over 256 chains; tens of "
                                                 "seconds; again: a longer schedule)"))
        self.mcmc_button.on_click(lambda e: model.compute_mcmc())
        self.layout = controls_row(self.run_button, self.pause_button, self.step_button,
                                   self.reset_button, speed, cap, self.mcmc_button)
        model.param.watch(self._enable, ["busy", "running"], onlychanged=False)
        model.param.watch(lambda e: setattr(self.mcmc_button, "loading", e.new), ["sampling"])

    def __panel__(self):
        return self.layout

    def _enable(self, *_):
        m = self.model
        off = m.busy or m.runner is None
        for b in (self.step_button, self.reset_button, self.mcmc_button):
            b.disabled = off
        self.run_button.disabled = off or m.running
        self.pause_button.disabled = not m.running
