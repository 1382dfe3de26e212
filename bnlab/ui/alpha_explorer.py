"""The α explorer (Compare page): Power EP between VI (α → 0) and EP (α = 1). One sweep
computes every α of the grid at once (``alpha_sweep``); then the α slider and ▶ show
any α from the stored results: its energy on the curve, its band between VI's and
EP's outlines, and q(fᵢ) against the tilted distribution at a chosen data point.
Nothing is computed while α moves: a frame replaces the data of a few Bokeh sources
(``AlphaPlots.show``); the point's pictures for every α are made when the point (or
the sweep) changes.

The sweep, the α shown and ▶'s play are the page's model (``AlphaSweepModel``); ▶'s
frames come every ``PLAY_PERIOD_MS`` from a periodic callback of the session (Panel
stops it when the page closes)."""
from __future__ import annotations

import panel as pn

from . import markup
from .alpha_plots import AlphaPlots, point_picture
from .alpha_sweep import ALPHAS, AlphaSweepModel, surprising_point, sweep_note
from .held import held_on_event_loop
from .layout import controls_row
from .mcmc_ref import MCMCReference
from .palette import LIGHT, Palette
from .provenance import ComputedWith
from .settings import LabSettings

#: ms between two frames of ▶ (the 21 α of the grid in about five seconds)
PLAY_PERIOD_MS = 250
PLAY, PAUSE = "▶ Play α from VI to EP", "⏸ Pause"


