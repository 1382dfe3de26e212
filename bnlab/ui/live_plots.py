"""Bokeh figures for the live view. Each glyph reads a ``ColumnDataSource``; an update
replaces the sources' data (inside ``pn.io.hold`` the whole frame goes out as one
message), so nothing is re-rendered and nothing flickers. Plain Bokeh here rather than
HoloViews streams: a HoloViews refresh re-renders the whole figure each frame, too slow
for live updates; a source update only sends the new data."""
from __future__ import annotations

import numpy as np
from bokeh.models import (BasicTicker, ColumnDataSource, FactorRange, GlyphRenderer, Scatter,
                          TapTool)
from bokeh.plotting import figure

from . import palette

LATENT = ("#1f5fa8", "#c2571a")
OK, BAD, PAIR = "#4c9a2a", "#d62728", "#7b3294"
REJECTED = "#f0a030"     # a proposal that was not PD, rejected: the iterate stayed valid
PSD_ROWS = ["cavities PSD", "posterior PSD"]
# The figures that may have no data (before a run; G-KL's energy before it is solved,
# and its sites), each framed by an extent while its sources have none: Bokeh's
# automatic range has no bounds on no data (NaN, or a guess on a log axis), so the axes
# carry no ticks and the console logs a warning at every render.
FRAMES = {"band_frame": (("f1", "f2", "mcmc", "data"), {"x": [-1.0, 1.0], "y": [-1.0, 1.0]}),
          "energy_frame": (("energy",), {"iteration": [0, 1], "energy": [-1.0, 1.0]}),
          "gap_frame": (("gap",), {"iteration": [0, 1], "gap": [0.1, 10.0]}),
          "joint_frame": (("samples", "ellipse", "jmean"), {"a": [-1.0, 1.0], "b": [-1.0, 1.0]}),
          "prec_frame": (("prec",), {"x": [-1.0, 1.0], "prec": [-1.0, 1.0]}),
          "nat1_frame": (("nat1",), {"x": [-1.0, 1.0], "nat1": [-1.0, 1.0]})}


def _fig(title, x_label, y_label, **kw):
    f = figure(title=title, x_axis_label=x_label, y_axis_label=y_label,
               tools="pan,wheel_zoom,box_zoom,reset,save", sizing_mode="stretch_width", **kw)
    f.toolbar.logo = None
    return f


def _empty(*cols):
    return {c: [] for c in cols}


def _add_frame(fig, frame: str, source) -> None:
    """An invisible glyph on ``source`` that the figure's automatic ranges still count;
    ``LivePlots`` fills it with ``FRAMES[frame]``'s extent while the figure has no data.
    A bare renderer: ``fig.scatter`` would add its selection, hover and muted variants,
    models that every visitor's page builds and sends."""
    x, y = FRAMES[frame][1]
    fig.renderers.append(GlyphRenderer(data_source=source, glyph=Scatter(x=x, y=y),
                                       visible=False))


def _rows(source) -> int:
    """How many rows a ``ColumnDataSource`` holds (its first column's length)."""
    return len(next(iter(source.data.values()), []))


def _legend_lists_what_has_data(fig):
    """Show a legend entry only while one of its glyphs has data: a second latent, the
    MCMC band and samples, the chosen pair exist only on some problems or after some
    clicks, and Bokeh would list them, greyed, all the same. Glyph visibility is left
    to the user's legend clicks."""
    for item in fig.legend[0].items:
        item.visible = any(_rows(r.data_source) > 0 for r in item.renderers)


def _gap(iterations, energies, latest):
    """|E_k − E_latest| where it is positive: on a log axis the approach to the fixed
    point stays readable, where the first iterations dominate a linear one."""
    gap = np.abs(np.asarray(energies, float) - latest)
    keep = gap > 0
    return {"iteration": np.asarray(iterations)[keep], "gap": gap[keep]}


