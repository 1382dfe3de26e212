"""Surfaces page: each method's approximate log marginal likelihood over a grid of two
hyperparameters (``bnlab.surface``), with a shared colour scale, the MCMC (AIS)
surface's contours overlaid, argmax markers, hyperparameter-learning paths, a slice
view, progress and cancel, and exports to CSV / netCDF (PNG through each plot's save
tool)."""
from __future__ import annotations

import io
import threading
import time
from html import escape

import holoviews as hv
import numpy as np
import panel as pn
import param

from bnlab.methods import REGISTRY, takes_alpha

from . import catalog, markup
from .layout import controls_row
from .live_recompute import LiveRecompute
from .mcmc_notes import mcmc_note, unsettled_cells
from .mcmc_ref import schedule_ladder
from .problem import build_problem
from .provenance import ComputedWith
from .settings import LIKELIHOOD_CONTROLS, LabSettings
from .trajectories import LEARNERS, learn_trajectories

AXES = ("lengthscale", "variance", "period", *LIKELIHOOD_CONTROLS, "alpha")
#: the sidebar setting behind each surface axis
THETA_SETTINGS = {**{a: a for a in AXES}, **LIKELIHOOD_CONTROLS}
#: how each variable is labelled (the colour bar, the slice's axis)
VARIABLE_LABELS = {"log_marginal_per_n": "log p(y) / n", "log_marginal": "log p(y)"}
#: a surface panel's size: two to a row within the ≈ 600 px a page has at 1024 px with
#: the sidebar open (three of 340 px cut the third colour bar off even at 1366 px), each
#: colour bar below its frame, which a bar beside it left ≈ 100 px wide
PANEL_WIDTH, PANEL_HEIGHT = 290, 350
#: iterations per cell: ``bnlab.surface``'s default, named for the page's note
SURFACE_MAX_ITERS = 200
#: a cell with no value (its method diverged there, or a cancelled run never reached it)
NO_VALUE = "#bdbdbd"


def shown_values(ds, variable="log_marginal_per_n") -> np.ndarray:
    """``ds[variable]`` as the panels and the slice draw it: NaN where the method
    diverged. ``bnlab.surface`` keeps there the energy of the last valid iterate (a
    point on the way, often the prior's); drawn, it would pass for that method's value
    at θ. The α explorer and the pair likewise draw nothing for a diverged run."""
    vals = np.array(ds[variable].values, dtype=float)
    if "diverged" in ds:
        vals[ds["diverged"].values.astype(bool)] = np.nan
    return vals


def convergence_note(ds, max_iters: int) -> str:
    """Per method, the cells drawn grey because it diverged there, and the cells drawn
    at their last iterate because it did not converge within ``max_iters`` iterations
    (numbers and the methods' names, escaped)."""
    if "diverged" not in ds or "converged" not in ds:
        return ""
    lines = []
    cells = ds.sizes[ds["log_marginal"].dims[1]] * ds.sizes[ds["log_marginal"].dims[2]]
    for m in ds["scheme"].values:
        if str(m) == "mcmc":
            continue
        d, name = ds.sel(scheme=m), escape(str(m))
        diverged = int(d["diverged"].sum())
        open_ = int((np.isfinite(d["log_marginal"].values) & ~d["converged"].values
                     & ~d["diverged"].values).sum())
        if diverged:
            lines.append(f"<b class='bn-bad'>{name} diverged</b> at {diverged} of {cells} cells: "
                         "grey, no value")
        if open_:
            lines.append(f"<b class='bn-warn'>{name} not converged</b> within {max_iters} "
                         f"iterations at {open_} of {cells} cells: drawn at its last iterate")
    return "<br>".join(lines)


