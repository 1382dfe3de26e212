"""Compare page: two methods side by side on the same data and hyperparameters (run by
``compare_model.run_pair``, drawn by ``compare_plots``), and the α explorer
(``alpha_explorer``), which sweeps the Power-EP power from VI (α → 0) to EP (α = 1)."""
from __future__ import annotations

import panel as pn
import param

from . import catalog, markup, palette
from .alpha_explorer import AlphaExplorer
from .compare_model import alpha_cell, run_pair, status_word
from .compare_plots import comparison_plots
from .held import held_on_event_loop
from .layout import controls_row
from .mcmc_ref import MCMCReference
from .problem import build_problem
from .provenance import ComputedWith
from .settings import LabSettings

TRUTH_NOTE = ("Once the Live page's **MCMC reference** is computed for these data and "
              "hyperparameters, the plots below draw it as the truth: the exact posterior's "
              "band (dashed, “MCMC ± 2σ”) and log p(y) (a solid line, forward AIS's "
              "estimate, in the shaded interval that forward and reverse AIS give; "
              "“not resolved” when it is wider than 0.05 nats).")


def _energy_cell(snap):
    """A diverged run has no energy of its own (the table's column is the method's log
    p(y) approximation; the last valid iterate's may be the prior's)."""
    st = snap["status"]
    return "—" if st["diverged"] else f"{st['energy']:.4f}"


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
        sides = [tuple(getattr(self, f"{name}_{side}") for name in ("method", "alpha", "rho"))
                 for side in ("a", "b")]
        try:
            runs = run_pair(problem, self.settings, sides)
        except ValueError as exc:
            self.error.object = markup.error(exc)
            return
        self.snaps = {r.label: r.runner.snapshot() for r in runs}
        self.pair_problem = problem
        rows = [f"<tr><td>{r.label}</td><td class='bn-alpha'>{alpha_cell(r.method, r.alpha)}"
                f"</td><td>{r.rho:g}</td><td class='bn-energy'>{_energy_cell(self.snaps[r.label])}"
                f"</td><td>{r.runner.iteration}</td><td>{status_word(r.runner)}</td></tr>"
                for r in runs]
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

        def show():
            self.pair_pane.object, self.pair_trace.object = band, trace
        held_on_event_loop(show)        # called on worker threads: never held there

    @property
    def sweep(self):
        """The α explorer's sweep (None before the first)."""
        return self.explorer.sweep

    def run_sweep(self):
        self.explorer.run_sweep()

    def close(self):
        """The page is gone: release the α explorer's sweep and stop its ▶."""
        self.explorer.close()
