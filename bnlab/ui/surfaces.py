"""Surfaces page: each method's approximate log marginal likelihood over a grid of two
hyperparameters, with a shared colour scale, the MCMC (AIS) surface's contours
overlaid, argmax markers, hyperparameter-learning paths, a slice view, progress and
cancel, and exports to CSV / netCDF (PNG through each plot's save tool). The page
chooses the grid and draws; the computation is its model's (``surfaces_model``), the
plots ``surface_plots``'."""
from __future__ import annotations

import io
import time

import panel as pn
import param

from . import catalog, markup
from .layout import controls_row
from .live_recompute import LiveRecompute
from .mcmc_notes import mcmc_note
from .provenance import ComputedWith
from .settings import LabSettings
from .surface_plots import best_row, contour_layout, convergence_note, slice_plot
from .surface_stars import Stars
from .surfaces_model import (MCMC_TEMPS, SURFACE_MAX_ITERS, THETA_SETTINGS, SurfacesModel,
                             available_axes, current_theta)
from .trajectories import LEARNERS


def _duration(seconds: float) -> str:
    """Seconds as a person reads them: '40 s', '3 min'."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class SurfacesView(pn.viewable.Viewer):
    """The grid's controls (rows, columns, their ranges, points per axis, the methods,
    the learners, MCMC's schedule), the page's ``SurfacesModel`` (``model``), computed
    on the button or, while quick, as the sidebar changes (``live``), and its
    drawing."""

    # every kernel has these two; the model's other axes are offered by ``_refresh_axes``
    axis0 = param.Selector(default="variance", objects=["variance", "lengthscale"])
    axis1 = param.Selector(default="lengthscale", objects=["variance", "lengthscale"])
    lo0 = param.Number(default=0.1)
    hi0 = param.Number(default=100.0)
    lo1 = param.Number(default=0.1)
    hi1 = param.Number(default=20.0)
    points = param.Integer(default=11, bounds=(3, 41))
    mcmc_temps = param.Selector(default=MCMC_TEMPS[0], objects=list(MCMC_TEMPS),
                                doc="AIS temperatures per grid point (MCMC's schedule)")

    def __init__(self, settings: LabSettings, **params):
        super().__init__(**params)
        self.settings = settings
        self.model = SurfacesModel(settings)
        self.made = ComputedWith(settings, ignore=("method",))
        # a surface computed in under a second follows the sidebar (``live_recompute``)
        self.live = LiveRecompute(self.made, self._recompute, self.model.cancel)
        self.stars = Stars(settings)         # the ★ follows the sidebar's hyperparameters
        self.message = markup.html_pane("", sizing_mode="stretch_width")
        choices = list(catalog.methods()) + ["mcmc"]
        self.methods = pn.widgets.MultiChoice(label="Methods", options=choices,
                                              value=["laplace", "vi", "ep", "ep_like"],
                                              sizing_mode="stretch_width")
        self.methods.param.watch(lambda e: self._refresh_axes(), "value")
        settings.param.watch(lambda *_: self._refresh_axes(),
                             ["dataset", "likelihood", "kernel", "csv_text"])
        self.learners = pn.widgets.MultiChoice(
            label="Learning trajectories (optimise the two axes from the sidebar's values)",
            options=list(LEARNERS), value=[], sizing_mode="stretch_width")
        self.compute_button = pn.widgets.Button(label="Compute surfaces", color="primary",
                                                width=200)
        self.cancel_button = pn.widgets.Button(label="Cancel", color="danger", disabled=True,
                                               width=120)
        self.compute_button.on_click(lambda e: self.compute())
        self.cancel_button.on_click(lambda e: self.model.cancel.set())
        self.progress = pn.indicators.Progress(value=0, max=100, width=300, visible=False)
        self.time_left = markup.html_pane("", margin=(0, 10))
        self.variable = pn.widgets.RadioButtonGroup(
            options={"log p(y) / n": "log_marginal_per_n", "log p(y)": "log_marginal"},
            value="log_marginal_per_n", width=240)
        self.slice = pn.widgets.IntSlider(label="Slice row", start=0, end=self.points - 1,
                                          value=self.points // 2, width=300)
        self.variable.param.watch(lambda e: self.draw(), "value")
        self.slice.param.watch(lambda e: self._draw_slice(), "value")   # the slice alone
        self.contours = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self.slice_pane = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self.downloads = controls_row(
            pn.widgets.FileDownload(callback=self._csv, filename="surface.csv",
                                    label="Download CSV", color="light", width=160),
            pn.widgets.FileDownload(callback=self._netcdf, filename="surface.nc",
                                    label="Download netCDF", color="light", width=160),
            pn.pane.Markdown("PNG: the save tool on each plot's toolbar.", width=300),
            visible=False)
        p = self.param
        self.mcmc_temps_widget = pn.widgets.Select.from_param(
            p.mcmc_temps, label="MCMC temperatures (AIS)", width=200,
            visible="mcmc" in self.methods.value)
        self.methods.param.watch(
            lambda e: setattr(self.mcmc_temps_widget, "visible", "mcmc" in e.new), "value")
        axis_row = controls_row(
            pn.Column(pn.widgets.Select.from_param(p.axis0, label="Rows", width=130),
                      pn.widgets.FloatInput.from_param(p.lo0, label="from", width=130),
                      pn.widgets.FloatInput.from_param(p.hi0, label="to", width=130),
                      width=140),
            pn.Column(pn.widgets.Select.from_param(p.axis1, label="Columns", width=130),
                      pn.widgets.FloatInput.from_param(p.lo1, label="from", width=130),
                      pn.widgets.FloatInput.from_param(p.hi1, label="to", width=130),
                      width=140),
            pn.Column(pn.widgets.IntSlider.from_param(p.points, label="Points per axis",
                                                      width=200),
                      self.mcmc_temps_widget, width=210))
        self.layout = pn.Column(
            pn.pane.Markdown("### Marginal-likelihood surfaces\nEach method's approximation of "
                             "log p(y | θ) on a log-spaced grid (hyperparameters fixed per cell; "
                             "other settings from the sidebar). Dashed black: MCMC (AIS), "
                             "where its interval can order the methods (grey on its panel "
                             "where it cannot). "
                             "Red ×: the best cell. ★: the sidebar's hyperparameters. "
                             "Learning paths run from a hollow to a filled circle."),
            self.methods, axis_row, self.learners,
            controls_row(self.compute_button, self.cancel_button, self.progress,
                         self.time_left),
            self.message, self.made.note, controls_row(self.variable, self.slice), self.contours,
            self.slice_pane,
            self.downloads, sizing_mode="stretch_width")

        self._refresh_axes()
        self.model.param.watch(self._on_computing, "computing")
        self.model.param.watch(self._advance, "fraction")
        self.model.param.watch(lambda e: setattr(self.message, "object", e.new), "message")

    def __panel__(self):
        return self.layout

    def _refresh_axes(self):
        """Offer only the hyperparameters the current model has."""
        axes = available_axes(self.settings, self.methods.value)
        for name, fallback in (("axis0", "variance"), ("axis1", "lengthscale")):
            self.param[name].objects = axes
            if getattr(self, name) not in axes:
                setattr(self, name, fallback)

    #: the model's surface (None before the first) and learning paths, through the page
    dataset = property(lambda self: self.model.dataset,
                       lambda self, ds: setattr(self.model, "dataset", ds))
    trajectories = property(lambda self: self.model.trajectories)

    def close(self):
        """The session is gone: cancel a running computation, drop the surface."""
        self.model.close()
        self.live.stop()
        self.made.forget()

    def _on_computing(self, event):
        """The buttons, the progress bar and the message while a surface is computed."""
        computing = event.new
        self.compute_button.disabled, self.cancel_button.disabled = computing, not computing
        self.progress.visible = computing
        if computing:
            self.message.object, self.progress.value = "", 0
            self.time_left.object = "starting: the first grid points compile their programs …"
        else:
            self.time_left.object = ""

    def _advance(self, event):
        """The progress bar and, once part of the grid is done, the time left at the
        pace so far (the first blocks include compiling: the estimate falls after)."""
        fraction = event.new
        self.progress.value = int(100 * fraction)
        if fraction > 0:
            left = (time.monotonic() - self.model.started) * (1 - fraction) / fraction
            self.time_left.object = f"{100 * fraction:.0f} % · about {_duration(left)} left"

    def compute(self):
        """Compute the surfaces for the settings shown, one computation at a time (a
        recomputation after a sidebar change waits for the one under way, which the
        change cancelled)."""
        with self.model.lock:
            self._compute()

    def _recompute(self):
        """After sidebar changes (``live_recompute``): the surfaces again, unless the
        ones on screen were computed meanwhile (a tour's step) for the settings shown."""
        with self.model.lock:
            ds = self.dataset
            if ds is not None and (self.made.changed() or ds.attrs.get("cancelled")):
                self._compute()

    def _compute(self):
        made = self.made.current()
        try:
            seconds = self.model.compute(self.methods.value, (self.axis0, self.lo0, self.hi0),
                                         (self.axis1, self.lo1, self.hi1), self.points,
                                         self.learners.value, self.mcmc_temps)
        except ValueError as exc:
            self.message.object = markup.error(exc)
            return
        ds = self.dataset
        cancelled = bool(ds.attrs.get("cancelled"))
        self.live.finished(seconds, cancelled=cancelled)
        follow = ("Cancelled: cells not computed are grey." if cancelled else
                  f"Computed in {seconds:.2g} s: the surfaces follow the sidebar's settings "
                  "as they change." if self.live.active else "")
        more = ("choose more MCMC temperatures and compute again"
                if self.mcmc_temps < MCMC_TEMPS[-1] else "")
        self.message.object = "<br>".join(t for t in (
            self.model.message, follow, convergence_note(ds, SURFACE_MAX_ITERS),
            mcmc_note(ds, remedy=more)) if t)
        # the grid's own axes are not the sidebar's: their sidebar values only move the ★
        self.made.record(made, free={THETA_SETTINGS[a] for a in (self.axis0, self.axis1)
                                     if a in THETA_SETTINGS})
        row = best_row(ds, self.variable.value)
        # no ``pn.io.hold`` here or in ``draw``: they run on worker threads, where it
        # would hold the whole page (``held.held_on_event_loop``)
        moved = row != self.slice.value
        # a row that moved draws the slice (its watcher); one that did not, here
        self.slice.param.update(end=ds.sizes[self.axis0] - 1, value=row)
        if not moved:
            self._draw_slice()
        self._draw_contours()
        self.downloads.visible = True

    def draw(self):
        self._draw_contours()
        self._draw_slice()

    def _draw_contours(self):
        if self.dataset is None:
            return
        self.stars.clear()
        self.contours.object = contour_layout(self.dataset, self.variable.value,
                                              trajectories=self.trajectories,
                                              current=current_theta(self.settings),
                                              star_hook=self.stars.keep)

    def _draw_slice(self):
        if self.dataset is not None:
            self.slice_pane.object = slice_plot(self.dataset, self.variable.value,
                                                self.slice.value)

    def _csv(self):
        return io.StringIO(self.dataset.to_dataframe().to_csv())

    def _netcdf(self):
        return io.BytesIO(self.dataset.to_netcdf())
