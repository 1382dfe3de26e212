"""Compare page: two methods side by side on the same data and hyperparameters, and an
α explorer that sweeps the Power-EP power from VI (α → 0) to EP (α = 1)."""
from __future__ import annotations


import holoviews as hv
import numpy as np
import panel as pn
import param

from . import catalog, markup, palette
from .layout import controls_row
from .mcmc_ref import MCMCReference
from .palette import LIGHT, Palette
from .problem import build_problem
from .provenance import ComputedWith
from .runner import STOP_REASONS, Runner
from .settings import LabSettings

ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
MAX_ITERS = 300
SITE_METHODS = [m for m in catalog.METHODS if m != "gkl"]
TRUTH_NOTE = ("Once the Live page's **MCMC reference** is computed for these data and "
              "hyperparameters, the plots below draw it as the truth: the exact posterior's "
              "band (dashed, “MCMC ± 2σ”) and log p(y) (a solid line, forward AIS's "
              "estimate, in the shaded interval that forward and reverse AIS give; "
              "“not resolved” when it is wider than 0.05 nats).")


def uses_alpha(method: str, settings: LabSettings) -> bool:
    """Whether α is a setting of ``method`` (ep is PEP at α = 1, fixed)."""
    return method in catalog.ALPHA_METHODS or (method == "heuristic" and settings.base == "pep")


def method_alpha(method: str, settings: LabSettings, alpha=None) -> float:
    """The α ``method`` runs at: ``alpha`` (default the sidebar's α) for the methods
    that take one, whatever the sidebar's own method is; 1 for the others."""
    if not uses_alpha(method, settings):
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
               options=settings.method_options() if method == settings.method else (),
               max_iters=max_iters)
    while r.stop_reason() is None:
        r.step(1)
    return r


def status_word(run) -> str:
    """converged / diverged (how) / not converged (cap or stalled), for tables."""
    stop = run.stop_reason()
    return {"converged": "converged", "cap": f"not converged ({run.iteration} iterations)",
            "stalled": "stalled (not converged)"}.get(stop, (STOP_REASONS.get(stop) or "running"))


def alpha_sweep(problem, settings: LabSettings, alphas=ALPHAS, progress=None) -> dict:
    """VI, then PEP at each α (EP at α = 1), each to its stop: energies (NaN where
    diverged), stop reasons, snapshots."""
    vi = converge(problem, "vi", settings)
    if progress:
        progress()
    snaps, energies, stops, states = [], [], [], []
    for a in alphas:
        r = converge(problem, "ep" if a == 1.0 else "pep", settings, alpha=a)
        snap = r.snapshot()
        snaps.append(snap)
        stops.append(r.stop_reason())
        states.append((r.state.marginals, r.state.sites))
        energies.append(np.nan if r.diverged else snap["status"]["energy"])
        if progress:
            progress()
    vi_snap = vi.snapshot()
    return {"alpha": tuple(alphas), "energy": energies, "stop": stops, "snaps": snaps,
            "states": states, "problem": problem, "rho": settings.rho,
            "vi": {"energy": vi_snap["status"]["energy"], "stop": vi.stop_reason(),
                   "snap": vi_snap}, "x_label": problem.x_label}


def surprising_point(sweep: dict) -> int:
    """The data point farthest from EP's posterior mean (α = 1, else the largest α
    that did not diverge): an outlier, a misclassified label: where α shows."""
    k = max((k for k, st in enumerate(sweep["stop"]) if not _diverged(st)), default=None)
    if k is None:
        return 0
    y = np.asarray(sweep["problem"].y, float)
    return int(np.argmax(np.abs(y - np.asarray(sweep["states"][k][0].mean[:, 0]))))


