"""A callback a worker thread adds to a served document while the event loop holds the
document reaches the session (``bnlab.ui.session_callbacks``). Bokeh kept its
``SessionCallbackAdded`` event among the held events, which the loop reads and replaces
in two steps and Panel restores from a snapshot: one appended in between was lost, and
with it the change the callback carried. Here the held events are dropped outright, as
the snapshot drops them, and the session must still get the callback, on the loop's
thread."""
import asyncio
import logging
import threading
import weakref

import pytest
from bokeh.document import Document
from bokeh.document.events import SessionCallbackAdded
from tornado.ioloop import IOLoop

import bnlab.ui  # noqa: F401  (installs the routing)


class _Context:
    """What the routing reads of a served document's session context: its loop."""

    def __init__(self, loop):
        app = type("App", (), {"io_loop": loop})()
        self.server_context = type("Server", (), {"application_context": app})()


class _Session:
    """Records the callbacks the document hands it, and the thread it got each on (as
    Bokeh's ServerSession registers them with the loop)."""

    def __init__(self):
        self.added = []
        self.got = threading.Event()

    def _session_callback_added(self, event):
        self.added.append((event.callback, threading.get_ident()))
        self.got.set()

    def _session_callback_removed(self, event):
        pass


@pytest.fixture()
def served():
    """A document served by an event loop running in its own thread, and its session."""
    started, box = threading.Event(), {}

    def run():
        asyncio.set_event_loop(asyncio.new_event_loop())
        box["loop"], box["thread"] = IOLoop.current(), threading.get_ident()
        started.set()
        box["loop"].start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    doc, context, session = Document(), _Context(box["loop"]), _Session()
    doc._session_context = weakref.ref(context)
    doc.callbacks.on_change_dispatch_to(session)
    yield doc, session, box["loop"], box["thread"]
    box["loop"].add_callback(box["loop"].stop)
    thread.join(10)


def test_a_callback_added_from_a_worker_under_a_hold_reaches_the_session(served):
    doc, session, loop, loop_thread = served
    doc.hold("combine")                              # the event loop holds the page …
    callback = doc.add_next_tick_callback(lambda: None)   # … as a worker adds a change
    doc.callbacks._held_events = []                 # what a restored snapshot drops
    doc.unhold()
    assert session.got.wait(10), "the session never got the worker's callback"
    assert session.added == [(callback, loop_thread)]


def test_a_callback_added_on_the_loop_under_a_hold_reaches_the_session_at_once(served):
    doc, session, loop, loop_thread = served
    seen = {}

    def on_loop():
        doc.hold("combine")
        seen["callback"] = doc.add_next_tick_callback(lambda: None)
        seen["added"] = list(session.added)          # before the hold ends
        doc.unhold()

    loop.add_callback(on_loop)
    assert session.got.wait(10)
    assert seen["added"] == [(seen["callback"], loop_thread)]


def test_a_callback_added_as_its_session_ends_is_let_go(served, caplog):
    """A worker's callback whose document is destroyed (its session discarded) before
    the loop registers it: nothing is registered, and nothing fails on the loop
    (Bokeh's destroyed document has no receivers left to ask)."""
    doc, session, loop, loop_thread = served
    busy, release, ran = threading.Event(), threading.Event(), threading.Event()
    loop.add_callback(lambda: (busy.set(), release.wait(10)))   # the loop is busy …
    assert busy.wait(10)
    doc.add_next_tick_callback(lambda: None)  # … while a worker adds a callback
    doc.destroy(session)                      # and the session ends
    release.set()
    loop.add_callback(ran.set)
    with caplog.at_level(logging.ERROR):
        assert ran.wait(10)
    assert session.added == [] and caplog.records == []


def test_a_document_without_a_server_keeps_bokehs_hold():
    """In Jupyter or an export there is no loop to route to: the event is held."""
    doc, session = Document(), _Session()
    doc.callbacks.on_change_dispatch_to(session)
    doc.hold("collect")
    doc.add_next_tick_callback(lambda: None)
    assert session.added == []
    assert any(isinstance(e, SessionCallbackAdded) for e in doc.callbacks._held_events)
    doc.unhold()
    assert len(session.added) == 1
