"""Compare page: two methods side by side on the same data and hyperparameters, and the
α explorer (``alpha_explorer``), which sweeps the Power-EP power from VI (α → 0) to EP
(α = 1)."""
from __future__ import annotations


import holoviews as hv
import numpy as np
import panel as pn
import param

from bnlab.methods import REGISTRY

from . import catalog, markup, palette
from .alpha_explorer import AlphaExplorer
from .alpha_sweep import MAX_ITERS
from .layout import controls_row
from .mcmc_ref import MCMCReference
from .palette import LIGHT, Palette
from .problem import build_problem
from .provenance import ComputedWith
from .runner import STOP_REASONS, Runner
from .settings import LabSettings

TRUTH_NOTE = ("Once the Live page's **MCMC reference** is computed for these data and "
              "hyperparameters, the plots below draw it as the truth: the exact posterior's "
              "band (dashed, “MCMC ± 2σ”) and log p(y) (a solid line, forward AIS's "
              "estimate, in the shaded interval that forward and reverse AIS give; "
              "“not resolved” when it is wider than 0.05 nats).")


def method_alpha(method: str, settings: LabSettings, alpha=None) -> float:
    """The α ``method`` runs at: ``alpha`` (default the sidebar's α) for the methods
    that take one (``LabSettings.takes_alpha``), whatever the sidebar's own method is;
    1 for the others."""
    if not settings.takes_alpha(method):
        return 1.0
    return float(settings.alpha if alpha is None else alpha)


def converge(problem, method, settings: LabSettings, alpha=None, rho=None,
             max_iters=MAX_ITERS) -> Runner:
    """A Runner at (α, ρ) of its own (``method_alpha``; ρ default the sidebar's),
    stepped until it stops: converged, diverged, stalled or at ``max_iters``."""
    r = Runner(problem, method, alpha=method_alpha(method, settings, alpha),
               rho=settings.rho if rho is None else rho, tol=1e-6,
               backtrack=settings.backtrack, accelerate=settings.accelerate,
               cubature_order=settings.cubature_order,
               options=settings.options_for(method),
               max_iters=max_iters)
    while r.stop_reason() is None:
        r.step(1)
    return r


def status_word(run) -> str:
    """converged / diverged (how) / not converged (cap or stalled), for tables."""
    stop = run.stop_reason()
    return {"converged": "converged", "cap": f"not converged ({run.iteration} iterations)",
            "stalled": "stalled (not converged)"}.get(stop, (STOP_REASONS.get(stop) or "running"))


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


def _energy_cell(snap):
    """A diverged run has no energy of its own (the table's column is the method's log
    p(y) approximation; the last valid iterate's may be the prior's)."""
    st = snap["status"]
    return "—" if st["diverged"] else f"{st['energy']:.4f}"


def _alpha_cell(record, alpha):
    """The table's α: the one that ran, "1 (EP)" for Power EP's energy at its fixed α
    (the ep record), "—" for a method without α."""
    if alpha is not None:
        return f"{alpha:g}"
    return "1 (EP)" if record.energy == "pep" else "—"