def point_picture(sweep: dict, index: int, point: int, truth: dict | None = None,
                  colours: Palette = LIGHT):
    """q(fᵢ), the cavity and the tilted distribution at data point ``point`` for the
    swept α number ``index`` (``bnlab.studies.tilted_marginal``), and with ``truth``
    (``MCMCReference.truth_for``) the exact marginal p(fᵢ | y) as a weighted histogram
    of the MCMC samples."""
    from bnlab.studies import tilted_marginal
    a = sweep["alpha"][index]
    p = sweep["problem"]
    where = (f"point {point} (x = {float(p.x_plot[point]):.3g}, "
             f"y = {float(np.asarray(p.y)[point]):.3g})")
    opts = dict(responsive=True, min_height=260, xlabel=f"f at {where}", ylabel="density")
    if _diverged(sweep["stop"][index]):
        return hv.Curve([]).opts(title=f"α = {a:g} diverged: no q(fᵢ) to show", **opts)
    marginals, sites = sweep["states"][index]
    try:
        pic = tilted_marginal(p.model.likelihood, p.params["likelihood"], p.y[point],
                              marginals, sites, point, a)
    except ValueError as exc:
        return hv.Curve([]).opts(title=str(exc), **opts)
    layers = [hv.Curve((pic["f"], pic["q"]), "f", "density", label="q(fᵢ)")
              .opts(color="#1f5fa8", line_width=2)]
    if pic["tilted"] is None:
        title = f"α = {a:g}: the cavity is not positive definite, no tilted distribution"
    else:
        layers += [hv.Curve((pic["f"], pic["tilted"]), "f", "density",
                            label=f"tilted ∝ cavity × p(yᵢ|fᵢ)^{a:g}")
                   .opts(color="#d62728", line_width=2, line_dash="dashed"),
                   hv.Curve((pic["f"], pic["cavity"]), "f", "density", label="cavity")
                   .opts(color="#888888", line_dash="dotted")]
        title = f"q(fᵢ) against the tilted distribution, α = {a:g}"
    if truth is not None:
        layers.insert(0, _mcmc_marginal(truth, point, colours.ink))
    return hv.Overlay(layers).opts(title=title, legend_position="right", **opts)


def _mcmc_marginal(truth: dict, point: int, ink: str, bins: int = 20):
    """The MCMC samples of f at data point ``point``, a density histogram with the AIS
    weights."""
    density, edges = np.histogram(truth["samples"][:, point], bins=bins,
                                  weights=truth["weights"], density=True)
    return hv.Histogram((edges, density), kdims=["f"], vdims=["density"],
                        label=f"MCMC p(fᵢ | y), ESS {truth['ess']:.0f}").opts(
        fill_color=ink, fill_alpha=0.15, line_color=ink, line_alpha=0.5)


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


def _diverged(stop) -> bool:
    return stop is not None and stop.startswith("diverged")


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


def alpha_plots(sweep: dict, index: int, x_label="x", truth: dict | None = None,
                colours: Palette = LIGHT):
    """Converged energy against α (with the VI value) and the posterior at α. A
    diverged run has no valid energy or band: its α is marked with a red × on the
    curve's floor and its band (PEP at that α, EP, VI) is not drawn. With ``truth``
    (``MCMCReference.truth_for`` of the sweep's problem), MCMC's log p(y) and band are
    drawn too: VI's ELBO lies below log p(y) (a bound), the Power-EP energies need not
    (FITC's can exceed it), though on the α tour's data they do, rising towards it with
    α as the bands widen towards MCMC's (``tests/test_ui_tours.py``)."""
    a, e = np.asarray(sweep["alpha"]), np.asarray(sweep["energy"], float)
    bad = np.array([_diverged(st) for st in sweep["stop"]])
    ok = ~bad
    vi = sweep["vi"]
    vi_ok = not _diverged(vi["stop"])
    valid = list(e[ok]) + ([vi["energy"]] if vi_ok else [])
    floor = min(valid) if valid else 0.0
    curve = (hv.Curve((a[ok], e[ok]), "α", "energy", label="Power EP(α)")
             .opts(color="#1f5fa8", line_width=2)
             * hv.Scatter((a[ok], e[ok]), "α", "energy").opts(color="#1f5fa8", size=6))
    if bad.any():          # (an empty layer would still list its legend entry)
        curve = curve * hv.Scatter((a[bad], np.full(bad.sum(), floor)), "α", "energy",
                                   label="diverged (no energy)").opts(
            color="#d62728", size=12, marker="x", line_width=3)
    if ok[index]:
        curve = curve * hv.Scatter(([a[index]], [e[index]]), "α", "energy", label="shown") \
            .opts(color="#d62728", size=12, marker="circle", fill_alpha=0)
    if vi_ok:
        curve = (curve * hv.HLine(vi["energy"]).opts(color="#4c9a2a", line_dash="dashed")
                 * hv.Text(a[0], vi["energy"], " VI (ELBO)", halign="left", valign="bottom",
                           fontsize=9).opts(color=colours.ink))
    if truth is not None:
        for layer in _log_z_line(truth, a[0], colours.ink):
            curve = curve * layer
    layers = []
    if vi_ok:
        layers.append(_band(vi["snap"], "VI", "#4c9a2a", "dashed"))
    if not bad[-1]:
        layers.append(_band(sweep["snaps"][-1], "EP (α = 1)", "#c2571a", "dotted"))
    if ok[index]:
        layers.append(_band(sweep["snaps"][index], f"PEP α = {a[index]:g}", "#1f5fa8"))
    if truth is not None:
        layers.append(_mcmc_band(truth, colours.ink))
    data = sweep["snaps"][index]["data"]
    pts = hv.Scatter((data["x"], data["y"]), "x", "f", label="data").opts(color=colours.data,
                                                                          size=3)
    title = ("Posterior: VI → PEP(α) → EP" if ok[index] else
             f"PEP α = {a[index]:g} diverged: no band to show")
    return (curve.opts(title="Converged energy against α", responsive=True, min_height=260,
                       legend_position="right", ylim=_energy_limits(valid, truth)),
            hv.Overlay(layers + [pts]).opts(title=title, xlabel=x_label,
                                            ylabel="latent f / data", responsive=True,
                                            min_height=300, legend_position="right"))


