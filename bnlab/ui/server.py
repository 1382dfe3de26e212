"""Serving the lab: what ``panel serve apps/lab.py`` runs per session (``serve_lab``), the
page it serves (``page``: a ``LabTemplate`` around the session's ``Lab``), and the
server's operations around the sessions: resources from this server alone,
a session kept until its page has loaded, closed pages and WebSockets handled quietly,
a closed session's memory released, and the server's lasting objects frozen out of
garbage collection once no session is open."""
from __future__ import annotations

import ctypes
import gc
import logging
import math
import os
import sys
import threading
import tracemalloc
from pathlib import Path

import panel as pn
from tornado.ioloop import IOLoop

from . import presentation
from .app import Lab

ASSETS = Path(__file__).resolve().parents[2] / "assets"
log = logging.getLogger(__name__)


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


def page(lab: Lab) -> LabTemplate:
    """The lab's page as served: the settings in the sidebar, the pages (and a tour's
    text) in the main area, the presentation switch in the header."""
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
    header = [presentation.switch(lab.present)]
    if lab.present:
        css += presentation.CSS
        header.append(presentation.Keys(lab))
    return LabTemplate(
        title="bnlab — approximate inference lab", sidebar=[lab.controls],
        main=_main_cards(lab), header=header, collapsed_sidebar=lab.present,
        sidebar_width=340, raw_css=[css], accent="#1f5fa8",
        font_url="data:text/css,", busy_indicator=None, **extra)


def _main_cards(lab: Lab) -> list:
    """The template's main items, each a card of its own: the tour panel only when
    the address asks for a tour (hidden, it left an empty card above the pages).
    Not one Column holding both: there, HoloViews' surface panels were painted with
    their colour bar where the y axis belongs and the x axis above the frame, though
    BokehJS laid them out right (Bokeh 3.9, Panel 1.9)."""
    asks_for_tour = bool(pn.state.session_args.get("tour"))
    if not asks_for_tour:
        return [lab.tabs]
    if lab.present:            # the text beside the page it describes
        lab.tour.layout.param.update(sizing_mode=None, width=presentation.TEXT_WIDTH)
        return [pn.Row(lab.tour, lab.tabs, sizing_mode="stretch_width")]
    return [lab.tour, lab.tabs]


def _return_freed_memory():
    """Collect the closed session's cycles, and hand glibc's freed heap pages back to
    the system (``malloc_trim``): otherwise a server's resident memory only grows with
    each class, though the sessions are gone."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):      # not glibc: nothing to trim
        pass



def close_session(lab: Lab, session_context):
    """The browser session is gone: release its lab (``Lab.close``) and the memory it
    held, and log how many labs the process still holds."""
    lab.close()
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
    released on its own (``close_session``): such a failure is dropped here, once per
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


def _tolerate_pages_whose_session_is_gone():
    """Bokeh's WebSocket handler reads its connection's session, which is None once the
    page's connection was let go of (a tab closed while its page loaded or sent, or left
    open past the session's lifetime). Its ``on_close`` then raised an
    ``AssertionError`` that Tornado logged as an uncaught exception, and a message
    the page had already sent (a plot's new width) was logged as "error handling
    message" with the same traceback. Such a close now only releases the connection,
    and such a message is dropped with a line in the log. Applied once per process."""
    from bokeh.server.views.ws import WSHandler
    original_close, original_handle = WSHandler.on_close, WSHandler._handle
    if getattr(original_close, "tolerates_gone_sessions", False):
        return

    def gone(handler) -> bool:
        connection = getattr(handler, "connection", None)
        return connection is not None and getattr(connection, "_session", True) is None

    def on_close(self):
        if gone(self):
            log.info("bnlab: a page's WebSocket closed after its session was discarded")
            self.application.client_lost(self.connection)
            return
        original_close(self)

    async def handle(self, message):
        if gone(self):
            log.info("bnlab: a %s from a page whose session is gone was dropped",
                     message.msgtype)
            return None
        return await original_handle(self, message)
    on_close.tolerates_gone_sessions = True
    WSHandler.on_close, WSHandler._handle = on_close, handle


def _serialise_panels_busy_counter():
    """Panel counts the events in flight in ``pn.state`` and edits that read-only count
    (and ``busy``) inside ``edit_readonly``, which is not thread-safe: with the lab's
    worker threads, one thread leaving ``edit_readonly`` made the parameter read-only
    again while another was setting it, and Panel logged "TypeError: Read-only
    parameter 'busy' cannot be modified" for a session's event (seen with five
    sessions at once). The counter's three methods now run under one lock. Applied once
    per process."""
    cls = type(pn.state)
    if getattr(cls, "_busy_counter_serialised", False):
        return
    lock = threading.RLock()
    for name in ("_add_busy_event", "_remove_busy_event", "_cleanup_busy_counter"):
        original = getattr(cls, name)

        def locked(self, *args, _original=original, **kwargs):
            with lock:
                return _original(self, *args, **kwargs)
        setattr(cls, name, locked)
    cls._busy_counter_serialised = True


def serve_lab():
    """Build the per-session app (the body of apps/lab.py)."""
    serve_resources_locally()
    _serialise_panels_busy_counter()
    send_mathjax_only_for_tex()
    _ignore_writes_to_closed_pages()
    _tolerate_pages_whose_session_is_gone()
    _keep_session_until_its_page_loads()    # its onload first: the lab's may raise
    lab = Lab()
    lab.follow_url = True
    lab.present = presentation.asked(pn.state.session_args)
    pn.state.on_session_destroyed(lambda context: close_session(lab, context))
    # once the closed session's document is released, not while it is being destroyed
    pn.state.on_session_destroyed(
        lambda _: IOLoop.current().add_callback(_freeze_lasting_objects))
    context = getattr(pn.state.curdoc, "session_context", None)
    log.info("bnlab session opened: %s", getattr(context, "id", "-"))
    return page(lab)