def available_axes(settings: LabSettings, methods=()) -> list:
    """The hyperparameters the current model has (a surface over another fails): the
    kernel's, the likelihood's (the keys of its ``init_params()`` the lab has a control
    for: noise, scale, df), and α when a chosen method has it
    (``bnlab.methods.takes_alpha``, with the default options the surface runs each
    method with)."""
    out = ["lengthscale", "variance"]
    if settings.kernel == "periodic":
        out.append("period")
    try:
        lik = catalog.make_likelihood(settings.resolved_likelihood()).init_params()
    except ValueError:            # no longer offered: the surface's run says so
        lik = {}
    out += [axis for axis in LIKELIHOOD_CONTROLS if axis in lik]
    if any(takes_alpha(m) for m in methods if m in REGISTRY):
        out.append("alpha")
    return out


def current_theta(settings: LabSettings) -> dict:
    """The sidebar's value of every surface axis (the ★ on the panels)."""
    return {axis: getattr(settings, name) for axis, name in THETA_SETTINGS.items()}


def _log_coords(values):
    return np.log10(np.asarray(values, float))


def star_xy(current, ax0, ax1) -> list:
    """The sidebar's θ (``current``, {axis: value}) on a panel with ``ax1`` across and
    ``ax0`` up, in log10 coordinates: one point, or none when it lacks either axis."""
    return ([(float(np.log10(current[ax1])), float(np.log10(current[ax0])))]
            if current and ax0 in current and ax1 in current else [])


def _trajectory_overlay(trajectories, ax0, ax1):
    """Learning paths (log10 coordinates): a line, a hollow start and a filled end."""
    layers = []
    for label, t in (trajectories or {}).items():
        if ax0 not in t or ax1 not in t:
            continue
        px, py = _log_coords(t[ax1]), _log_coords(t[ax0])
        layers.append(hv.Path([np.column_stack([px, py])], label=label).opts(
            color=t.colour, line_width=2))
        layers.append(hv.Points([(px[0], py[0])]).opts(color=t.colour, marker="circle",
                                                        size=8, fill_alpha=0))
        # the legend entry (HoloViews gives paths none): the filled end point
        layers.append(hv.Points([(px[-1], py[-1])], label=label).opts(
            color=t.colour, marker="circle", size=8))
    return layers


def best_row(ds, variable="log_marginal_per_n") -> int:
    """The grid row (axis0 index) of the best cell: MCMC's if its surface was computed
    (the truth the others are read against), else the first method's with a finite
    value; the middle row if none has one. The slice opens there, through the ×."""
    vals = shown_values(ds, variable)
    methods = [str(m) for m in ds["scheme"].values]
    order = ([methods.index("mcmc")] if "mcmc" in methods else []) + list(range(len(methods)))
    for k in order:
        if np.isfinite(vals[k]).any():
            return int(np.unravel_index(np.nanargmax(vals[k]), vals[k].shape)[0])
    return vals.shape[1] // 2