def psd_colours(posterior_psd, cavity_psd, accepted, diverged: bool) -> list:
    """The PSD strip's colours, the posterior row then the cavities row: the flags
    describe each iteration's proposal (``bnlab.engine.loop``), so a proposal that was
    not PD but was rejected while the run went on (an Anderson-mixed step) is amber, not
    red: the iterate shown stayed a valid Gaussian. Red: the iterate itself (accepted)
    is not PD in that row, or the step that ended a diverged run."""
    kept = ~np.asarray(accepted, bool)
    if diverged and len(kept):
        kept[-1] = False
    flags = np.concatenate([posterior_psd, cavity_psd])
    kept = np.concatenate([kept, kept])
    return np.where(flags, OK, np.where(kept, REJECTED, BAD)).tolist()


class LivePlots:
    """The live view's figures and their data sources. The posterior band is built at
    once; the other figures (each a few dozen Bokeh models that the server builds for
    every visitor) by ``build_rest``, when the page sends them after its first plot.
    Until then ``update`` fills only their sources; their labels follow when built."""

    def __init__(self, colours: palette.Palette | None = None):
        self.colours = colours or palette.current()
        S = lambda *c: ColumnDataSource(_empty(*c))  # noqa: E731
        self.src = {"f1": S("x", "mean", "lower", "upper"), "f2": S("x", "mean", "lower", "upper"),
                    "mcmc": S("x", "mean", "lower", "upper"), "data": S("x", "y", "index"),
                    "pair": S("x", "y"), "pred": S("x", "mean", "lower", "upper"),
                    "pred_data": S("x", "y"), "energy": S("iteration", "energy"),
                    "gap": S("iteration", "gap"),
                    "psd": S("iteration", "check", "colour"),
                    "prec": S("x", "prec", "colour"), "nat1": S("x", "nat1"),
                    "samples": S("a", "b"), "ellipse": S("a", "b"), "jmean": S("a", "b"),
                    **{frame: S(*extent) for frame, (_, extent) in FRAMES.items()}}
        self.built = False
        self._labels = {"x": "x", "probability": False, "joint": None, "latents": 1,
                        "sites": True}
        self.band = self._band()
        self._frame_the_empty()

    def _band(self):
        s, ink, grey = self.src, self.colours.ink, self.colours.data
        b = _fig("Posterior: latent mean ± 2σ (click two data points)", "x", "latent f / data",
                 min_height=320, height=340)
        for d, key in enumerate(("f1", "f2")):
            c = LATENT[d]
            b.varea("x", "lower", "upper", source=s[key], fill_color=c, fill_alpha=0.2,
                    legend_label=f"latent {key} ± 2σ")
            b.line("x", "mean", source=s[key], color=c, line_width=2,
                   legend_label=f"latent {key} mean")
        b.line("x", "lower", source=s["mcmc"], color=ink, line_dash="dashed",
               legend_label="MCMC ± 2σ")
        b.line("x", "upper", source=s["mcmc"], color=ink, line_dash="dashed",
               legend_label="MCMC ± 2σ")
        b.line("x", "mean", source=s["mcmc"], color=ink, line_dash="dotted",
               legend_label="MCMC mean")
        data = b.scatter("x", "y", source=s["data"], size=6, color=grey, alpha=0.7,
                         legend_label="data", nonselection_alpha=0.7, selection_color=grey)
        b.scatter("x", "y", source=s["pair"], size=14, fill_alpha=0.15, color=PAIR,
                  line_width=2, legend_label="chosen pair")
        b.add_tools(TapTool(renderers=[data]))
        _add_frame(b, "band_frame", s["band_frame"])
        b.legend.click_policy = "hide"
        b.add_layout(b.legend[0], "right")      # beside the plot: inside, it hid data points
        return b

    def build_rest(self):
        """The predictive, energy, distance, PSD, site and two-point figures, labelled
        as the latest ``update`` asked."""
        if self.built:
            return
        s, ink, grey = self.src, self.colours.ink, self.colours.data
        p = _fig("Predictive", "x", "y", height=240)
        p.varea("x", "lower", "upper", source=s["pred"], fill_color=LATENT[1], fill_alpha=0.2)
        p.line("x", "mean", source=s["pred"], color=LATENT[1], line_width=2)
        p.scatter("x", "y", source=s["pred_data"], size=4, color=grey, alpha=0.6)
        self.predictive = p

        e = _fig("Energy per iteration (the method's log p(y) approximation)", "iteration",
                 "energy", height=240)
        e.line("iteration", "energy", source=s["energy"], color=ink, line_width=2)
        e.scatter("iteration", "energy", source=s["energy"], size=4, color=ink)
        _add_frame(e, "energy_frame", s["energy_frame"])
        self.energy = e

        q = _fig("PSD status (red: not PD; amber: a non-PD step, rejected)",
                 "iteration", "",
                 y_range=FactorRange(*PSD_ROWS), height=130)
        q.rect("iteration", "check", width=0.9, height=0.8, source=s["psd"], color="colour")
        self.psd = q
        g = _fig("Distance to the latest energy, |energy − latest| (log scale)", "iteration",
                 "|energy − latest|", height=240, y_axis_type="log")
        g.line("iteration", "gap", source=s["gap"], color=ink, line_width=2)
        g.scatter("iteration", "gap", source=s["gap"], size=4, color=ink)
        _add_frame(g, "gap_frame", s["gap_frame"])
        self.gap = g
        for f in (e, q, g):               # iterations are whole numbers: no 0.5 ticks
            f.xaxis.ticker = BasicTicker(min_interval=1)

        sp = _fig("Site precisions Λ̄ₙ", "x", "Λ̄ₙ (red: < 0)", height=240)
        sp.scatter("x", "prec", source=s["prec"], color="colour", size=5)
        sn = _fig("Site natural means ν̄ₙ", "x", "ν̄ₙ", height=240)
        sn.scatter("x", "nat1", source=s["nat1"], color=LATENT[1], size=5)
        _add_frame(sp, "prec_frame", s["prec_frame"])
        _add_frame(sn, "nat1_frame", s["nat1_frame"])
        self.site_prec, self.site_nat1 = sp, sn

        j = _fig("q(fᵢ, fⱼ): pick two points", "f(x_i)", "f(x_j)", width=360, height=380)
        j.sizing_mode = "fixed"
        j.scatter("a", "b", source=s["samples"], size=3, color="#888888", alpha=0.4,
                  legend_label="MCMC samples")
        j.line("a", "b", source=s["ellipse"], color=LATENT[0], line_width=2,
               legend_label="q: 2σ ellipse")
        j.scatter("a", "b", source=s["jmean"], color=LATENT[0], size=9, legend_label="q mean")
        _add_frame(j, "joint_frame", s["joint_frame"])
        j.legend.orientation = "horizontal"
        j.add_layout(j.legend[0], "below")       # inside, it covered the samples' tail
        self.joint = j
        self.built = True
        self._label()

    # -- updates -----------------------------------------------------------------------
    def update(self, snap, selected=(), mcmc=None, joint=None, x_label="x"):
        s = self.src
        for d, key in enumerate(("f1", "f2")):
            band = snap["bands"].get(key)
            s[key].data = dict(band) if band is not None else _empty("x", "mean", "lower", "upper")
        s["mcmc"].data = dict(mcmc) if mcmc is not None else _empty("x", "mean", "lower", "upper")
        x, y = snap["data"]["x"], snap["data"]["y"]
        if len(s["data"].data["x"]) != len(x) or not np.array_equal(s["data"].data["x"], x):
            s["data"].data = {"x": x, "y": y, "index": np.arange(len(x))}
        idx = np.asarray(selected, int)
        s["pair"].data = {"x": x[idx], "y": y[idx]}
        p = snap["predictive"]
        s["pred"].data = {k: p[k] for k in ("x", "mean", "lower", "upper")}
        prob = p["kind"] == "probability"
        s["pred_data"].data = {"x": x, "y": 0.5 * (y + 1) if prob else y}
        t = snap["trace"]
        ok = np.isfinite(t["energy"])
        s["energy"].data = {"iteration": t["iteration"][ok], "energy": t["energy"][ok]}
        s["gap"].data = _gap(t["iteration"][ok], t["energy"][ok], snap["status"]["energy"])
        q = snap["psd"]
        its = np.concatenate([q["iteration"], q["iteration"]])
        checks = [PSD_ROWS[1]] * len(q["iteration"]) + [PSD_ROWS[0]] * len(q["iteration"])
        s["psd"].data = {"iteration": its, "check": checks,
                         "colour": psd_colours(q["posterior_psd"], q["cavity_psd"], q["accepted"],
                                               snap["status"]["diverged"])}
        st = snap["sites"]
        sites = bool(np.isfinite(st["prec"]).any())     # G-KL has none: NaN
        s["prec"].data = ({"x": st["x"], "prec": st["prec"],
                           "colour": np.where(st["prec"] < 0, BAD, LATENT[0]).tolist()}
                          if sites else _empty("x", "prec", "colour"))
        s["nat1"].data = {"x": st["x"], "nat1": st["nat1"]} if sites else _empty("x", "nat1")
        self._labels.update(x=x_label, probability=prob, sites=sites,
                            latents=1 + (snap["bands"].get("f2") is not None))
        self.update_joint(joint)

    def clear(self):
        """Every plot empty (no run: the settings cannot be built)."""
        for source in self.src.values():
            source.data = _empty(*source.data)
        self._labels["joint"] = None
        self._label()

    def update_joint(self, joint):
        s = self.src
        if joint is None or "error" in joint:
            for k in ("samples", "ellipse", "jmean"):
                s[k].data = _empty("a", "b")
        else:
            e, m = joint["ellipse"], joint["mean"]
            s["ellipse"].data = {"a": e[:, 0], "b": e[:, 1]}
            s["jmean"].data = {"a": [m[0]], "b": [m[1]]}
            smp = joint.get("samples")
            s["samples"].data = ({"a": smp[:, 0], "b": smp[:, 1]} if smp is not None
                                 else _empty("a", "b"))
        self._labels["joint"] = joint
        self._label()

    def _frame_the_empty(self):
        """Each ``FRAMES`` source holds its extent exactly while its figure has no data
        (set only when that changes: an update sends nothing for it)."""
        for frame, (sources, extent) in FRAMES.items():
            empty = all(_rows(self.src[k]) == 0 for k in sources)
            if empty != (_rows(self.src[frame]) > 0):
                self.src[frame].data = dict(extent) if empty else _empty(*extent)

    def _label(self):
        """Axis labels, titles and legends that follow the data: on the band always, on
        the other figures once they are built."""
        self.band.xaxis.axis_label = self._labels["x"]
        _legend_lists_what_has_data(self.band)
        self._frame_the_empty()
        if not self.built:
            return
        for f in (self.predictive, self.site_prec, self.site_nat1):
            f.xaxis.axis_label = self._labels["x"]
        self.predictive.yaxis.axis_label = ("p(y = +1)" if self._labels["probability"]
                                            else "predictive y (mean ± 2 sd)")
        # the sites shown are the first latent's (the runner's snapshot); titles short
        # enough for a half-page plot on a projector (≈ 290 px)
        of = " of f1" if self._labels["latents"] > 1 else ""
        if self._labels["sites"]:
            self.site_prec.title.text = f"Site precisions Λ̄ₙ{of}"
            self.site_nat1.title.text = f"Site natural means ν̄ₙ{of}"
        else:                      # G-KL: no sites, q's (m, C) are fitted directly
            self.site_prec.title.text = "Λ̄ₙ: none (q fitted directly)"
            self.site_nat1.title.text = "ν̄ₙ: none (q fitted directly)"
        joint = self._labels["joint"]
        if joint is None or "error" in joint:
            self.joint.title.text = (joint or {}).get("error", "q(fᵢ, fⱼ): pick two points")
        else:
            i, j = joint["indices"]
            self.joint.title.text = f"q(f{i}, f{j}): correlation {joint['corr']:.3f}"
            self.joint.xaxis.axis_label, self.joint.yaxis.axis_label = f"f(x_{i})", f"f(x_{j})"
        _legend_lists_what_has_data(self.joint)
