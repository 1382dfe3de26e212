"""Recompute a result as the sidebar changes, while computing it is quick.

A surface that took under a second (on a GPU server, ``bnlab.surface``'s batched path)
can follow the sidebar: a student drags a setting and watches the surfaces move. Each
change starts a quiet period (``DELAY_S``); the computation runs once, at its end, so a
slider dragged through twenty values computes once, with the last. A computation
under way when a change arrives is cancelled (its result would already be stale).
A result that took longer is left as it is: its page notes that the sidebar changed
(``provenance.ComputedWith``) and waits for the button.
"""
from __future__ import annotations

import threading

import panel as pn
from panel.io.state import set_curdoc

__all__ = ["LiveRecompute", "FAST_S", "DELAY_S"]

#: a result computed faster than this (seconds) is recomputed as the sidebar changes
FAST_S = 1.0
#: the quiet period after the last change before recomputing (seconds)
DELAY_S = 0.3


class LiveRecompute:
    """Watches ``made``'s settings (``ComputedWith``: those the result depends on);
    after a change of one the result depends on (not one of ``made.free``, such as a
    surface's own axes), while the last finished computation took under ``fast``
    seconds (``finished``), it sets ``cancel`` (stopping a computation under way) and
    calls ``compute`` on a worker thread ``delay`` seconds after the last such change,
    with the session's document current (Panel sends its changes to that session)."""

    def __init__(self, made, compute, cancel: threading.Event, fast=FAST_S, delay=DELAY_S):
        self.made, self._compute, self._cancel = made, compute, cancel
        self.fast, self.delay = float(fast), float(delay)
        self.seconds: float | None = None     # the last finished computation's time
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        made.settings.param.watch(self._changed, made.names)

    @property
    def active(self) -> bool:
        """Whether a change now recomputes: the last result took under ``fast``."""
        return self.seconds is not None and self.seconds < self.fast

    def finished(self, seconds: float, cancelled: bool = False):
        """A computation ended after ``seconds``. A cancelled one's time is a lower bound
        of its own: it turns live recomputing off only if already ``fast`` or more (a
        recomputation that a change cancelled leaves the page following the sidebar)."""
        if not cancelled or seconds >= self.fast:
            self.seconds = float(seconds)

    def stop(self):
        """No more recomputations (the session closed)."""
        self.seconds = None
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _changed(self, *events):
        if not self.active or all(e.name in self.made.free for e in events):
            return
        self._cancel.set()
        doc = pn.state.curdoc
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.delay, self._run, args=(doc,))
            self._timer.daemon = True
            self._timer.start()

    def _run(self, doc):
        with self._lock:
            if self._timer is None or threading.current_thread() is not self._timer:
                return                        # replaced by a later change
            self._timer = None
        with set_curdoc(doc):
            self._compute()