def sweep_note(sweep: dict) -> str:
    """The damping the sweep ran at (the sidebar's, where the pair has its own), and what
    its plots leave out, and why (numbers and fixed words only)."""
    lines = [f"Every run at the sidebar's damping ρ = {sweep['rho']:g}"]
    for st in sorted({st for st in sweep["stop"] if _diverged(st)}):
        alphas = ", ".join(f"{a:g}" for a, s in zip(sweep["alpha"], sweep["stop"]) if s == st)
        lines.append(f"<b class='bn-bad'>diverged</b> at α = {alphas}: "
                     f"{STOP_REASONS[st].removeprefix('diverged: ')}; no energy or band is drawn")
    unconverged = [f"{a:g}" for a, s in zip(sweep["alpha"], sweep["stop"])
                   if s in ("cap", "stalled")]
    if unconverged:
        lines.append(f"<b class='bn-warn'>not converged</b> within {MAX_ITERS} iterations at "
                     f"α = {', '.join(unconverged)}: drawn at their last iterate")
    if _diverged(sweep["vi"]["stop"]):
        lines.append("<b class='bn-bad'>VI diverged</b>: no VI line or band")
    return "<br>".join(lines)


def _energy_cell(snap):
    """A diverged run has no energy of its own (the table's column is the method's log
    p(y) approximation; the last valid iterate's may be the prior's)."""
    st = snap["status"]
    return "—" if st["diverged"] else f"{st['energy']:.4f}"


def _alpha_cell(method, alpha):
    return "1 (EP)" if method == "ep" else f"{alpha:g}" if alpha is not None else "—"


