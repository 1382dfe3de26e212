"""One data point's local picture: the approximation q(fᵢ), the cavity, the tilted
distribution cavity × p(yᵢ | fᵢ)^α (``Runner.local``, ``bnlab.studies.tilted_marginal``)
and, with the MCMC reference, the exact marginal p(fᵢ | y) as a weighted histogram:
where the Gaussian sits against the shape it summarises (an outlier's second mode, a
skewed class). The Live page draws it beside the band for a clicked point."""
from __future__ import annotations

import holoviews as hv
import numpy as np

from .palette import LIGHT, Palette

#: q's colour, the tilted distribution's (as the α explorer draws them)
Q_COLOUR, TILTED_COLOUR = "#1f5fa8", "#d62728"


def where(problem, point: int) -> str:
    """The point's words on the x axis: its index, input and label (numbers only)."""
    return (f"point {point} (x = {float(problem.x_plot[point]):.3g}, "
            f"y = {float(np.asarray(problem.y)[point]):.3g})")


def mcmc_marginal(truth: dict, point: int, ink: str, bins: int = 20):
    """The MCMC samples of f at data point ``point`` (``MCMCReference.truth_for``), a
    density histogram with the AIS weights."""
    density, edges = np.histogram(truth["samples"][:, point], bins=bins,
                                  weights=truth["weights"], density=True)
    return hv.Histogram((edges, density), kdims=["f"], vdims=["density"],
                        label=f"MCMC p(fᵢ | y), ESS {truth['ess']:.0f}").opts(
        fill_color=ink, fill_alpha=0.15, line_color=ink, line_alpha=0.5)


def local_picture(pic: dict, label: str, truth: dict | None = None, point: int = 0,
                  colours: Palette = LIGHT, **opts):
    """q(fᵢ), the tilted distribution and the cavity of ``pic`` (``tilted_marginal``'s
    dict) on an axis labelled ``label``, under MCMC's marginal at ``point`` if ``truth``
    is given. Without a proper cavity there is no tilted distribution: the title says
    so. ``opts``: the overlay's HoloViews options (size, title)."""
    a = pic["alpha"]
    layers = [hv.Curve((pic["f"], pic["q"]), "f", "density", label="q(fᵢ)")
              .opts(color=Q_COLOUR, line_width=2)]
    if pic["tilted"] is None:
        title = f"α = {a:g}: cavity not positive definite, no tilted distribution"
    else:
        layers += [hv.Curve((pic["f"], pic["tilted"]), "f", "density",
                            label=f"tilted ∝ cavity × p(yᵢ|fᵢ)^{a:g}")
                   .opts(color=TILTED_COLOUR, line_width=2, line_dash="dashed"),
                   hv.Curve((pic["f"], pic["cavity"]), "f", "density", label="cavity")
                   .opts(color="#888888", line_dash="dotted")]
        title = f"q(fᵢ) against the tilted, α = {a:g}"
    if truth is not None:
        layers.insert(0, mcmc_marginal(truth, point, colours.ink))
    return hv.Overlay(layers).opts(**{"title": title, "xlabel": f"f at {label}",
                                      "ylabel": "density", **opts})


def run_point_picture(runner, problem, point: int, truth: dict | None = None,
                      colours: Palette = LIGHT):
    """The Live page's picture of ``point`` for ``runner``'s current state, or an empty
    plot whose title says why there is none (``Runner.local``'s error)."""
    label = where(problem, point)
    try:
        pic = runner.local(point)
    except ValueError as exc:
        return hv.Curve([]).opts(title=str(exc), xlabel=f"f at {label}")
    return local_picture(pic, label, truth, point, colours, legend_position="bottom",
                         fontsize={"title": 10})
