"""Session callbacks (next tick, timeout, periodic) registered with, and removed from,
the server's event loop past any document hold, and from the event loop's own thread.

Bokeh registers a callback added with ``doc.add_next_tick_callback`` (or a timeout or
periodic one) with the event loop only when the document dispatches its
``SessionCallbackAdded`` event. While the document is held, that event waits in
``doc.callbacks._held_events``: a plain list that the event loop reads and replaces in
two steps (Bokeh's ``unhold``, Panel's ``unlocked``), and that Panel even restores from
a snapshot while it patches a new model's stylesheets. Panel's worker threads
(``nthreads``) add such callbacks all the time: every widget or layout changed from a
callback there is changed by one (``Reactive._apply_update``), and so is every plot of
the lab (``pn.state.execute``). One appended between the two steps, or under the
snapshot, is lost: its change never runs, and the page never gets it, with the server
idle and no error anywhere (a tab's content that never came had this look; the cause
found for it was another race, ``queued_writes``).

``install`` makes that event, and ``SessionCallbackRemoved``, go to the session at once,
never into the held events, and from a worker thread by way of ``IOLoop.add_callback``,
the one thread-safe way into the loop (Bokeh's own advice, bokeh/bokeh#4000; Tornado's
timers may only be set and cleared there). Outside a server (Jupyter, exports) nothing
changes."""
from __future__ import annotations

import asyncio

from bokeh.document.callbacks import DocumentCallbackManager, invoke_with_curdoc
from bokeh.document.events import SessionCallbackAdded, SessionCallbackRemoved

_bokeh_trigger_on_change = DocumentCallbackManager.trigger_on_change


def _server_loop(doc):
    """The Tornado IOLoop serving ``doc``, or None outside a server."""
    context = getattr(doc, "session_context", None)
    app = getattr(getattr(context, "server_context", None), "application_context", None)
    return getattr(app, "io_loop", None)


def _on_loop_thread(loop) -> bool:
    try:
        return asyncio.get_running_loop() is loop.asyncio_loop
    except RuntimeError:           # no loop runs in this thread: a worker
        return False


def _dispatch(manager: DocumentCallbackManager, event):
    """Hand ``event`` to the document's receivers (the session registers or removes the
    callback with the loop), as Bokeh does for a document not held. A callback that has
    run or been removed meanwhile is not registered, nor one of a document destroyed
    meanwhile (its session gone: Bokeh then drops the document's receivers); one the
    session registered itself (when it was created after the callback was added) is not
    registered twice."""
    doc = manager._document()
    if doc is None or doc.session_context is None or (
            isinstance(event, SessionCallbackAdded)
            and event.callback not in manager._session_callbacks):
        return
    try:
        invoke_with_curdoc(doc, lambda: [receive(event) for receive in manager.change_callbacks()])
    except ValueError as exc:
        if "already been added" not in str(exc):
            raise


def _trigger_on_change(manager: DocumentCallbackManager, event):
    if isinstance(event, (SessionCallbackAdded, SessionCallbackRemoved)):
        loop = _server_loop(manager._document())
        if loop is not None:
            if _on_loop_thread(loop):
                _dispatch(manager, event)
            else:
                loop.add_callback(_dispatch, manager, event)
            return
    _bokeh_trigger_on_change(manager, event)


def install():
    """Route the session-callback events as described above (idempotent)."""
    DocumentCallbackManager.trigger_on_change = _trigger_on_change
