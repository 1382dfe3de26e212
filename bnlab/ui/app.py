"""The lab: sidebar settings, and the Live / Compare / Surfaces pages.

One ``Lab`` per browser session (``panel serve`` runs the app script per session), so
sessions never share state. The settings live in the page URL.

The page is sent before the engine is ready: it shows a spinner until ``start`` (run
once the page has loaded) has built the first run. Compiled programs are shared by the
sessions of a server process, so only the first visitor waits for XLA, and not even
that one under ``panel serve apps/lab.py --warm``, which runs the app once, ``start``
included, before the server accepts visitors. ``close`` releases a session's runs when
its page is gone. Serving it (``serve_lab``: its page, ``page``) and the server's operations
around the sessions are in ``server``."""
from __future__ import annotations

import logging
import weakref

import panel as pn
from panel.io.state import set_curdoc

from .about import ABOUT, REFERENCES
from .address import Address, shown_from_link
from .compare import CompareView
from .controls import Controls, Status
from .exports import Exports
from .live import LiveView
from .mcmc_ref import schedule_ladder
from .settings import LabSettings, link_notice, parse_link
from .surfaces import SurfacesView
from .tour_panel import TourPanel
from .tours import TABS, tour_list_markdown

log = logging.getLogger(__name__)


def _forget_js_links(roots):
    """Drop the JavaScript callbacks of these layouts' widgets from Panel's registry.

    Panel keeps every ``jscallback``/``jslink`` in one class-level ``WeakKeyDictionary``
    (``panel.links.Callback.registry``) keyed by its source widget. An
    ``EditableFloatSlider``'s callback has its own slider among its ``args``, and the
    slider's watchers lead back to the source, so the weak key never dies: each closed
    session would stay in memory whole, and every later page build would be slower, as
    Panel scans the registry's values for each page it sends."""
    from panel.links import Callback
    for root in roots:
        for obj in root.select():
            Callback.registry.pop(obj, None)


def _on_event_loop(doc, fn, delay_ms: int):
    """Call ``fn`` on the server's event loop, ``delay_ms`` from now, holding ``doc``'s
    lock. Panel runs its periodic callbacks on worker threads (``nthreads``); a change
    that adds models to the page from there raced with the event loop's own changes to
    the same document, and under load a patch that refers to a new model (one of
    Panel's shared stylesheets) reached the browser without it. BokehJS then rejects
    that patch and every later one ("reference … isn't known"): the page never showed
    its other plots and never moved again."""
    def call():
        with set_curdoc(doc):
            fn()
    doc.add_timeout_callback(call, delay_ms)


def unknown_theme(search: str) -> dict:
    """{"theme": (text, why)} when a link's ``?theme=`` names no theme of the lab (the
    light ``default`` and ``dark``), else {}: reported with the link's other bad values
    (``link_notice``), while the page shows the default theme."""
    from urllib.parse import parse_qsl
    asked = dict(parse_qsl(search.lstrip("?"), keep_blank_values=True)).get("theme")
    if asked is None or asked.strip("'\"") in pn.theme.THEMES:
        return {}
    return {"theme": (asked, f"is not a theme of the lab ({', '.join(pn.theme.THEMES)}); "
                             f"the default theme is shown")}


