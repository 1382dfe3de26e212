"""The Compare page's plots of its pair, from the runs' snapshots (``Runner.snapshot``):
each method's band over the data and its energy trace, with the MCMC reference as the
truth (its band, and log p(y) in the interval forward and reverse AIS give)."""
from __future__ import annotations

import holoviews as hv
import numpy as np

from .palette import LIGHT, Palette


def _mcmc_band(truth: dict, ink: str):
    """The MCMC reference's ±2σ band as the Live page draws it: dashed edges and a
    dotted mean, in the theme's ink."""
    b = truth["band"]
    edges = [np.column_stack([b["x"], b["lower"]]), np.column_stack([b["x"], b["upper"]])]
    return (hv.Path(edges, ["x", "f"], label="MCMC ± 2σ")
            .opts(color=ink, line_dash="dashed", line_width=1.5, show_legend=True)
            * hv.Curve((b["x"], b["mean"]), "x", "f", label="MCMC mean")
            .opts(color=ink, line_dash="dotted", line_width=1.5))


def _band(snap, label, colour, dash="solid"):
    b = snap["bands"]["f1"]
    return (hv.Area((b["x"], b["lower"], b["upper"]), "x", ["lower", "upper"], label=f"{label} ± 2σ")
            .opts(color=colour, alpha=0.15, line_alpha=0)
            * hv.Curve((b["x"], b["mean"]), "x", "f", label=f"{label} mean")
            .opts(color=colour, line_width=2, line_dash=dash))


def comparison_plots(snaps: dict, x_label="x", truth: dict | None = None,
                     colours: Palette = LIGHT):
    """Bands of each method over the data, and their energy traces, from snapshots;
    with ``truth`` (``MCMCReference.truth_for``), MCMC's band and log p(y). A diverged
    method has no band (its last valid iterate may be the prior: drawn, it would pass
    for that method's posterior), as in the α explorer; the title names it, and its
    trace, up to the divergence, is labelled so."""
    bands, traces, energies, diverged = [], [], [], []
    for (name, snap), c in zip(snaps.items(), ("#1f5fa8", "#c2571a")):
        bad = snap["status"]["diverged"]
        if bad:
            diverged.append(name)
        else:
            bands.append(_band(snap, name, c))
        t = snap["trace"]
        ok = np.isfinite(t["energy"])
        label = f"{name} (diverged)" if bad else name
        trace = (t["iteration"][ok], t["energy"][ok])
        traces.append(hv.Curve(trace, "iteration", "energy", label=label)
                      .opts(color=c, line_width=2))
        if bad:                  # often a point or two: a line alone would not show them
            traces.append(hv.Scatter(trace, "iteration", "energy", label=label)
                          .opts(color=c, size=7))
        energies += list(t["energy"][ok])
    title = "Posterior of each method" + "".join(f"; {n} diverged: no band" for n in diverged)
    if truth is not None:     # after the methods' (their dimensions name the axes), on top
        bands.append(_mcmc_band(truth, colours.ink))
        traces += _log_z_line(truth, 0, colours.ink)
    data = next(iter(snaps.values()))["data"]
    pts = hv.Scatter((data["x"], data["y"]), "x", "f").opts(color=colours.data, size=3, alpha=0.6)
    return (hv.Overlay(bands + [pts]).opts(title=title, xlabel=x_label,
                                           ylabel="latent f / data",
                                           responsive=True, min_height=300,
                                           legend_position="right"),
            hv.Overlay(traces).opts(title="Energy per iteration", responsive=True,
                                    min_height=260, legend_position="bottom_right",
                                    ylim=_energy_limits(energies, truth)))


def _log_z_line(truth: dict, x: float, ink: str) -> list:
    """MCMC's log p(y), the value every method's energy approximates (VI's from below):
    its interval (``MCMCReference.interval``: forward and reverse AIS, two standard
    errors out) shaded as a band, forward AIS's estimate as a line in the theme's ink,
    and a label at ``x`` saying whether the interval is resolved."""
    z, (lo, hi) = truth["log_z"], _interval(truth)
    label = " MCMC log p(y)" + ("" if truth.get("converged") else " (not resolved)")
    return [hv.HSpan(lo, hi).opts(color=ink, alpha=0.12),
            hv.HLine(z).opts(color=ink, line_width=1.5),
            hv.Text(x, z, label, halign="left", valign="bottom", fontsize=9)
            .opts(color=ink)]


def _interval(truth: dict) -> tuple:
    """The reference's interval, or ±2 standard errors of a forward-only estimate."""
    lo, hi = truth.get("interval", (np.nan, np.nan))
    z, se = truth["log_z"], truth["log_z_se"]
    return (lo if np.isfinite(lo) else z - 2 * se, hi if np.isfinite(hi) else z + 2 * se)


def _energy_limits(energies: list, truth: dict | None) -> tuple:
    """The energy axis's range: every valid energy, and MCMC's log p(y) and its
    interval (HoloViews leaves horizontal lines and their labels out of the range, so log p(y),
    above every energy, would be off the plot)."""
    values = list(energies)
    if truth is not None:
        values += [truth["log_z"], *_interval(truth)]
    if not values:
        return (None, None)
    lo, hi = min(values), max(values)
    pad = 0.08 * (hi - lo) or 0.1
    return (lo - pad, hi + pad)
