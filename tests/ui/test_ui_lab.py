"""The whole lab object outside a server: what a Jupyter cell gets from
``bnlab.ui.Lab()``, and what closing a session releases."""
import gc
import io
import weakref

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

import bnlab.ui
from bnlab.ui import server


def test_lab_builds_its_first_run_and_renders_inline_like_a_notebook_cell():
    """Outside a server there is no page load to wait for: the first run is built at
    once, and the lab renders to one Bokeh root, as Jupyter displays a Viewer."""
    pn.extension()
    lab = bnlab.ui.Lab()
    assert isinstance(lab, pn.viewable.Viewer)
    assert lab.live.runner is not None and not lab.live.layout.loading
    band = lab.live.plots.src["f1"].data
    assert len(band["mean"]) > 0 and np.all(np.isfinite(band["mean"]))
    root = pn.panel(lab).get_root(Document())
    assert root is not None and len(list(root.references())) > 100
    bundle = lab._repr_mimebundle_()
    assert bundle and any("html" in kind or "json" in kind for kind in bundle[0])


def test_close_releases_the_session_run():
    lab = bnlab.ui.Lab()
    lab.live.step(2)
    lab.close()
    assert lab.live.runner is None and lab.live.problem is None and lab.live.closed
    lab.live.step(1)                     # a late click or tick after closing does nothing
    lab.live.model.tick()
    assert lab.live.runner is None


def test_closing_a_session_leaves_other_threads_building_tuples_alone():
    """Another session's thread keeps building tuples (JAX's tracing does, all the time)
    while sessions close. The close log used to count ``len(gc.get_objects())``, whose
    list holds a tuple still being built by ``tuple(generator)``; CPython then raised
    "SystemError: … tupleobject.c: bad argument to internal function" in the builder
    (under load, a page's first run failed so, and the page stayed blank). The thread
    switch interval is made tiny so that any such window is hit."""
    import sys
    import threading
    stop, errors, built = threading.Event(), [], [0]

    def build():
        while not stop.is_set():
            try:
                tuple(x for x in range(200))
                built[0] += 1
            except SystemError as exc:
                errors.append(str(exc))
    interval = sys.getswitchinterval()
    labs = [bnlab.ui.Lab() for _ in range(4)]
    worker = threading.Thread(target=build, daemon=True)
    sys.setswitchinterval(1e-6)
    try:
        worker.start()
        for lab in labs:
            server.close_session(lab, None)
    finally:
        stop.set()
        worker.join(10)
        sys.setswitchinterval(interval)
    assert built[0] > 0 and errors == []


def test_the_server_freezes_its_lasting_objects_only_when_no_session_is_open(monkeypatch):
    """A frozen cycle is never collected, so the server's ``gc.freeze`` waits until every
    lab has been closed; a session opened after it is still collected whole."""
    monkeypatch.setattr(server, "_lasting_objects_frozen", False)
    monkeypatch.setattr(server.Lab, "_alive", weakref.WeakSet())    # this test's labs only
    frozen_before = gc.get_freeze_count()     # a library may have frozen some already
    try:
        first = bnlab.ui.Lab()
        server._freeze_lasting_objects()
        assert not server._lasting_objects_frozen and gc.get_freeze_count() == frozen_before
        first.close()
        server._freeze_lasting_objects()
        assert server._lasting_objects_frozen and gc.get_freeze_count() > frozen_before
        later = bnlab.ui.Lab()
        later.close()
        gone = weakref.ref(later)
        del later
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()


