"""The sidebar's hyperparameters as a ★ on every surface panel, following the sidebar.
Drawing the panels again (contours and all) for each slider move is the slow part of
the Surfaces page, so the stars' Bokeh data sources on the page (one per panel and page
render) are moved alone."""
from __future__ import annotations

from .held import held_on_event_loop
from .settings import LabSettings
from .surface_plots import star_xy
from .surfaces_model import THETA_SETTINGS, current_theta


class Stars:
    """The ★ of each panel drawn since ``clear()`` (``keep`` is each star's HoloViews
    hook), moved to the sidebar's θ whenever one of its hyperparameters changes."""

    def __init__(self, settings: LabSettings):
        self.settings = settings
        self._drawn = []                 # (Bokeh source, x column, y column)
        settings.param.watch(lambda *_: self.move(), sorted(set(THETA_SETTINGS.values())))

    def clear(self):
        """The panels are drawn again: their stars are new."""
        self._drawn = []

    def _data(self, x: str, y: str) -> dict:
        """The ★'s source data (columns ``x``, ``y``: "log10 <axis>") at the sidebar's θ."""
        xy = star_xy(current_theta(self.settings), y.removeprefix("log10 "),
                     x.removeprefix("log10 "))
        return {x: [p[0] for p in xy], y: [p[1] for p in xy]}

    def keep(self, plot, element):
        """A panel's ★ as drawn on a page: at the θ of now (the page may be drawn again
        after θ changed, when the Surfaces page is shown again), and kept to move."""
        source, x, y = plot.handles["source"], *(d.name for d in element.kdims)
        source.data = self._data(x, y)
        self._drawn.append((source, x, y))

    def move(self):
        """The ★ of every panel to the sidebar's θ: its Bokeh source's data, changed on
        the event loop under the document's lock (a setting's callback runs on a Panel
        worker thread, and Panel does not route plain Bokeh changes itself)."""
        # every panel drawn since the surface was: a hidden page's too (its models are
        # out of the document until it is shown again, and come back as they were)
        data = [(source, self._data(x, y)) for source, x, y in self._drawn]
        if not data:
            return

        def move():
            for source, new in data:
                source.data = new
        held_on_event_loop(move)