class Lab(pn.viewable.Viewer):
    #: the labs of this process not yet garbage-collected (reported when one closes)
    _alive = weakref.WeakSet()

    def __init__(self, **params):
        super().__init__(**params)
        Lab._alive.add(self)
        self.follow_url = False            # serve_lab: settings from and to the address
        self.present = False               # presentation mode (serve_lab: ?present=1)
        self.settings = LabSettings()
        self.link_errors = {}
        self.address: Address | None = None   # set by sync_url
        self.status = Status()
        self.controls = Controls(self.settings, self.status)
        self.live = LiveView(self.settings, self.status)
        self.exports = Exports(self.live)
        self.compare = CompareView(self.settings, reference=self.live.mcmc)
        self.live.model.param.watch(lambda e: self.compare.show_reference(), "references")
        self.surfaces = SurfacesView(self.settings)
        self.tabs = pn.Tabs(("Live", pn.Column(self.live, self.exports,
                                               sizing_mode="stretch_width")), ("Compare", self.compare),
                            ("Surfaces", self.surfaces),
                            ("About", pn.pane.Markdown(
                                ABOUT + "\n" + tour_list_markdown() + "\n" + REFERENCES,
                                max_width=760)),
                            dynamic=True, sizing_mode="stretch_both")
        self.tabs.param.watch(self._log_page_shown, "active")
        self.tour = TourPanel(self)
        self.live.layout.loading = True   # a spinner until ``start`` has built the run
        pn.state.onload(self.start)         # a server: once the page is up; Jupyter: now

    def _log_page_shown(self, event):
        """A page's tab reached the server (its content is built and sent from here on).
        Logged so that, when a page clicked under load never shows its content, the log
        tells whether the click got here."""
        session = getattr(getattr(pn.state.curdoc, "session_context", None), "id", "-")
        log.info("bnlab page shown: %s (%s)", TABS[event.new], session)

    def sync_url(self) -> bool:
        """Bind the settings to the page's address. A shared link is read value by value
        (``parse_link``): its valid values apply, an invalid one keeps its default and is
        named in a notification when the page loads; from then on the address holds the
        settings in force (``address.Address``). Returns whether the address named any
        setting (a copied address, not a bare ``?tour=`` link)."""
        loc = pn.state.location
        if loc is None:
            return False
        good, self.link_errors = parse_link(loc.search or "")
        names_settings = bool(good or self.link_errors)
        self.link_errors.update(unknown_theme(loc.search or ""))
        if good:
            self.settings.apply_link(good)
        self.address = Address(loc, self.settings, self.tour.query, doc=pn.state.curdoc,
                               shown_query=self.shown_query)
        self.live.model.param.watch(lambda e: self.address.write(), ["running", "references"])
        return names_settings

    def shown_query(self) -> list:
        """What the page shows beyond its settings, for a copied link to bring back: a
        run solved to its stop (``show=run``) and the MCMC reference's schedule
        (``mcmc=``temperatures, which with the reference's fixed seed gives the same
        samples, from the disk cache)."""
        runner, mcmc = self.live.runner, self.live.mcmc
        query = [("present", "1")] if self.present else []
        if runner is not None and not self.live.running and runner.stop_reason() is not None:
            query.append(("show", "run"))
        if mcmc.samples is not None:
            query.append(("mcmc", str(mcmc.num_temps)))
        return query

    def restore_shown(self, solve: bool, temps: int | None):
        """Bring back what a copied link says its page showed (``shown_query``): the run
        solved to its stop, the MCMC reference of ``temps`` temperatures; what a tour
        step did already is not done again."""
        live = self.live
        if solve and live.runner is not None and live.runner.stop_reason() is None:
            live.solve()
        if temps is not None and not (live.problem is not None and live.mcmc.holds(live.problem)
                                      and live.mcmc.num_temps == temps):
            live.compute_mcmc(temps)

    def start(self):
        """Called once the page is loaded: the settings of a shared link are applied
        (not while the page is being sent, which would wait for their build), its bad
        values named in a notification and the address bar corrected to the values in
        force; a ``?tour=`` opens its first step; then the first build (JAX compiles here,
        once per server process); the spinner stays until the first plot is drawn, and
        the Live page's other plots follow it (``LiveView.show_all``)."""
        link_names_settings = False
        doc = pn.state.curdoc
        session = getattr(getattr(doc, "session_context", None), "id", "-")
        log.info("bnlab page loaded: %s", session)   # a page that never showed: did it get here?
        try:
            shown = (False, None)
            if self.follow_url:
                link_names_settings = self.sync_url()   # its settings rebuild the run …
                loc = pn.state.location
                *shown, bad = shown_from_link((loc.search if loc else "") or "",
                                              schedule_ladder())
                self.link_errors.update(bad)
            if self.link_errors and pn.state.notifications is not None:
                pn.state.notifications.warning(link_notice(self.link_errors), duration=0)
            if self.follow_url:
                self.tour.open_from_url(keep_settings=link_names_settings)
            if self.live.runner is None:   # … else (or if they cannot) build it now
                self.live.rebuild()
            self.restore_shown(*shown)
            if self.address is not None:   # the values in force, the tour's step
                self.address.write()
        finally:
            self.live.layout.loading = False
            log.info("bnlab first build done: %s (%s)", session,
                     "a run" if self.live.runner is not None else "no run")
            if doc is not None and doc.session_context is not None:
                # the rest of the Live page once the first plot has gone out
                _on_event_loop(doc, self.live.show_all, 50)
            else:
                self.live.show_all()

    def close(self):
        """The browser session is gone: stop its periodic callback and any surface
        computation, and drop its runs, so a class of thirty leaves nothing behind
        (``server.close_session`` also hands the memory back and logs it)."""
        self.live.close()
        self.compare.close()
        self.surfaces.close()
        _forget_js_links([*self.controls.rows.values(), self.tour.layout, self.tabs])

    def __panel__(self):
        # a tour opens from the address only, so a notebook has none to show
        return pn.Row(pn.Column(self.controls, width=340), self.tabs, sizing_mode="stretch_both")
