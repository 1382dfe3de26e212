"""The page's address bar as a function of the lab's state.

The address is ``?tour=…&step=…`` while a tour is open, then every ``URL_PARAMS``
setting, so a copied address reproduces the page. It is never edited in place: each
change of a setting or of the tour's step writes the whole address from the current
state. Panel's ``Location.sync`` edits it in place (read the address, change one value,
write it back), and Panel handles the browser's events on several threads
(``nthreads``): a tour's step and a setting echoed from the browser then each read the
old address and the later write dropped the other's change, so under load the address
lost ``&step=`` and a copied link reopened the wrong step. Here the address is written
on the server's event loop, from the state at that moment: whichever write comes last
holds every change made before it."""
from __future__ import annotations

import json
import threading
from typing import Callable
from urllib.parse import urlencode

from .settings import URL_PARAMS, LabSettings


def settings_query(settings: LabSettings) -> list[tuple[str, str]]:
    """The settings' part of the address (``url_state``), each value as its parameter
    serialises it (JSON for numbers and booleans: ``alpha=0.25``, ``backtrack=true``),
    a number to 12 significant digits: a slider's steps come out of its arithmetic as
    6.649999999999999 where its box shows 6.65, and a shared link should read as the
    box does (the run it opens differs by the last bit of ℓ, far below any tolerance)."""
    pairs = []
    for name, value in settings.url_state().items():
        if isinstance(value, float):
            value = float(f"{value:.12g}")
        text = settings.param[name].serialize(value)
        pairs.append((name, text if isinstance(text, str) else json.dumps(text)))
    return pairs


def shown_from_link(search: str, ladder) -> tuple[bool, int | None, dict]:
    """What a copied link says the page showed beyond its settings (``Lab.shown_query``):
    (the run solved to its stop: ``show=run``; the MCMC reference's temperatures:
    ``mcmc=T``, one of ``ladder``, the schedules the lab runs; {name: (text, why)} of
    values it cannot use, as ``settings.parse_link`` reports them)."""
    from urllib.parse import parse_qsl
    query = dict(parse_qsl(search.lstrip("?"), keep_blank_values=True))
    bad, temps = {}, None
    show = query.get("show")
    if show not in (None, "run"):
        bad["show"] = (show, "is not “run”")
    text = query.get("mcmc")
    if text is not None:
        if text.isdigit() and int(text) in ladder:
            temps = int(text)
        else:
            bad["mcmc"] = (text, "is not a number of temperatures the lab runs "
                                 f"({', '.join(map(str, ladder))})")
    return show == "run", temps, bad


class Address:
    """Keeps ``location.search`` equal to ``tour_query()``, then the settings, then
    ``shown_query()`` (what the page shows beyond its settings).

    ``location``: the session's ``panel.io.location.Location``; ``doc``: its Bokeh
    document (None outside a server: the address is then written at once; once the
    session is destroyed nothing is written);
    ``tour_query``: the tour's ``[("tour", key), ("step", k)]``, empty when closed."""

    def __init__(self, location, settings, tour_query: Callable[[], list], doc=None,
                 shown_query: Callable[[], list] = list):
        self.location, self.settings, self.tour_query, self.doc = (
            location, settings, tour_query, doc)
        self.shown_query = shown_query
        self._lock = threading.RLock()   # a watcher of the address may change a setting
        settings.param.watch(lambda *_: self.write(), list(URL_PARAMS))

    def text(self) -> str:
        return "?" + urlencode([*self.tour_query(), *settings_query(self.settings),
                                *self.shown_query()])

    def write(self):
        """Bring the address up to date, on the event loop if served (a change made on a
        worker thread is applied there, in the order of the writes)."""
        if self.doc is None:
            self._flush()
        elif self.doc.session_context is not None:   # None: the page is gone
            self.doc.add_next_tick_callback(self._flush)

    def _flush(self):
        with self._lock:
            text = self.text()
            if self.location.search != text:
                self.location.search = text