def test_a_session_waits_for_its_page_a_bounded_time(monkeypatch):
    """A session being built is kept from Bokeh's unused-session discarding once it
    exists (its page may connect late: a class arriving at once), and let go after the
    patience if its page never loads, so a page fetched and abandoned is not kept for
    the server's life, or at once when its page has loaded (then its tab's closing
    releases it); beyond ``MOST_SESSIONS_WAITING`` sessions waiting, none more is
    kept."""
    import asyncio
    from types import SimpleNamespace

    from bokeh.server.session import ServerSession
    from panel.io.state import set_curdoc
    from tornado.ioloop import IOLoop

    async def kept_then_and_later(page_loads=False):
        doc = Document()
        context = SimpleNamespace(_session=None)   # Bokeh's, while the page is built
        doc._session_context = lambda: context
        with set_curdoc(doc):
            server._keep_session_until_its_page_loads(patience_s=0.5)
        context._session = ServerSession("s", doc, io_loop=IOLoop.current())
        await asyncio.sleep(0.2)
        kept = context._session.expiration_blocked
        if page_loads:                 # the page's document_ready, as Panel handles it
            with set_curdoc(doc):
                pn.state._on_load(doc)
            await asyncio.sleep(0.1)
            return kept, context._session.expiration_blocked
        await asyncio.sleep(0.6)
        return kept, context._session.expiration_blocked

    assert asyncio.run(kept_then_and_later()) == (True, False)
    assert asyncio.run(kept_then_and_later(page_loads=True)) == (True, False)
    assert server._sessions_waiting == set()
    monkeypatch.setattr(server, "MOST_SESSIONS_WAITING", 0)
    assert asyncio.run(kept_then_and_later()) == (False, False)


@pytest.mark.parametrize("text", ["soon", "-1", "nan", "inf", ""])
def test_a_page_patience_that_is_not_seconds_is_refused_by_name(monkeypatch, text):
    monkeypatch.setenv("BNLAB_PAGE_PATIENCE_S", text)
    with pytest.raises(ValueError, match=f"BNLAB_PAGE_PATIENCE_S .* not '{text}'"):
        server._page_patience_s()
    monkeypatch.setenv("BNLAB_PAGE_PATIENCE_S", "42.5")
    assert server._page_patience_s() == 42.5


def test_csv_exports_hold_the_plotted_numbers():
    import csv
    lab = bnlab.ui.Lab()
    lab.live.step(4)
    runner = lab.live.runner
    rows = list(csv.DictReader(lab.exports._trace()))
    assert [int(r["iteration"]) for r in rows] == list(range(5))
    np.testing.assert_array_equal([float(r["energy"]) for r in rows], runner.energy)
    np.testing.assert_array_equal([float(r["step_size"]) for r in rows], runner.step_sizes)
    assert [r["posterior_psd"] for r in rows] == ["1"] * 5
    shown = lab.live.plots.src["f1"].data
    band = list(csv.DictReader(lab.exports._band()))
    for col in ("mean", "lower", "upper"):
        np.testing.assert_array_equal([float(r[f"f1_{col}"]) for r in band], shown[col])
    np.testing.assert_array_equal([float(r["x"]) for r in band], shown["x"])
    prob = [float(r["predictive_probability_mean"]) for r in band]
    np.testing.assert_array_equal(prob, lab.live.plots.src["pred"].data["mean"])
    assert all(0 <= p <= 1 for p in prob)
    # the MCMC reference's CSV is offered while the page shows the reference
    assert not lab.exports.mcmc_download.visible
    lab.live.mcmc.compute(lab.live.problem, num_temps=30, num_chains=16)
    lab.live.push()
    assert lab.exports.mcmc_download.visible
    text = lab.exports._mcmc().getvalue()
    ref = lab.live.mcmc
    shown = lab.live.plots.src["mcmc"].data
    table = np.genfromtxt(io.StringIO(text), delimiter=",", names=True)
    for col in ("x", "mean", "lower", "upper"):
        np.testing.assert_array_equal(table[col], shown[col])
    for col, value in (("log_p_y_lower", ref.log_z), ("log_p_y_lower_se", ref.log_z_se),
                       ("log_p_y_upper", ref.log_z_upper),
                       ("log_p_y_upper_se", ref.log_z_upper_se),
                       ("interval_lower", ref.interval[0]), ("interval_upper", ref.interval[1]),
                       ("resolved", float(ref.converged)), ("ess", ref.ess),
                       ("chains", 16), ("temperatures", 30)):
        np.testing.assert_array_equal(table[col], value)
    lab.settings.lengthscale = 2.0            # another posterior: the reference is dropped
    assert not lab.exports.mcmc_download.visible
