"""The α explorer's figures, drawn from a stored sweep (``alpha_sweep``): the converged
energy against α, the posterior bands, and q(fᵢ) against the tilted distribution at
one data point. Plain Bokeh, as the live view's figures (``live_plots``): each glyph
reads a ``ColumnDataSource``, and showing another α replaces the data of the few
sources that depend on it (the energy marker, the filled band, the point's densities),
so the slider and ▶ redraw nothing else.

The bands are drawn so that α's effect shows: VI's (α → 0) and EP's (α = 1) as
outlines (mean ± 2σ lines), the chosen α's filled between them, MCMC's dashed in the
theme's ink. A diverged run has no valid energy or band: its α is a red × on the
energy plot's floor, and its band is not drawn (its last valid iterate may be the
prior's: drawn, it would pass for that α's posterior)."""
from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure

from .alpha_sweep import diverged
from .live_plots import _legend_lists_what_has_data
from .palette import LIGHT, Palette

VI_COLOUR, PEP_COLOUR, EP_COLOUR, BAD = "#4c9a2a", "#1f5fa8", "#c2571a", "#d62728"
#: the columns of each source (what ``sweep_layers``, ``alpha_layers`` and
#: ``point_picture`` fill)
COLUMNS = {"curve": ("alpha", "energy"), "diverged": ("alpha", "energy"),
           "shown": ("alpha", "energy"), "vi_line": ("alpha", "energy"),
           "logz": ("alpha", "energy"), "logz_band": ("alpha", "lower", "upper"),
           "vi": ("x", "mean", "lower", "upper"), "ep": ("x", "mean", "lower", "upper"),
           "alpha": ("x", "mean", "lower", "upper"), "mcmc": ("x", "mean", "lower", "upper"),
           "data": ("x", "y"), "q": ("f", "density"), "tilted": ("f", "density"),
           "cavity": ("f", "density"), "histogram": ("left", "right", "top")}


def _empty(name: str) -> dict:
    return {c: [] for c in COLUMNS[name]}


def _band(band: dict | None, name: str) -> dict:
    if band is None:
        return _empty(name)
    return {c: np.asarray(band[c]) for c in COLUMNS[name]}


def energy_limits(energies, truth: dict | None) -> tuple:
    """The energy axis's range: every valid energy, and MCMC's log p(y) ± 2 standard
    errors (above every energy on skewed data, it must stay on the plot)."""
    values = [e for e in energies if np.isfinite(e)]
    if truth is not None:
        values += [truth["log_z"] - 2 * truth["log_z_se"], truth["log_z"] + 2 * truth["log_z_se"]]
    if not values:
        return (-1.0, 1.0)
    lo, hi = min(values), max(values)
    pad = 0.08 * (hi - lo) or 0.1
    return (lo - pad, hi + pad)


def sweep_layers(sweep: dict, truth: dict | None = None) -> dict:
    """The data that does not depend on the α shown: the energy curve over the α that
    did not diverge, a × per diverged α at the curve's floor, VI's ELBO, the VI and EP
    outlines, the data and, with ``truth`` (``MCMCReference.truth_for`` of the sweep's
    problem), MCMC's log p(y) ± 2 standard errors and band; and the energy axis's
    range (``"limits"``)."""
    a, e = np.asarray(sweep["alpha"]), np.asarray(sweep["energy"], float)
    bad = np.array([diverged(st) for st in sweep["stop"]])
    vi = sweep["vi"]
    vi_ok = not diverged(vi["stop"])
    valid = list(e[~bad]) + ([vi["energy"]] if vi_ok else [])
    floor = min(valid) if valid else 0.0
    ends = np.array([a.min(), a.max()])
    out = {"curve": {"alpha": a[~bad], "energy": e[~bad]},
           "diverged": {"alpha": a[bad], "energy": np.full(bad.sum(), floor)},
           "vi_line": ({"alpha": ends, "energy": np.full(2, vi["energy"])} if vi_ok
                       else _empty("vi_line")),
           "vi": _band(vi["band"] if vi_ok else None, "vi"),
           "ep": _band(None if bad[-1] else sweep["bands"][-1], "ep"),
           "data": {"x": np.asarray(sweep["data"]["x"]), "y": np.asarray(sweep["data"]["y"])},
           "logz": _empty("logz"), "logz_band": _empty("logz_band"), "mcmc": _empty("mcmc"),
           "limits": energy_limits(valid, truth)}
    if truth is not None:
        z, se = truth["log_z"], truth["log_z_se"]
        out["logz"] = {"alpha": ends, "energy": np.full(2, z)}
        out["logz_band"] = {"alpha": ends, "lower": np.full(2, z - 2 * se),
                            "upper": np.full(2, z + 2 * se)}
        out["mcmc"] = _band(truth["band"], "mcmc")
    return out


