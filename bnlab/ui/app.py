"""The lab: sidebar settings, and the Live / Compare / Surfaces pages.

One ``Lab`` per browser session (``panel serve`` runs the app script per session), so
sessions never share state. The settings live in the page URL.

The page is sent before the engine is ready: it shows a spinner until ``start`` (run
once the page has loaded) has built the first run. Compiled programs are shared by the
sessions of a server process, so only the first visitor waits for XLA, and not even
that one under ``panel serve apps/lab.py --warm``, which runs the app once, ``start``
included, before the server accepts visitors. ``close`` releases a session's runs when
its page is gone."""
from __future__ import annotations

import ctypes
import gc
import logging
import math
import os
import sys
import tracemalloc
import weakref
from pathlib import Path

import panel as pn
from panel.io.state import set_curdoc
from tornado.ioloop import IOLoop

from . import presentation
from .address import Address, shown_from_link
from .compare import CompareView
from .controls import Controls, Status
from .exports import Exports
from .live import LiveView
from .mcmc_ref import schedule_ladder
from .settings import LabSettings, link_notice, parse_link
from .surfaces import SurfacesView
from .tours import TABS, TourPanel, tour_list_markdown

ASSETS = Path(__file__).resolve().parents[2] / "assets"
log = logging.getLogger(__name__)

ABOUT = """
### What is this?
A lab for **approximate Bayesian inference in Gaussian-process models**. Pick a data set,
a likelihood, a kernel and an inference method in the sidebar, then press **Run** (or
**Step**) on the *Live* page and watch the approximation converge — or fail.

* *Posterior*: the latent function's mean and a ±2σ band; grey dots are the data.
* *Energy*: the method's approximation of the log marginal likelihood, per iteration.
* *PSD status*: a red square marks an iteration where the posterior or a cavity
  distribution stopped being a valid Gaussian (not positive definite); an amber one, a
  proposed step that would have, which the safeguards rejected (the iterate stayed).
* *Sites*: the Gaussian factors that stand in for each data point's likelihood.
* *Two points*: click two data points to see the joint Gaussian of their latent values.

*Compare* runs two methods side by side and sweeps the Power-EP power α from
variational inference (α → 0) to EP (α = 1), with the MCMC reference as the truth
once it is computed on the Live page. *Surfaces* maps the approximate marginal
likelihood over a grid of hyperparameters.

The address bar always holds the current settings: copy it to share this exact demo.

### The pages in detail
* *Live*: the status line says why a run stopped (converged; diverged, by the posterior,
  a cavity or non-finite values; the iteration cap; stalled; cancelled). Click a point
  to compare its q(fᵢ) with its cavity and tilted distribution, click two for their
  joint 2σ ellipse. The MCMC reference's log p(y) is an interval, forward AIS (a
  stochastic lower bound) and reverse AIS from posterior samples (an upper bound): it
  is *resolved* when the interval, widened by two standard errors each side, is
  narrower than 0.05 nats; press again for four times the temperatures. Exports: the
  trace, the band and the MCMC reference as CSV, each plot as PNG (its save tool).
* *Compare*: each method at its own α and ρ (a diverged one draws no band). The α
  explorer computes 21 values of α from 0.001 to 1 at once; the slider and ▶ then show
  any of them, every diverged α marked.
* *Surfaces*: contours on a shared colour scale, a slice view, learning trajectories
  over every panel, CSV and netCDF downloads. A cell where a method diverged is grey;
  lines count those cells, the ones at the iteration cap and the MCMC cells not
  resolved. Compare and Surfaces say when the sidebar changed since they were computed.
* *Guided tours*: Next / Back set the controls, which stay free to change in between; a
  step shows its run already solved (⟲ Replay animates it); the address names the step,
  and Exit takes the tour away.
* *Presentation mode* (the header's Present switch): the sidebar folded (☰ opens it),
  larger type; Space runs or pauses, ← / → go through a tour's steps.
* *Copy link* brings back what the page showed: a run solved to its stop and the same
  MCMC reference, so a student's page shows the teacher's numbers.
"""


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


