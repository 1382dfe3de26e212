"""No page is held from a worker thread. A hold taken there holds the whole document
until a later tick of the event loop; a click handled meanwhile makes Bokeh count the
models that joined the document since as known to the page, and the held change that
brought them goes out naming them undefined: BokehJS drops it ("reference … isn't
known", ``bnlab.ui.held``). Here the α explorer's sweep, shown from a worker thread
as a tour step's action shows it (then redrawn as when the MCMC reference arrives), in
a served document without a browser: no hold on that thread, and the plots get the
sweep once the event loop has run what was queued for it. And Bokeh's side of it."""
import threading
import weakref

import numpy as np
import panel as pn
from bokeh.document import Document
from panel.io.state import set_curdoc, state

from bnlab.ui.alpha_sweep import alpha_sweep
from bnlab.ui.compare import CompareView
from bnlab.ui.problem import build_problem
from bnlab.ui.settings import LabSettings


class _Session:
    """What Panel reads of a served document's session context (no connection)."""
    session = None
    id = "worker-holds"
    server_context = None


def _served(view):
    """``view``'s page in a document Panel takes for a served one, owned by this
    thread (its event loop); the session context must stay referenced."""
    doc, ctx = Document(), _Session()
    doc._session_context = weakref.ref(ctx)
    doc.add_root(pn.panel(view).get_root(doc))
    state._thread_id_[doc] = threading.get_ident()
    state._connected[doc] = True
    return doc, ctx


def _run_event_loop(doc):
    """Run the callbacks queued for the document's event loop, and those they queue."""
    while doc.session_callbacks:
        for cb in list(doc.session_callbacks):
            doc.remove_next_tick_callback(cb)
            cb.callback()


def test_a_sweep_shown_from_a_worker_thread_holds_no_page_there():
    settings = LabSettings()
    view = CompareView(settings)
    doc, ctx = _served(view)               # ctx: the session, weakly referenced by doc
    holders, hold = [], doc.hold
    doc.hold = lambda *a, **k: (holders.append(threading.get_ident()), hold(*a, **k))[1]
    failed = []

    def action():
        with set_curdoc(doc):
            try:
                view.run_sweep()
                view.show_reference()         # as when the MCMC reference arrives
            except BaseException as exc:      # noqa: BLE001 - reported below
                failed.append(exc)
    worker = threading.Thread(target=action)
    worker.start()
    worker.join()
    assert failed == []
    assert worker.ident not in holders
    with set_curdoc(doc):
        _run_event_loop(doc)
    # the energy curve shows the converged energies of an independent sweep
    expected = np.asarray(alpha_sweep(build_problem(settings), settings)["energy"], float)
    curve = view.explorer.plots.src["curve"].data
    np.testing.assert_allclose(curve["energy"], expected[np.isfinite(expected)], rtol=1e-9)


def _sent_defined(page_message: bool) -> bool:
    """A model added to the page under a hold, with or without a message from the page
    applied before the hold ends: whether the patch that then goes out defines it."""
    from bokeh.models import Column, Div
    from bokeh.protocol import Protocol
    doc, layout = Document(), Column()
    doc.add_root(layout)
    doc.to_json()                          # the page as first sent: all models known
    sent = []
    doc.on_change(sent.append)
    doc.hold("combine")
    shown = Div(text="a page shown again")
    layout.children = [shown]
    if page_message:                       # e.g. a click, or the address, from the page
        doc.apply_json_patch({"events": [{"kind": "ModelChanged", "model": {"id": layout.id},
                                          "attr": "name", "new": "clicked"}]})
    doc.unhold()
    content = Protocol().create("PATCH-DOC", sent).content
    defined = [e for e in content["events"] if e.get("attr") == "children"][0]["new"][0]
    assert defined["id"] == shown.id
    return "attributes" in defined or "name" in defined


def test_why_a_hold_must_end_before_the_page_is_heard():
    """Bokeh's side of it: a model added under a hold is sent with its definition,
    unless a message from the page was applied before the hold ended; then it goes out
    as a bare reference, which the page cannot resolve."""
    assert _sent_defined(page_message=False)
    assert not _sent_defined(page_message=True)