def alpha_layers(sweep: dict, index: int) -> dict:
    """The data of the α number ``index``: its energy marked on the curve and its band
    (none where it diverged), and the band plot's title."""
    a = sweep["alpha"][index]
    if diverged(sweep["stop"][index]):
        return {"shown": _empty("shown"), "alpha": _empty("alpha"),
                "title": f"Power EP at α = {a:g} diverged: no band to show"}
    return {"shown": {"alpha": [a], "energy": [sweep["energy"][index]]},
            "alpha": _band(sweep["bands"][index], "alpha"),
            "title": f"Posterior at α = {a:g} (filled) between VI and EP (outlines)"}


def point_picture(sweep: dict, index: int, point: int) -> dict:
    """q(fᵢ), the cavity and the tilted distribution at data point ``point`` for the
    swept α number ``index`` (``bnlab.studies.tilted_marginal``), and the plot's title
    (which says why a density is missing)."""
    from bnlab.studies import tilted_marginal
    a = sweep["alpha"][index]
    out = {"q": _empty("q"), "tilted": _empty("tilted"), "cavity": _empty("cavity")}
    if diverged(sweep["stop"][index]):
        return {**out, "title": f"α = {a:g} diverged: no q(fᵢ) to show"}
    p = sweep["problem"]
    marginals, sites = sweep["states"][index]
    try:
        pic = tilted_marginal(p.model.likelihood, p.params["likelihood"], p.y[point],
                              marginals, sites, point, a)
    except ValueError as exc:
        return {**out, "title": str(exc)}
    out["q"] = {"f": pic["f"], "density": pic["q"]}
    if pic["tilted"] is None:
        return {**out, "title": f"α = {a:g}: the cavity is not positive definite, "
                                "no tilted distribution"}
    out["tilted"] = {"f": pic["f"], "density": pic["tilted"]}
    out["cavity"] = {"f": pic["f"], "density": pic["cavity"]}
    return {**out, "title": f"q(fᵢ) against the tilted distribution ∝ cavity × "
                            f"p(yᵢ|fᵢ)^α, α = {a:g}"}


def point_label(sweep: dict, point: int) -> str:
    p = sweep["problem"]
    return (f"f at point {point} (x = {float(p.x_plot[point]):.3g}, "
            f"y = {float(np.asarray(p.y)[point]):.3g})")


def mcmc_histogram(truth: dict | None, point: int, bins: int = 20) -> dict:
    """The MCMC samples of f at data point ``point``, a density histogram with the AIS
    weights (none without ``truth``)."""
    if truth is None:
        return _empty("histogram")
    density, edges = np.histogram(truth["samples"][:, point], bins=bins,
                                  weights=truth["weights"], density=True)
    return {"left": edges[:-1], "right": edges[1:], "top": density}


def _fig(title, x_label, y_label, **kw):
    f = figure(title=title, x_axis_label=x_label, y_axis_label=y_label,
               tools="pan,wheel_zoom,box_zoom,reset,save", sizing_mode="stretch_width", **kw)
    f.toolbar.logo = None
    return f