def contour_layout(ds, variable="log_marginal_per_n", levels=12, trajectories=None,
                   current=None, star_hook=None):
    """The contour panels, one per method with shared colour limits, from a surface
    Dataset with dims (scheme, axis0, axis1) (its slice: ``slice_plot``); ``trajectories`` ({label: Trajectory}, see
    ``trajectories.learn_trajectories``) are drawn on every panel, with a legend, and
    ``current`` ({axis: value}, the sidebar's θ) as a white star; ``star_hook``, if
    given, is each star's HoloViews hook (``SurfacesView`` keeps the stars' Bokeh data
    sources with it, to move them alone when θ changes)."""
    _, ax0, ax1 = ds[variable].dims
    zdim = hv.Dimension(variable, label=VARIABLE_LABELS.get(variable, variable))
    x, y = _log_coords(ds[ax1].values), _log_coords(ds[ax0].values)
    vals = shown_values(ds, variable)
    finite = vals[np.isfinite(vals)]
    if finite.size == 0:
        clim = (0.0, 1.0)
    else:   # the interesting range is near the optimum: clip the deep valleys
        hi = float(finite.max())
        lo = max(float(finite.min()), hi - 10 * max(float(np.ptp(finite)) / 10, 1e-9))
        lo = max(lo, float(np.percentile(finite, 5)))
        clim = (lo, hi if hi > lo else lo + 1e-9)
    methods = [str(m) for m in ds["scheme"].values]
    ref = grey = None
    if "mcmc" in methods:
        unsettled = unsettled_cells(ds)
        truth = vals[methods.index("mcmc")].copy()
        if unsettled is not None and unsettled.any():
            truth[unsettled] = np.nan          # no contour where MCMC cannot order them
            grey = hv.Image((x, y, np.where(unsettled, 1.0, np.nan)),
                            [f"log10 {ax1}", f"log10 {ax0}"], group="Unsettled").opts(
                cmap=[NO_VALUE], alpha=0.75, clipping_colors={"NaN": "transparent"},
                colorbar=False, tools=[])
        ref = hv.operation.contours(
            hv.Image((x, y, truth), [f"log10 {ax1}", f"log10 {ax0}"], zdim, group="Truth"),
            levels=levels, filled=False).opts(
            color="black", line_dash="dashed", line_width=1, cmap=["#000000"], colorbar=False,
            show_legend=False) if np.isfinite(truth).any() else None
    panels = []
    for k, m in enumerate(methods):
        z = vals[k]
        img = hv.Image((x, y, z), [f"log10 {ax1}", f"log10 {ax0}"], zdim).opts(
            cmap="viridis", clim=clim, clipping_colors={"NaN": NO_VALUE},
            colorbar=True, colorbar_position="bottom",
            tools=["hover"], width=PANEL_WIDTH, height=PANEL_HEIGHT,
            title=m if grey is None or m != "mcmc" else
            f"{m} · grey: {int(unsettled.sum())} cells it cannot order")
        layer = img * hv.operation.contours(img, levels=levels, filled=False).opts(
            cmap=["#ffffff"], line_width=1, colorbar=False, alpha=0.6, show_legend=False)
        if np.isfinite(z).any():
            i0, i1 = np.unravel_index(np.nanargmax(z), z.shape)
            layer = layer * hv.Points([(x[i1], y[i0])]).opts(color="#d62728", marker="x", size=14,
                                                             line_width=3)
        if ref is not None and m != "mcmc":
            layer = layer * ref
        if grey is not None and m == "mcmc":
            layer = layer * grey
        for path in _trajectory_overlay(trajectories, ax0, ax1):
            layer = layer * path
        if current:
            layer = layer * hv.Points(star_xy(current, ax0, ax1),
                                      [f"log10 {ax1}", f"log10 {ax0}"]).opts(
                color="white", line_color="black", marker="star", size=16,
                hooks=[star_hook] if star_hook else [])
        if trajectories:
            layer = layer.opts(show_legend=True, legend_position="bottom_right")
        panels.append(layer)
    return hv.Layout(panels).cols(2)


def slice_plot(ds, variable="log_marginal_per_n", slice_index=None):
    """Every method's ``variable`` along row ``slice_index`` of the grid (the middle row
    if None), against log10 of the column axis."""
    _, ax0, ax1 = ds[variable].dims
    zdim = hv.Dimension(variable, label=VARIABLE_LABELS.get(variable, variable))
    x, rows = _log_coords(ds[ax1].values), ds.sizes[ax0]
    j = rows // 2 if slice_index is None else min(max(int(slice_index), 0), rows - 1)
    vals = shown_values(ds, variable)
    curves = [hv.Curve((x, vals[k][j]), f"log10 {ax1}", zdim, label=str(m))
              for k, m in enumerate(ds["scheme"].values)]
    return hv.Overlay(curves).opts(
        title=f"slice at {ax0} = {ds[ax0].values[j]:.3g}", responsive=True, min_height=260,
        legend_position="right")


#: the MCMC schedules offered (AIS temperatures per grid point): those of the live
#: page's MCMC reference, each four times the time of the one before
MCMC_TEMPS = schedule_ladder()