class AlphaExplorer(pn.viewable.Viewer):
    """The sweep button, the α slider, ▶, the point input and the three figures.
    ``problem()`` builds the sidebar's problem (None when it cannot, having said why);
    ``reference``: the Live page's ``MCMCReference``, drawn as the truth while it
    holds samples of the sweep's problem; ``error``: the pane that shows a failure."""

    def __init__(self, settings: LabSettings, problem, error: pn.pane.HTML,
                 reference: MCMCReference | None = None, colours: Palette = LIGHT):
        super().__init__()
        self.settings, self.reference, self.error = settings, reference, error
        self._problem = problem
        self.model = AlphaSweepModel(settings)
        self._pictures = None          # the chosen point's ``point_picture`` per α
        self._player = None            # ▶'s periodic callback
        # the sweep runs at the sidebar's ρ, over its own α grid
        self.made = ComputedWith(settings, ignore=("method", "alpha"))
        self.note = markup.html_pane("", sizing_mode="stretch_width",
                                     css_classes=["bn-sweep-note"])
        self.progress = pn.indicators.Progress(value=-1, active=True, visible=False, width=300)
        sweep = pn.widgets.Button(label="Sweep α from 0 to 1", color="primary", width=180)
        sweep.on_click(lambda e: self.run_sweep())
        self.slider = pn.widgets.DiscreteSlider(label="Show α", options=list(ALPHAS),
                                                value=ALPHAS[self.model.index], width=300)
        self.slider.param.watch(self._on_slider, "value")
        self.play_button = pn.widgets.Button(label=PLAY, width=200, disabled=True)
        self.play_button.on_click(lambda e: self.toggle_play())
        self.point_input = pn.widgets.IntInput(label="Point i (per-point picture)", value=0,
                                               start=0, width=180)
        self.point_input.param.watch(lambda e: self._draw_point(), "value")
        self.plots = AlphaPlots(colours)
        pane = lambda fig: pn.pane.Bokeh(fig, sizing_mode="stretch_width")  # noqa: E731
        self.energy_pane = pane(self.plots.energy)
        self.band_pane = pane(self.plots.band)
        self.point_pane = pane(self.plots.point)
        self.layout = pn.Column(
            controls_row(sweep, self.slider, self.play_button, self.point_input,
                         self.progress),
            self.made.note, self.note, self.energy_pane, self.band_pane, self.point_pane,
            sizing_mode="stretch_width")
        m = self.model
        m.param.watch(lambda e: setattr(self.slider, "value", ALPHAS[e.new]), "index")
        m.param.watch(self._on_playing, "playing")
        m.param.watch(lambda e: setattr(self.progress, "visible", e.new), "computing")

    def __panel__(self):
        return self.layout

    sweep = property(lambda self: self.model.sweep, doc="the sweep shown (None before one)")
    playing = property(lambda self: self.model.playing)
    index = property(lambda self: self.model.index, doc="the number of the α shown")

    def _on_slider(self, event):
        self.model.index = ALPHAS.index(event.new)
        self._draw_frame()

    # -- the sweep --------------------------------------------------------------------
    def run_sweep(self):
        """Compute every α of the grid for the sidebar's problem, then show it."""
        made = self.made.current()
        problem = self._problem()
        if problem is None:
            return
        try:
            if not self.model.compute(problem):
                return
        except ValueError as exc:
            self.error.object = markup.error(exc)
            return
        sweep = self.sweep
        self.play_button.disabled = False
        self.point_input.end = len(problem.x_plot) - 1
        # no ``pn.io.hold`` here: on a worker thread it would hold the whole page
        # (``held_on_event_loop``); the plots' changes go out held, from the event loop
        self._draw_sweep()
        point = surprising_point(sweep)
        if self.point_input.value != point:
            self.point_input.value = point               # its watcher draws the point
        else:
            self._draw_point()
        self.made.record(made)

    def _truth(self):
        return None if self.reference is None else self.reference.truth_for(self.sweep["problem"])

    def show_reference(self):
        """Redraw with the reference just computed (or dropped)."""
        if self.sweep is not None:
            self._draw_sweep()      # not under a hold: see ``run_sweep``
            self._draw_point()

    def _draw_sweep(self):
        sweep, truth = self.sweep, self._truth()
        self.note.object = sweep_note(sweep)
        held_on_event_loop(lambda: self.plots.show_sweep(sweep, truth))

    def _draw_point(self):
        """The chosen point's pictures for every α (the frames then only show them)."""
        sweep = self.sweep
        if sweep is None:
            return
        point = min(max(int(self.point_input.value), 0), len(sweep["problem"].x_plot) - 1)
        self._pictures = pictures = [point_picture(sweep, k, point)
                                     for k in range(len(sweep["alpha"]))]
        truth, k = self._truth(), self.index

        def draw():
            self.plots.show_point(sweep, point, truth)
            self.plots.show(sweep, k, pictures[k])
        held_on_event_loop(draw)

    def _draw_frame(self):
        """The α on the slider, from the stored results (no computation)."""
        sweep, pictures, k = self.sweep, self._pictures, self.index
        if sweep is None or pictures is None:
            return
        held_on_event_loop(lambda: self.plots.show(sweep, k, pictures[k]))

    # -- ▶ -------------------------------------------------------------------------------
    def toggle_play(self):
        """The ▶ button: play, or pause while playing."""
        if self.playing:
            self.pause()
        else:
            self.play()

    def play(self) -> int | None:
        """α from the grid's first value (next to VI) to EP, a frame per period; the
        play's generation (``AlphaSweepModel.play``), None without a sweep."""
        generation = self.model.play()
        if generation is not None:
            self._player = pn.state.add_periodic_callback(
                lambda: self.model.advance(generation), period=PLAY_PERIOD_MS,
                count=len(ALPHAS) - 1)
        return generation

    def advance(self, generation: int):
        """One frame of ▶ (``AlphaSweepModel.advance``)."""
        self.model.advance(generation)

    def pause(self, generation: int | None = None):
        """End the current play (``AlphaSweepModel.pause``)."""
        self.model.pause(generation)

    def _on_playing(self, event):
        """▶'s label, and its clock stopped when the play ends."""
        if event.new:
            self.play_button.label = PAUSE
            return
        player, self._player = self._player, None
        if player is not None:
            player.stop()
        self.play_button.label = PLAY

    def close(self):
        """Release the page's sweep (its browser page is gone): ▶ stops, a sweep under
        way is dropped when it ends, and nothing is drawn any more."""
        self.model.close()
        self._pictures = None

