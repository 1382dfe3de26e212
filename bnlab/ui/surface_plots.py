"""The Surfaces page's plots, from a surface Dataset (``bnlab.surface``, dims (scheme,
axis0, axis1)): each method's contours on a shared colour scale with the MCMC (AIS)
surface's contours overlaid, argmax markers, learning paths and the sidebar's ★
(``contour_layout``), a slice through one row (``slice_plot``), and the notes on the
cells drawn grey or at their last iterate (``convergence_note``)."""
from __future__ import annotations

from html import escape

import holoviews as hv
import numpy as np

from .mcmc_notes import unsettled_cells

#: how each variable is labelled (the colour bar, the slice's axis)
VARIABLE_LABELS = {"log_marginal_per_n": "log p(y) / n", "log_marginal": "log p(y)"}
#: a surface panel's size: two to a row within the ≈ 600 px a page has at 1024 px with
#: the sidebar open (three of 340 px cut the third colour bar off even at 1366 px), each
#: colour bar below its frame, which a bar beside it left ≈ 100 px wide
PANEL_WIDTH, PANEL_HEIGHT = 290, 350
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
    Dataset with dims (scheme, axis0, axis1) (its slice: ``slice_plot``);
    ``trajectories`` ({label: Trajectory}, see ``trajectories.learn_trajectories``) are
    drawn on every panel, with a legend, and ``current`` ({axis: value}, the sidebar's
    θ) as a white star; ``star_hook``, if given, is each star's HoloViews hook
    (``surface_stars.Stars`` keeps the stars' Bokeh data sources with it, to move them
    alone when θ changes)."""
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
