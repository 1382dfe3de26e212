"""Changes that go to the page as one message: made on the session's event loop, under
the document's lock and ``pn.io.hold``, never under a hold taken on a worker thread."""
from __future__ import annotations

import panel as pn


def held_on_event_loop(change):
    """Call ``change`` on the session's event loop, under the document's lock, inside
    ``pn.io.hold`` (its changes go out as one message, after any change queued there
    before it); at once where there is no server (tests, notebooks) or on the loop
    already.

    A hold taken on a worker thread (Panel's threaded ``hold``) holds the whole
    document, the event loop's own changes included, until a later tick of the loop
    releases it. A message from the page handled meanwhile (a click, the address) makes
    Bokeh count every model that joined the document since as known to the page
    (``Document.apply_json_patch`` flushes all of its new models, held or not). The held
    change that brought them (a tab's page shown again, its models back in the
    document) then goes out naming them without their definitions, and BokehJS drops
    that patch whole ("reference … isn't known"): the page stays out of step with the
    server. On the event loop a hold ends, its changes serialised, before the next
    message from the page is applied (both need the document's lock)."""
    def held():
        with pn.io.hold():
            change()
    pn.state.execute(held, schedule="auto")