def _return_freed_memory():
    """Collect the closed session's cycles, and hand glibc's freed heap pages back to
    the system (``malloc_trim``): otherwise a server's resident memory only grows with
    each class, though the sessions are gone."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):      # not glibc: nothing to trim
        pass


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


class LabTemplate(pn.template.FastListTemplate):
    """The lab's page, its Bokeh document built with the document's model index frozen:
    every editable slider links its number box to its slider in JavaScript, and each
    link would make Bokeh walk all the page's models again (benchmarks/README.md, "App
    load"); frozen, it walks them once. An unknown ``?theme=`` gives the default theme
    (Panel's own lookup raised a KeyError and the page did not load)."""

    @staticmethod
    def _get_theme_from_query_args():
        theme = pn.template.FastListTemplate._get_theme_from_query_args()
        return theme if theme in pn.theme.THEMES else None

    def server_doc(self, doc=None, title=None, location=True):
        target = doc if doc is not None else pn.state.curdoc
        if target is None:
            return super().server_doc(doc, title=title, location=location)
        with target.models.freeze():
            return super().server_doc(target, title=title, location=location)


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
        self.live.param.watch(lambda e: self.compare.show_reference(), "references")
        self.surfaces = SurfacesView(self.settings)
        self.tabs = pn.Tabs(("Live", pn.Column(self.live, self.exports,
                                               sizing_mode="stretch_width")), ("Compare", self.compare),
                            ("Surfaces", self.surfaces),
                            ("About", pn.pane.Markdown(ABOUT + "\n" + tour_list_markdown(),
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
        self.live.param.watch(lambda e: self.address.write(), ["running", "references"])
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

    def close(self, session_context):
        """The browser session is gone: stop its periodic callback and any surface
        computation, and drop its runs, so a class of thirty leaves nothing behind."""
        self.live.close()
        self.compare.close()
        self.surfaces.close()
        _forget_js_links([*self.controls.rows.values(), self.tour.layout, self.tabs])
        _return_freed_memory()
        # with ``PYTHONTRACEMALLOC`` set, also the memory Python's objects still hold:
        # what separates a leak from memory the allocators have freed but kept. Not
        # ``len(gc.get_objects())``: its list holds, for a moment, a reference to a tuple
        # another thread is still building, and that thread's tuple(...) then fails
        # ("SystemError: … tupleobject.c: bad argument to internal function"): under
        # load, JAX's tracing of a page's first run failed so, and the page stayed blank
        traced = (f"; Python heap: {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MB"
                  if tracemalloc.is_tracing() else "")
        log.info("bnlab session closed: %s (labs in memory, this one included: %d; "
                 "Python memory blocks: %d%s)", getattr(session_context, "id", "-"),
                 len(Lab._alive), sys.getallocatedblocks(), traced)

    def template(self):
        css = (ASSETS / "lab.css").read_text() if (ASSETS / "lab.css").exists() else ""
        # the Fast design fetches Open Sans from Google; classrooms may be offline, so
        # use the system sans-serif instead of a failing request
        fast = pn.theme.fast.Fast
        fast._resources = {k: v for k, v in fast._resources.items() if k != "font"}
        logo = ASSETS / "logo.svg"
        extra = {"logo": str(logo)} if logo.exists() else {}
        # no header spinner: it follows Panel's process-wide ``busy`` state, so every
        # callback of any session (each tick of a run) set the spinner of every open
        # page, which spun for the others' runs and cost an update per open page; each
        # page shows its own work (loading overlays, progress bars, the status line)
        header = [presentation.switch(self.present)]
        if self.present:
            css += presentation.CSS
            header.append(presentation.Keys(self))
        return LabTemplate(
            title="bnlab — approximate inference lab", sidebar=[self.controls],
            main=self._main_cards(), header=header, collapsed_sidebar=self.present,
            sidebar_width=340, raw_css=[css], accent="#1f5fa8",
            font_url="data:text/css,", busy_indicator=None, **extra)

    def _main_cards(self) -> list:
        """The template's main items, each a card of its own: the tour panel only when
        the address asks for a tour (hidden, it left an empty card above the pages).
        Not one Column holding both: there, HoloViews' surface panels were painted with
        their colour bar where the y axis belongs and the x axis above the frame, though
        BokehJS laid them out right (Bokeh 3.9, Panel 1.9)."""
        asks_for_tour = bool(pn.state.session_args.get("tour"))
        if not asks_for_tour:
            return [self.tabs]
        if self.present:            # the text beside the page it describes
            self.tour.layout.param.update(sizing_mode=None, width=presentation.TEXT_WIDTH)
            return [pn.Row(self.tour, self.tabs, sizing_mode="stretch_width")]
        return [self.tour, self.tabs]

    def __panel__(self):
        # a tour opens from the address only, so a notebook has none to show
        return pn.Row(pn.Column(self.controls, width=340), self.tabs, sizing_mode="stretch_both")


def serve_resources_locally():
    """Every script and stylesheet of the page (Bokeh's, Panel's, the template's) comes
    from this server, whatever the environment asks (``BOKEH_RESOURCES=cdn`` sends the
    page to cdn.bokeh.org and cdn.holoviz.org): a classroom may have no internet, or
    forbid it, and the page must be complete from the lab server alone.

    Panel also re-resolves a stylesheet's address each time a pane updates one of its
    Bokeh models, and for a model outside any document (a page of a dynamic ``Tabs``
    that is not shown: the Live page's status while the Surfaces page is open) it falls
    back to the CDN and rewrites the sheet, which all of the session's components
    share: every one of them then asked cdn.holoviz.org for Panel's loading.css. A
    session that Bokeh discarded (its page connected after the unused-session lifetime)
    and built again when the page connected had every stylesheet on the CDN, for the
    same reason.
    Here a stylesheet whose document's address is unknown goes to this server's own
    (Panel 1.9's ``patch_stylesheet``)."""
    from bokeh.settings import settings
    from panel import reactive
    from panel.io import resources
    settings.resources = "server"
    if getattr(resources.patch_stylesheet, "keeps_local", False):
        return
    to_dist = resources.patch_stylesheet

    def patch_stylesheet(stylesheet, dist_url):
        if dist_url == resources.CDN_DIST:
            dist_url = resources.get_dist_path(cdn=False)
        to_dist(stylesheet, dist_url)
    patch_stylesheet.keeps_local = True
    resources.patch_stylesheet = reactive.patch_stylesheet = patch_stylesheet


def send_mathjax_only_for_tex():
    """Send Bokeh's MathJax bundle only with a page whose text has TeX in it (``$$…$$``,
    ``\\(…\\)``, ``\\[…\\]``: Bokeh's own rule for its ``Div``). Panel sends it
    with any page that has an HTML or Markdown pane, TeX or not: the largest script of
    a first visit, uncompressed, once per student on a classroom's network
    (benchmarks/README.md, "App load"). The lab
    writes its symbols in Unicode (ℓ, σ², Λ̃), so its pages need none."""
    from bokeh.embed.util import contains_tex_string
    from panel.io import resources
    from panel.models.markup import HTML

    def panel_html_has_tex(roots) -> bool:
        return resources._any(roots, lambda obj: isinstance(obj, HTML)
                              and contains_tex_string(obj.text or ""))
    resources._panel_use_mathjax = panel_html_has_tex


def _freeze_lasting_objects():
    """Once per server process, the first time no session is open (right after the
    ``--warm`` build is released), move every object the cyclic garbage collector
    tracks into its permanent generation (``gc.freeze``). Those objects (Panel, Bokeh,
    JAX and the compiled programs, most of the process's) live as long as the server,
    yet each full collection would traverse them again, pausing the event loop, and so
    every page, while a class arrives; sessions' objects, made after the freeze, are
    collected as usual. Reference counting still frees frozen objects; only a frozen cycle that
    later becomes garbage would stay, hence nothing of an open session is frozen (the
    closed ``--warm`` session, which Panel keeps for the server's life, is)."""
    global _lasting_objects_frozen
    if _lasting_objects_frozen:
        return
    gc.collect()
    if any(not lab.live.closed for lab in Lab._alive):   # a session is open: wait for it
        return
    gc.freeze()
    _lasting_objects_frozen = True
    log.info("bnlab: %d lasting Python objects frozen out of garbage collection",
             gc.get_freeze_count())


_lasting_objects_frozen = False

def _page_patience_s() -> float:
    """How long a session waits for its page to connect and load before Bokeh's
    unused-session lifetime applies to it: ``BNLAB_PAGE_PATIENCE_S`` seconds, by
    default 300 (a page that has not loaded in five minutes is taken as gone)."""
    text = os.environ.get("BNLAB_PAGE_PATIENCE_S", "300")
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"BNLAB_PAGE_PATIENCE_S must be a number of seconds ≥ 0, "
                         f"not {text!r}")
    return seconds


PAGE_PATIENCE_S = _page_patience_s()
#: at most this many sessions wait so at once (two classes arriving together); beyond,
#: Bokeh's own rule applies, so requests for pages that never connect cannot hold the
#: server's memory for long
MOST_SESSIONS_WAITING = 60
_sessions_waiting: set = set()       # touched on the event loop only


def _keep_session_until_its_page_loads(patience_s: float = PAGE_PATIENCE_S):
    """Keep the session being built until its page has loaded (Panel's ``onload``), for
    at most ``patience_s``. Bokeh discards a session that no page has connected to
    within its unused-session lifetime (15 s by default) of being built. A class arriving
    at once on a small server is built one page after the other on one event loop, and
    the pages' scripts and WebSockets wait behind those builds: a page that connected
    later found its session discarded, and the server built it a second time, which made
    the others later still, until some page never showed its run. Bokeh's own expiration
    block (``ServerSession.block_expiration``, which it takes while a callback holds the
    document) keeps the session; it is taken once the session exists, right after this
    build, and released on the event loop (the count is not thread-safe) when the page
    has loaded or the patience has run out, whichever comes first. Once released, the
    unused-session lifetime counts from the page's last disconnection as before, so a
    closed tab is still let go after it."""
    doc = pn.state.curdoc
    context = getattr(doc, "session_context", None)
    if context is None:
        return
    loop = IOLoop.current()
    timer = []          # the patience's timeout, cancelled by a page that loads first

    def hold():
        session = getattr(context, "_session", None)   # set by Bokeh after the build
        if (session is not None and not session.destroyed
                and len(_sessions_waiting) < MOST_SESSIONS_WAITING):
            session.block_expiration()
            _sessions_waiting.add(session)
            timer.append(loop.call_later(patience_s, let_go))

    def let_go():
        session = getattr(context, "_session", None)
        if session in _sessions_waiting:
            _sessions_waiting.discard(session)
            session.unblock_expiration()
        while timer:
            loop.remove_timeout(timer.pop())

    loop.add_callback(hold)
    pn.state.onload(lambda: loop.add_callback(let_go))


def _ignore_writes_to_closed_pages():
    """A message Bokeh was sending when its page's WebSocket closed (a tab closed mid-run
    or while loading) fails in a task nobody awaits, and asyncio logged each one as
    "Task exception was never retrieved" with two tracebacks: 26 of them for three
    rounds of five visitors closing their tabs. The page is gone and its session is
    released on its own (``Lab.close``): such a failure is dropped here, once per
    event loop; every other exception goes to the loop's handler as before."""
    from tornado.iostream import StreamClosedError
    from tornado.websocket import WebSocketClosedError
    loop = IOLoop.current().asyncio_loop
    previous = loop.get_exception_handler()
    if getattr(previous, "ignores_closed_pages", False):
        return

    def handle(loop, context):
        if isinstance(context.get("exception"), (WebSocketClosedError, StreamClosedError)):
            return
        if previous is None:
            loop.default_exception_handler(context)
        else:
            previous(loop, context)
    handle.ignores_closed_pages = True
    loop.set_exception_handler(handle)


def _close_pages_whose_session_is_gone():
    """Bokeh's WebSocket ``on_close`` reads its connection's session, which is None once
    the session was discarded first (a tab closed while its page loaded, or left open
    past the session's lifetime), and Tornado logged the ``AssertionError`` it raises
    as an uncaught exception. Such a close now only releases the connection. Applied
    once per process."""
    from bokeh.server.views.ws import WSHandler
    original = WSHandler.on_close
    if getattr(original, "tolerates_gone_sessions", False):
        return

    def on_close(self):
        connection = getattr(self, "connection", None)
        if connection is not None and getattr(connection, "_session", True) is None:
            log.info("bnlab: a page's WebSocket closed after its session was discarded")
            self.application.client_lost(connection)
            return
        original(self)
    on_close.tolerates_gone_sessions = True
    WSHandler.on_close = on_close


def serve_lab():
    """Build the per-session app (the body of apps/lab.py)."""
    serve_resources_locally()
    send_mathjax_only_for_tex()
    _ignore_writes_to_closed_pages()
    _close_pages_whose_session_is_gone()
    _keep_session_until_its_page_loads()    # its onload first: the lab's may raise
    lab = Lab()
    lab.follow_url = True
    lab.present = presentation.asked(pn.state.session_args)
    pn.state.on_session_destroyed(lab.close)
    # once the closed session's document is released, not while it is being destroyed
    pn.state.on_session_destroyed(
        lambda _: IOLoop.current().add_callback(_freeze_lasting_objects))
    context = getattr(pn.state.curdoc, "session_context", None)
    log.info("bnlab session opened: %s", getattr(context, "id", "-"))
    return lab.template()
