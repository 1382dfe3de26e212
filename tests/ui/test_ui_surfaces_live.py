"""The Surfaces page follows the sidebar while a surface is quick (``ui.live_recompute``),
in-process, with ``bnlab.surface`` replaced by a recorder whose duration the test sets:
one recomputation per change, or per burst of changes, at the last one's settings; none
after a slow surface, nor for the grid's own axes; a computation under way that a
change makes stale is cancelled; the page asks for the batched path on accelerators."""
import threading
import time

import numpy as np
import pytest
import xarray as xr

import bnlab
from bnlab.ui import live_recompute
from bnlab.ui.settings import LabSettings
from bnlab.ui.surfaces import SurfacesView

#: long enough after a change for the quiet period, the timer thread and the recorder
SETTLE_S = live_recompute.DELAY_S + 0.6


def _dataset(cancelled=False):
    v, ls = np.geomspace(0.1, 10, 3), np.geomspace(0.1, 20, 3)
    vals = -np.add.outer(np.log(v) ** 2, np.log(ls) ** 2)[None]
    flags = np.ones(vals.shape, bool)
    return xr.Dataset({"log_marginal_per_n": (("scheme", "variance", "lengthscale"), vals),
                       "log_marginal": (("scheme", "variance", "lengthscale"), 15 * vals),
                       "converged": (("scheme", "variance", "lengthscale"), flags),
                       "diverged": (("scheme", "variance", "lengthscale"), ~flags)},
                      coords={"scheme": ["laplace"], "variance": v, "lengthscale": ls},
                      attrs={"cancelled": int(cancelled)})


class Recorder:
    """``bnlab.surface``'s stand-in: records each call's damping and cancel state;
    ``hold[k]`` (seconds) keeps call k busy that long, returning early, cancelled, if
    its cancel is set meanwhile."""

    def __init__(self, hold=()):
        self.calls, self.hold, self.cancelled = [], dict(hold), []
        self.done = threading.Event()

    def __call__(self, model, X, y, *, cancel, **kw):
        k = len(self.calls)
        self.calls.append(kw)
        end = time.monotonic() + self.hold.get(k, 0.0)
        while time.monotonic() < end and not cancel.is_set():
            time.sleep(0.01)
        stopped = cancel.is_set() and k in self.hold
        self.cancelled.append(stopped)
        self.done.set()
        return _dataset(cancelled=stopped)

    def dampings(self):
        return [kw["damping"] for kw in self.calls]


def _view(monkeypatch, recorder):
    monkeypatch.setattr(bnlab, "surface", recorder)
    s = LabSettings(rho=0.5)
    view = SurfacesView(s, axis0="variance", axis1="lengthscale", points=3)
    view.compute()
    return s, view


def _wait_for(recorder, calls, timeout=10.0, settle=SETTLE_S):
    end = time.monotonic() + timeout
    while len(recorder.cancelled) < calls and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(settle)            # and no further call after it


def test_a_change_after_a_quick_surface_recomputes_once_with_the_batched_path(monkeypatch):
    rec = Recorder()
    s, view = _view(monkeypatch, rec)
    assert rec.calls[0]["batching"] == "auto" and view.live.active
    assert "follow the sidebar" in view.message.object
    s.rho = 0.3
    assert len(rec.calls) == 1                # not at once: after the quiet period
    _wait_for(rec, 2)
    assert rec.dampings() == [0.5, 0.3]
    assert not view.made.changed() and view.dataset is not None


def test_a_burst_of_changes_recomputes_once_at_the_last_settings(monkeypatch):
    rec = Recorder()
    s, view = _view(monkeypatch, rec)
    view.live.delay = 1.0         # changes 0.06 s apart stay a burst on a loaded machine
    for rho in (0.45, 0.4, 0.35, 0.3, 0.25):
        s.rho = rho
        time.sleep(0.06)
    assert len(rec.calls) == 1
    _wait_for(rec, 2, settle=1.5)
    assert rec.dampings() == [0.5, 0.25]


def test_a_slow_surface_waits_for_the_button(monkeypatch):
    rec = Recorder(hold={0: live_recompute.FAST_S + 0.1})
    s, view = _view(monkeypatch, rec)
    assert not view.live.active and "follow the sidebar" not in view.message.object
    s.rho = 0.3
    time.sleep(SETTLE_S)
    assert len(rec.calls) == 1 and view.made.note.visible      # stale, said so
    view.compute()
    assert rec.dampings() == [0.5, 0.3]


def test_a_surface_computed_meanwhile_is_not_computed_again(monkeypatch):
    """A tour's step sets the sidebar and computes the surface itself at once: the
    recomputation that its changes asked for finds the surface up to date."""
    rec = Recorder()
    s, view = _view(monkeypatch, rec)
    s.rho = 0.3
    view.compute()
    time.sleep(SETTLE_S)
    assert rec.dampings() == [0.5, 0.3]


def test_the_grid_s_own_axes_only_move_the_star(monkeypatch):
    rec = Recorder()
    s, view = _view(monkeypatch, rec)
    s.param.update(lengthscale=3.0, variance=2.0)
    time.sleep(SETTLE_S)
    assert len(rec.calls) == 1


def test_a_change_cancels_the_recomputation_under_way(monkeypatch):
    """Call 1 (the first recomputation) would take 5 s; a change during it cancels it,
    and the next recomputation has the latest settings; the page still follows."""
    rec = Recorder(hold={1: 5.0})
    s, view = _view(monkeypatch, rec)
    s.rho = 0.3
    end = time.monotonic() + 5
    while len(rec.calls) < 2 and time.monotonic() < end:      # call 1 under way
        time.sleep(0.01)
    began = time.monotonic()
    s.rho = 0.2
    _wait_for(rec, 3)
    assert rec.dampings() == [0.5, 0.3, 0.2] and rec.cancelled == [False, True, False]
    assert time.monotonic() - began < 4.0 and view.live.active
    assert not view.made.changed()


def test_close_stops_following(monkeypatch):
    rec = Recorder()
    s, view = _view(monkeypatch, rec)
    s.rho = 0.3
    view.close()
    time.sleep(SETTLE_S)
    assert len(rec.calls) == 1


@pytest.mark.parametrize("seconds, cancelled, active", [
    (0.2, False, True), (1.5, False, False), (0.2, True, True), (1.5, True, False)])
def test_a_cancelled_computation_s_time_is_a_lower_bound(seconds, cancelled, active):
    class Made:
        settings, names, free = LabSettings(), ["rho"], set()
    live = live_recompute.LiveRecompute(Made(), lambda: None, threading.Event())
    live.finished(0.1)
    live.finished(seconds, cancelled)
    assert live.active is active