def _duration(seconds: float) -> str:
    """Seconds as a person reads them: '40 s', '3 min'."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class SurfacesView(pn.viewable.Viewer):
    axis0 = param.Selector(default="variance", objects=list(AXES))
    axis1 = param.Selector(default="lengthscale", objects=list(AXES))
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
        self.dataset = None
        self._cancel = threading.Event()
        self.made = ComputedWith(settings, ignore=("method",))
        # a surface computed in under a second follows the sidebar (``live_recompute``)
        self._computing = threading.Lock()
        self.live = LiveRecompute(self.made, self._recompute, self._cancel)
        # the ★ follows the sidebar's hyperparameters: its data sources on the page
        # (one per panel and page render) are moved alone, since drawing the panels
        # again (contours and all) for each slider move is the slow part of this page
        self._stars = []
        settings.param.watch(lambda *_: self._move_star(), sorted(set(THETA_SETTINGS.values())))
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
        self.trajectories = {}
        self.compute_button = pn.widgets.Button(label="Compute surfaces", color="primary",
                                                width=200)
        self.cancel_button = pn.widgets.Button(label="Cancel", color="danger", disabled=True,
                                               width=120)
        self.compute_button.on_click(lambda e: self.compute())
        self.cancel_button.on_click(lambda e: self._cancel.set())
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

    def __panel__(self):
        return self.layout

    def _refresh_axes(self):
        """Offer only the hyperparameters the current model has."""
        axes = available_axes(self.settings, self.methods.value)
        for name, fallback in (("axis0", "variance"), ("axis1", "lengthscale")):
            self.param[name].objects = axes
            if getattr(self, name) not in axes:
                setattr(self, name, fallback)

    def close(self):
        """The session is gone: cancel a running computation, drop the surface."""
        self._cancel.set()
        self.live.stop()
        self.dataset, self.trajectories = None, {}
        self.made.forget()

    def grid(self) -> dict:
        if self.axis0 == self.axis1:
            raise ValueError("choose two different hyperparameters for rows and columns")
        out = {}
        for name, lo, hi in ((self.axis0, self.lo0, self.hi0), (self.axis1, self.lo1, self.hi1)):
            if not (lo > 0 and hi > lo):
                raise ValueError(f"{name}: the range needs 0 < from < to, got {lo} … {hi}")
            out[name] = np.geomspace(lo, hi, self.points)
        return out

    def _advance(self, fraction: float, started: float):
        """The progress bar and, once part of the grid is done, the time left at the
        pace so far (the first blocks include compiling: the estimate falls after)."""
        self.progress.value = int(100 * fraction)
        if fraction > 0:
            left = (time.monotonic() - started) * (1 - fraction) / fraction
            self.time_left.object = f"{100 * fraction:.0f} % · about {_duration(left)} left"

    def compute(self):
        """Compute the surfaces for the settings shown, one computation at a time (a
        recomputation after a sidebar change waits for the one under way, which the
        change cancelled)."""
        with self._computing:
            self._compute()

    def _recompute(self):
        """After sidebar changes (``live_recompute``): the surfaces again, unless the
        ones on screen were computed meanwhile (a tour's step) for the settings shown."""
        with self._computing:
            ds = self.dataset
            if ds is not None and (self.made.changed() or ds.attrs.get("cancelled")):
                self._compute()

    def _compute(self):
        import bnlab
        made = self.made.current()
        try:
            problem = build_problem(self.settings)
            grid = self.grid()
        except ValueError as exc:
            self.message.object = markup.error(exc)
            return
        self._cancel.clear()
        self.message.object = ""
        self.compute_button.disabled, self.cancel_button.disabled = True, False
        self.progress.value, self.progress.visible = 0, True
        self.time_left.object = "starting: the first grid points compile their programs …"
        started = time.monotonic()
        s = self.settings
        try:
            ds = bnlab.surface(problem.model, problem.X, problem.y, methods=list(self.methods.value),
                               grid=grid, params=problem.params, alpha=s.alpha,
                               max_iters=SURFACE_MAX_ITERS,
                               damping=s.rho, backtracking=s.backtrack,
                               acceleration=s.accelerate,
                               cubature=("gauss_hermite", s.cubature_order),
                               progress=lambda f: self._advance(f, started),
                               cancel=self._cancel, batching="auto",
                               mcmc_options={"num_temps": self.mcmc_temps})
            self.trajectories = {}
            if self.learners.value and not ds.attrs.get("cancelled"):
                self.message.object = "Learning the hyperparameters …"
                self.trajectories = learn_trajectories(
                    problem, (self.axis0, self.axis1), self.learners.value, damping=s.rho,
                    cubature=("gauss_hermite", s.cubature_order))
                self.message.object = "Learning stopped: " + ", ".join(
                    f"{k} ({t.stop_reason})" for k, t in self.trajectories.items())
            seconds = time.monotonic() - started
        except ValueError as exc:
            self.message.object = markup.error(exc)
            return
        finally:
            self.compute_button.disabled, self.cancel_button.disabled = False, True
            self.progress.visible = False
            self.time_left.object = ""
        self.live.finished(seconds, cancelled=bool(ds.attrs.get("cancelled")))
        if ds.attrs.get("cancelled"):
            self.message.object = "Cancelled: cells not computed are grey."
        elif self.live.active:
            follow = (f"Computed in {seconds:.2g} s: the surfaces follow the sidebar's "
                      "settings as they change.")
            self.message.object = "<br>".join(t for t in (self.message.object, follow) if t)
        converging = convergence_note(ds, SURFACE_MAX_ITERS)
        if converging:
            self.message.object = "<br>".join(t for t in (self.message.object, converging) if t)
        more = ("choose more MCMC temperatures and compute again"
                if self.mcmc_temps < MCMC_TEMPS[-1] else "")
        note = mcmc_note(ds, remedy=more)
        if note:
            self.message.object = "<br>".join(t for t in (self.message.object, note) if t)
        self.dataset = ds
        # the grid's own axes are not the sidebar's: their sidebar values only move the ★
        self.made.record(made, free={THETA_SETTINGS[a] for a in (self.axis0, self.axis1)})
        row = best_row(ds, self.variable.value)
        with pn.io.hold():
            moved = row != self.slice.value
            # a row that moved draws the slice (its watcher); one that did not, here
            self.slice.param.update(end=ds.sizes[self.axis0] - 1, value=row)
            if not moved:
                self._draw_slice()
            self._draw_contours()
        self.downloads.visible = True

    def draw(self):
        with pn.io.hold():
            self._draw_contours()
            self._draw_slice()

    def _draw_contours(self):
        if self.dataset is None:
            return
        self._stars = []
        self.contours.object = contour_layout(self.dataset, self.variable.value,
                                              trajectories=self.trajectories,
                                              current=current_theta(self.settings),
                                              star_hook=self._keep_star)

    def _draw_slice(self):
        if self.dataset is not None:
            self.slice_pane.object = slice_plot(self.dataset, self.variable.value,
                                                self.slice.value)

    def _star_data(self, x: str, y: str) -> dict:
        """The ★'s source data (columns ``x``, ``y``: "log10 <axis>") at the sidebar's θ."""
        xy = star_xy(current_theta(self.settings), y.removeprefix("log10 "),
                     x.removeprefix("log10 "))
        return {x: [p[0] for p in xy], y: [p[1] for p in xy]}

    def _keep_star(self, plot, element):
        """A panel's ★ as drawn on a page: at the θ of now (the page may be drawn again
        after θ changed, when the Surfaces page is shown again), and kept to move."""
        source, x, y = plot.handles["source"], *(d.name for d in element.kdims)
        source.data = self._star_data(x, y)
        self._stars.append((source, x, y))

    def _move_star(self):
        """The ★ of every panel to the sidebar's θ: its Bokeh source's data, changed on
        the event loop under the document's lock (a setting's callback runs on a Panel
        worker thread, and Panel does not route plain Bokeh changes itself)."""
        # every panel drawn since the surface was: a hidden page's too (its models are
        # out of the document until it is shown again, and come back as they were)
        data = [(source, self._star_data(x, y)) for source, x, y in self._stars]
        if not data:
            return

        def move():
            with pn.io.hold():
                for source, new in data:
                    source.data = new
        pn.state.execute(move, schedule="auto")

    def _csv(self):
        return io.StringIO(self.dataset.to_dataframe().to_csv())

    def _netcdf(self):
        return io.BytesIO(self.dataset.to_netcdf())