class CompareView(pn.viewable.Viewer):
    """The pair and the α explorer. ``reference``: the Live page's ``MCMCReference``;
    while it holds samples of the problem a plot shows, that plot overlays them as the
    truth (``show_reference`` redraws once it has new ones)."""
    method_a = param.Selector(default="laplace", objects=SITE_METHODS)
    method_b = param.Selector(default="ep", objects=SITE_METHODS)
    alpha_a = param.Number(default=0.5, bounds=(0.001, 1.0), doc="α of method A (PEP methods)")
    alpha_b = param.Number(default=0.5, bounds=(0.001, 1.0), doc="α of method B (PEP methods)")
    rho_a = param.Number(default=0.5, bounds=(0.01, 1.0), doc="damping ρ of method A")
    rho_b = param.Number(default=0.5, bounds=(0.01, 1.0), doc="damping ρ of method B")
    alpha_index = param.Integer(default=len(ALPHAS) // 2, bounds=(0, len(ALPHAS) - 1))

    def __init__(self, settings: LabSettings, reference: MCMCReference | None = None,
                 **params):
        params = {"alpha_a": settings.alpha, "alpha_b": settings.alpha, "rho_a": settings.rho,
                  "rho_b": settings.rho, **params}
        super().__init__(**params)
        self.settings = settings
        self.reference = reference
        self.colours = palette.current()      # the session's theme, read while it is built
        self.snaps, self.sweep, self.pair_problem = None, None, None
        # the pair runs at its own α and ρ, the sweep over its own α grid
        self.pair_made = ComputedWith(settings, ignore=("method", "alpha", "rho"))
        self.sweep_made = ComputedWith(settings, ignore=("method", "alpha"))
        self.error = markup.html_pane("", sizing_mode="stretch_width")
        self.table = markup.html_pane("", sizing_mode="stretch_width",
                                      css_classes=["bn-compare-table"])
        self.note = markup.html_pane("", sizing_mode="stretch_width",
                                     css_classes=["bn-sweep-note"])
        self.progress = pn.indicators.Progress(value=0, max=len(ALPHAS) + 1, visible=False,
                                               width=300)
        run = pn.widgets.Button(label="Run both to convergence", color="primary", width=210)
        run.on_click(lambda e: self.run_pair())
        sweep = pn.widgets.Button(label="Sweep α from 0 to 1", color="primary", width=180)
        sweep.on_click(lambda e: self.run_sweep())
        # each plot keeps its own ranges: Panel links the axes of panes that share a
        # dimension, and the α explorer's energy (a few tenths across α) was drawn on
        # the pair's energy-per-iteration scale (tens), a flat line. One plot per line:
        # two side by side on a projector's 1024 px left a band's frame ≈ 50 px wide
        # beside its legend
        plot = lambda: pn.pane.HoloViews(None, sizing_mode="stretch_width",  # noqa: E731
                                         linked_axes=False)
        self.pair_pane, self.pair_trace = plot(), plot()
        self.alpha_energy, self.alpha_band, self.alpha_point = plot(), plot(), plot()
        self.point_input = pn.widgets.IntInput(label="Point i (per-point picture)", value=0,
                                               start=0, width=180)
        self.point_input.param.watch(lambda e: self._draw_sweep(), "value")
        self.alpha_slider = pn.widgets.DiscreteSlider(label="Show α", options=list(ALPHAS),
                                                      value=ALPHAS[self.alpha_index], width=300)
        self.alpha_slider.param.watch(self._on_alpha, "value")
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
        self._refresh_alpha_inputs()
        W = self.widgets
        self.layout = pn.Column(
            pn.pane.Markdown("### Two methods, same data and hyperparameters\n\n" + TRUTH_NOTE),
            controls_row(W["method_a"], W["alpha_a"], W["rho_a"], W["method_b"], W["alpha_b"],
                         W["rho_b"], run),
            self.error, self.pair_made.note, self.table,
            self.pair_pane, self.pair_trace,
            pn.pane.Markdown("### α explorer — Power EP between VI (α → 0) and EP (α = 1)"),
            controls_row(sweep, self.alpha_slider, self.point_input, self.progress),
            self.sweep_made.note, self.note,
            self.alpha_energy, self.alpha_band, self.alpha_point,
            sizing_mode="stretch_width")

    def __panel__(self):
        return self.layout


    def _refresh_alpha_inputs(self):
        """α is an input only for the methods that have one (ep is α = 1)."""
        for side in ("a", "b"):
            self.widgets[f"alpha_{side}"].disabled = not uses_alpha(
                getattr(self, f"method_{side}"), self.settings)

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
            shown = alpha if uses_alpha(m, self.settings) else None
            rows.append(f"<tr><td>{label}</td><td class='bn-alpha'>{_alpha_cell(m, shown)}</td>"
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
        self._draw_sweep()

    def _draw_pair(self):
        problem = self.pair_problem
        band, trace = comparison_plots(self.snaps, problem.x_label, self._truth(problem),
                                       self.colours)
        with pn.io.hold():
            self.pair_pane.object, self.pair_trace.object = band, trace

    def run_sweep(self):
        made = self.sweep_made.current()
        problem = self._problem()
        if problem is None:
            return
        self.progress.visible, self.progress.value = True, 0
        try:
            self.sweep = alpha_sweep(problem, self.settings, progress=self._advance)
        except ValueError as exc:
            self.error.object = markup.error(exc)
            return
        finally:
            self.progress.visible = False
        self.point_input.end = len(self.sweep["problem"].x_plot) - 1
        self.point_input.value = surprising_point(self.sweep)     # draws
        self._draw_sweep()
        self.sweep_made.record(made)

    def _advance(self):
        self.progress.value += 1

    def _on_alpha(self, event):
        self.alpha_index = ALPHAS.index(event.new)
        if self.sweep is not None:
            self._draw_sweep()

    def _draw_sweep(self):
        if self.sweep is None:
            return
        truth = self._truth(self.sweep["problem"])
        energy, band = alpha_plots(self.sweep, self.alpha_index, self.sweep["x_label"], truth,
                                   self.colours)
        point = min(max(int(self.point_input.value), 0), len(self.sweep["problem"].x_plot) - 1)
        picture = point_picture(self.sweep, self.alpha_index, point, truth, self.colours)
        with pn.io.hold():
            self.alpha_energy.object, self.alpha_band.object = energy, band
            self.alpha_point.object = picture
            self.note.object = sweep_note(self.sweep)