class AlphaPlots:
    """The three figures and their sources. ``show_sweep`` sets what a sweep (and the
    MCMC reference) fixes, ``show_point`` the MCMC marginal and axis of the chosen data
    point, ``show`` the α shown: called per frame, it only replaces data."""

    def __init__(self, colours: Palette = LIGHT):
        self.colours = colours
        # named, so that a browser test finds them in the page's document
        self.src = {name: ColumnDataSource(_empty(name), name=f"bn-alpha-{name}")
                    for name in COLUMNS}
        self.energy, self.band, self.point = self._energy(), self._band(), self._point()
        for fig in (self.energy, self.band, self.point):
            fig.legend.click_policy = "hide"
            fig.add_layout(fig.legend[0], "right")      # beside the plot: inside, it hid data
            _legend_lists_what_has_data(fig)

    def _energy(self):
        s, ink = self.src, self.colours.ink
        e = _fig("Converged energy against α", "α (log scale)", "energy", x_axis_type="log",
                 min_height=260, height=280, y_range=Range1d(-1.0, 1.0),
                 x_range=Range1d(1e-3 / 1.5, 1.5))
        e.varea("alpha", "lower", "upper", source=s["logz_band"], fill_color=ink,
                fill_alpha=0.08, legend_label="MCMC log p(y) ± 2 s.e.")
        e.line("alpha", "energy", source=s["logz"], color=ink, line_width=1.5,
               legend_label="MCMC log p(y) ± 2 s.e.")
        e.line("alpha", "energy", source=s["vi_line"], color=VI_COLOUR, line_dash="dashed",
               line_width=2, legend_label="VI (ELBO, α → 0)")
        e.line("alpha", "energy", source=s["curve"], color=PEP_COLOUR, line_width=2,
               legend_label="Power EP(α)")
        e.scatter("alpha", "energy", source=s["curve"], color=PEP_COLOUR, size=6,
                  legend_label="Power EP(α)")
        e.scatter("alpha", "energy", source=s["diverged"], color=BAD, size=12, marker="x",
                  line_width=3, legend_label="diverged (no energy)")
        e.scatter("alpha", "energy", source=s["shown"], color=BAD, size=14, fill_alpha=0,
                  line_width=2, legend_label="shown")
        return e

    def _band(self):
        s, ink = self.src, self.colours.ink
        b = _fig("Posterior between VI and EP", "x", "latent f / data", min_height=300,
                 height=340)
        b.varea("x", "lower", "upper", source=s["alpha"], fill_color=PEP_COLOUR,
                fill_alpha=0.25, legend_label="Power EP(α) ± 2σ")
        b.line("x", "mean", source=s["alpha"], color=PEP_COLOUR, line_width=2,
               legend_label="Power EP(α) mean")
        # VI's dashes over EP's line: where α changes little they coincide
        for key, colour, label, dash in (("ep", EP_COLOUR, "EP (α = 1)", "solid"),
                                         ("vi", VI_COLOUR, "VI", "dashed")):
            for edge in ("lower", "upper"):
                b.line("x", edge, source=s[key], color=colour, line_width=2, line_dash=dash,
                       legend_label=f"{label} ± 2σ")
        for edge in ("lower", "upper"):
            b.line("x", edge, source=s["mcmc"], color=ink, line_dash="dashed", line_width=1.5,
                   legend_label="MCMC ± 2σ")
        b.line("x", "mean", source=s["mcmc"], color=ink, line_dash="dotted", line_width=1.5,
               legend_label="MCMC mean")
        b.scatter("x", "y", source=s["data"], color=self.colours.data, size=3,
                  legend_label="data")
        return b

    def _point(self):
        s, ink = self.src, self.colours.ink
        p = _fig("q(fᵢ) against the tilted distribution", "f", "density", min_height=260,
                 height=280)
        p.quad(left="left", right="right", top="top", bottom=0, source=s["histogram"],
               fill_color=ink, fill_alpha=0.15, line_color=ink, line_alpha=0.5,
               legend_label="MCMC p(fᵢ | y)")
        p.line("f", "density", source=s["q"], color=PEP_COLOUR, line_width=2,
               legend_label="q(fᵢ)")
        p.line("f", "density", source=s["tilted"], color=BAD, line_width=2, line_dash="dashed",
               legend_label="tilted")
        p.line("f", "density", source=s["cavity"], color="#888888", line_dash="dotted",
               legend_label="cavity")
        return p

    def show_sweep(self, sweep: dict, truth: dict | None = None):
        """What the sweep and the MCMC reference fix: the curve, the ×s, VI's line, the
        outlines, MCMC's band and log p(y), the data, the energy axis's range."""
        layers = sweep_layers(sweep, truth)
        self.energy.y_range.start, self.energy.y_range.end = layers.pop("limits")
        a = sweep["alpha"]
        self.energy.x_range.start, self.energy.x_range.end = min(a) / 1.5, max(a) * 1.5
        for name, data in layers.items():
            self.src[name].data = data
        self.band.xaxis.axis_label = sweep["x_label"]
        _legend_lists_what_has_data(self.energy)
        _legend_lists_what_has_data(self.band)

    def show_point(self, sweep: dict, point: int, truth: dict | None = None):
        """The chosen data point's axis label and MCMC marginal (with its ESS)."""
        self.point.xaxis.axis_label = point_label(sweep, point)
        self.src["histogram"].data = mcmc_histogram(truth, point)
        item = next(i for i in self.point.legend[0].items
                    if self.src["histogram"] in [r.data_source for r in i.renderers])
        item.label = {"value": "MCMC p(fᵢ | y)" if truth is None else
                      f"MCMC p(fᵢ | y), ESS {truth['ess']:.0f}"}
        _legend_lists_what_has_data(self.point)

    def show(self, sweep: dict, index: int, picture: dict):
        """The α number ``index``: its marker, its filled band, its point ``picture``
        (``point_picture``) and the titles that name it."""
        layers = alpha_layers(sweep, index)
        self.band.title.text = layers.pop("title")
        for name, data in layers.items():
            self.src[name].data = data
        self.point.title.text = picture["title"]
        for name in ("q", "tilted", "cavity"):
            self.src[name].data = picture[name]
        for fig in (self.energy, self.band, self.point):
            _legend_lists_what_has_data(fig)