class CompareView(pn.viewable.Viewer):
    """The pair and the α explorer. ``reference``: the Live page's ``MCMCReference``;
    while it holds samples of the problem a plot shows, that plot overlays them as the
    truth (``show_reference`` redraws once it has new ones)."""
    method_a = param.Selector(default="laplace", objects=catalog.site_methods())
    method_b = param.Selector(default="ep", objects=catalog.site_methods())
    alpha_a = param.Number(default=0.5, bounds=(0.001, 1.0), doc="α of method A (PEP methods)")
    alpha_b = param.Number(default=0.5, bounds=(0.001, 1.0), doc="α of method B (PEP methods)")
    rho_a = param.Number(default=0.5, bounds=(0.01, 1.0), doc="damping ρ of method A")
    rho_b = param.Number(default=0.5, bounds=(0.01, 1.0), doc="damping ρ of method B")
    pair_open = param.Boolean(default=True, doc="the pair's section unfolded (a tour step on "
                              "the α explorer folds it, so its plots are on the screen)")

    def __init__(self, settings: LabSettings, reference: MCMCReference | None = None,
                 **params):
        params = {"alpha_a": settings.alpha, "alpha_b": settings.alpha, "rho_a": settings.rho,
                  "rho_b": settings.rho, **params}
        chosen = {k: params.pop(k) for k in ("method_a", "method_b") if k in params}
        super().__init__(**params)
        for name in ("method_a", "method_b"):    # the methods registered now
            self.param[name].objects = catalog.site_methods()
        self.param.update(**chosen)
        self.settings = settings
        self.reference = reference
        self.colours = palette.current()      # the session's theme, read while it is built
        self.snaps, self.pair_problem = None, None
        # the pair runs at its own α and ρ
        self.pair_made = ComputedWith(settings, ignore=("method", "alpha", "rho"))
        self.error = markup.html_pane("", sizing_mode="stretch_width")
        self.table = markup.html_pane("", sizing_mode="stretch_width",
                                      css_classes=["bn-compare-table"])
        run = pn.widgets.Button(label="Run both to convergence", color="primary", width=210)
        run.on_click(lambda e: self.run_pair())
        # each plot keeps its own ranges (Panel links the axes of panes that share a
        # dimension). One plot per line: two side by side on a projector's 1024 px left
        # a band's frame ≈ 50 px wide beside its legend
        plot = lambda: pn.pane.HoloViews(None, sizing_mode="stretch_width",  # noqa: E731
                                         linked_axes=False)
        self.pair_pane, self.pair_trace = plot(), plot()
        self.explorer = AlphaExplorer(settings, self._problem, self.error, reference,
                                      self.colours)
        self.alpha_slider = self.explorer.slider        # a tour step sets it (``tours``)
        self.sweep_made = self.explorer.made
        self.widgets = {}
        for name, label in (("method_a", "Method A"), ("method_b", "Method B")):
            self.widgets[name] = pn.widgets.Select.from_param(self.param[name], label=label,
                                                              width=200,
                                                              css_classes=[f"bn-compare-{name}"])
        for name, label in (("alpha_a", "α (A)"), ("alpha_b", "α (B)"),
                            ("rho_a", "ρ (A)"), ("rho_b", "ρ (B)")):
            self.widgets[name] = pn.widgets.FloatInput.from_param(
                self.param[name], label=label, width=80, step=0.05,
                css_classes=[f"bn-compare-{name}"])
        self.param.watch(lambda *_: self._refresh_alpha_inputs(), ["method_a", "method_b"])
        settings.param.watch(lambda *_: self._refresh_alpha_inputs(), ["method", "base"])
        self._refresh_alpha_inputs()
        W = self.widgets
        self.pair_card = pn.Card(
            pn.pane.Markdown(TRUTH_NOTE),
            controls_row(W["method_a"], W["alpha_a"], W["rho_a"], W["method_b"], W["alpha_b"],
                         W["rho_b"], run),
            self.error, self.pair_made.note, self.table,
            self.pair_pane, self.pair_trace,
            title="Two methods, same data and hyperparameters", collapsed=not self.pair_open,
            sizing_mode="stretch_width", css_classes=["bn-compare-pair"])
        self.param.watch(lambda e: setattr(self.pair_card, "collapsed", not e.new), "pair_open")
        self.pair_card.param.watch(lambda e: setattr(self, "pair_open", not e.new),
                                   "collapsed")
        self.layout = pn.Column(
            self.pair_card,
            pn.pane.Markdown("### α explorer — Power EP between VI (α → 0) and EP (α = 1)"),
            self.explorer,
            sizing_mode="stretch_width")

    def __panel__(self):
        return self.layout

    def _refresh_alpha_inputs(self):
        """α is an input only for the methods that have one (ep is α = 1), and shown
        only for them: a greyed box still read as the α that ran (0.5 beside ep)."""
        for side in ("a", "b"):
            has = self.settings.takes_alpha(getattr(self, f"method_{side}"))
            widget = self.widgets[f"alpha_{side}"]
            widget.disabled, widget.visible = not has, has

    def _problem(self):
        try:
            self.error.object = ""
            return build_problem(self.settings)
        except ValueError as exc:
            self.error.object = markup.error(exc)
            return None

    def run_pair(self):
        """Each method at its own α and ρ to convergence; the table says what ran."""
        made = self.pair_made.current()
        problem = self._problem()
        if problem is None:
            return
        snaps, rows = {}, []
        for side in ("a", "b"):
            m = getattr(self, f"method_{side}")
            alpha = method_alpha(m, self.settings, getattr(self, f"alpha_{side}"))
            rho = getattr(self, f"rho_{side}")
            try:
                r = converge(problem, m, self.settings, alpha=alpha, rho=rho)
            except ValueError as exc:
                self.error.object = markup.error(f"{m}: {exc}")
                return
            snap = r.snapshot()
            label = m if m not in snaps else f"{m} (B)"
            snaps[label] = snap
            shown = alpha if self.settings.takes_alpha(m) else None
            rows.append(f"<tr><td>{label}</td><td class='bn-alpha'>"
                        f"{_alpha_cell(REGISTRY[m], shown)}</td>"
                        f"<td>{rho:g}</td><td class='bn-energy'>{_energy_cell(snap)}</td>"
                        f"<td>{r.iteration}</td><td>{status_word(r)}</td></tr>")
        self.snaps, self.pair_problem = snaps, problem
        self.table.object = ("<table><tr><th>method</th><th>α</th><th>ρ</th>"
                             "<th>energy (≈ log p(y))</th><th>iterations</th><th>status</th></tr>"
                             + "".join(rows) + "</table>")
        self._draw_pair()
        self.pair_made.record(made)

    def _truth(self, problem):
        return None if self.reference is None else self.reference.truth_for(problem)

    def show_reference(self):
        """Redraw what is shown, with the reference just computed."""
        if self.snaps is not None:
            self._draw_pair()
        self.explorer.show_reference()

    def _draw_pair(self):
        problem = self.pair_problem
        band, trace = comparison_plots(self.snaps, problem.x_label, self._truth(problem),
                                       self.colours)
        with pn.io.hold():
            self.pair_pane.object, self.pair_trace.object = band, trace

    @property
    def sweep(self):
        """The α explorer's sweep (None before the first)."""
        return self.explorer.sweep

    def run_sweep(self):
        self.explorer.run_sweep()

    def close(self):
        """The page is gone: release the α explorer's sweep and stop its ▶."""
        self.explorer.close()
