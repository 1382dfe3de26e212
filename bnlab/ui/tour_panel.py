"""The narration above the lab's pages while a guided tour (``tours``) is open: Back /
Next / Exit / Replay, the title, step k of n and the step's text; a step sets the
sidebar, the page's own controls (``_set_page``) and performs its actions."""
from __future__ import annotations

import html
import threading
from typing import Mapping
from urllib.parse import parse_qsl

import panel as pn

from . import markup
from .layout import controls_row
from .tours import ACTIONS, TABS, TOURS, Tour

#: the tour panel's class while no tour is open: the page's stylesheet hides the
#: template card around it (``assets/lab.css``), which ``visible`` alone left empty
CLOSED_CLASS = "bn-tour-closed"


class TourPanel(pn.viewable.Viewer):
    """The narration above the pages: Back / Next / Exit / Replay, then the title, step k
    of n and the step's text. Hidden while no tour is open.

    A state machine that no click can race. A click only names the step wanted (Next
    and Back count from the last step asked for, not the one on screen) and returns;
    one thread at a time shows steps, the first click's, which moves on to the newest
    step asked for when the step it shows is done. A step's actions stop at the next
    chance once another step is asked for (between actions, and between a run's
    iterations), so the step shown last is always the one asked for last, with all of
    its actions done, and meanwhile the heading says that work is under way and which
    step comes next."""

    def __init__(self, lab, perform_actions: bool = True, **params):
        super().__init__(**params)
        self.lab, self.perform_actions = lab, perform_actions
        self.tour: Tour | None = None
        self.index = 0                   # the step on screen (or being shown)
        self._state = threading.Lock()   # guards the four below; held for moments only
        self._wanted, self._apply = 0, True
        self._asked = 0                  # requests so far: a step's actions stop when it grows
        self._showing = False            # a thread is showing steps
        self.heading = markup.html_pane("", css_classes=["bn-tour-heading"], margin=(0, 10))
        self.text = pn.pane.Markdown("", css_classes=["bn-tour-text"],
                                     sizing_mode="stretch_width", margin=(0, 10))
        self.back = pn.widgets.Button(label="◀ Back", width=100)
        self.next = pn.widgets.Button(label="Next ▶", color="primary", width=100)
        self.replay = pn.widgets.Button(label="⟲ Replay the iterations", width=190,
                                        visible=False)
        self.exit = pn.widgets.Button(label="Exit tour", width=100)
        self.back.on_click(lambda e: self.move(-1))
        self.next.on_click(lambda e: self.move(+1))
        self.replay.on_click(lambda e: self.lab.live.replay())
        self.exit.on_click(lambda e: self.close())
        # the buttons first, Replay (shown on steps with a run) last: a heading or a
        # step's text of another length (a narrow column wraps them), or a step without
        # a run, never moves a button under the pointer of someone clicking on
        self.layout = pn.Column(controls_row(self.back, self.next, self.exit, self.replay),
                                self.heading, self.text,
                                css_classes=["bn-tour", CLOSED_CLASS], visible=False,
                                sizing_mode="stretch_width")

    def __panel__(self):
        return self.layout

    def open(self, key: str, step: int = 0, keep_settings: bool = False):
        """Start tour ``key`` at step ``step`` (0-based, clamped to the tour), with that
        step's settings unless ``keep_settings`` (ValueError naming the tours if
        unknown)."""
        if key not in TOURS:
            raise ValueError(f"no tour {key!r}; the tours are {', '.join(TOURS)}")
        self.tour = TOURS[key]
        self._set_shown(True)
        self.go(step, apply_settings=not keep_settings)

    def open_from_url(self, keep_settings: bool = False) -> bool:
        """Open the tour named by ``?tour=`` at ``&step=`` (1-based; the first if absent).
        ``keep_settings``: the link also named settings, so it is a copied address and
        shows the state it was copied in, the user's changes since the step included
        (the lab has applied them already); a bare ``?tour=`` link applies the step's
        own. An unknown tour, or a step the tour lacks, is named in the panel."""
        loc = pn.state.location
        query = dict(parse_qsl((loc.search or "").lstrip("?"))) if loc is not None else {}
        key = query.get("tour", "")
        if not key:
            return False
        asked = query.get("step", "1")
        step = int(asked) - 1 if asked.isdigit() else 0
        try:
            self.open(key, step, keep_settings=keep_settings)
        except ValueError as exc:
            self._set_shown(True)
            self.heading.object = markup.error(exc)
            self.text.object = ""
            self.back.visible = self.next.visible = False
            return False
        if not (asked.isdigit() and step == self.index):
            self.heading.object += " · " + markup.warning(
                f"the link asked for step “{asked[:20]}”; this tour has steps 1 to "
                f"{len(self.tour.steps)}")
        return True

    def close(self):
        """Exit: hide the panel (and its card) and take the tour out of the address, so
        a reload or a copied link keeps the user's settings instead of reopening it. A
        step under way stops at its next chance."""
        with self._state:
            self.tour = None
            self._asked += 1
        self._set_shown(False)
        self._write_address()

    def _set_shown(self, shown: bool):
        self.layout.visible = shown
        self.layout.css_classes = ["bn-tour"] if shown else ["bn-tour", CLOSED_CLASS]

    def query(self) -> list:
        """The tour's part of the page's address: ``tour`` and the 1-based ``step``."""
        tour, index = self.tour, self.index     # read once: Exit may run beside this
        return [] if tour is None else [("tour", tour.key), ("step", index + 1)]

    def _write_address(self):
        if self.lab.address is not None:
            self.lab.address.write()

    def move(self, delta: int):
        """Back (−1) or Next (+1), counted from the step asked for last: three quick
        clicks on Next go three steps on, whatever is still being shown. The count is
        read and written under one lock: Panel hands clicks to several threads, and two
        clicks that each read the step before the other wrote it would count once."""
        self._ask(lambda wanted: wanted + delta, apply_settings=True)

    def go(self, k: int, apply_settings: bool = True):
        """Ask for step ``k`` (clamped to the tour): its settings (unless not
        ``apply_settings``), its page controls and page, then its actions; the address
        names the tour and step. Shown on this thread unless another is showing steps
        already; that one moves on to ``k`` as soon as it can (see the class doc)."""
        self._ask(lambda wanted: k, apply_settings)

    def _ask(self, target, apply_settings: bool):
        """Ask for step ``target(step asked for last)``, then show steps on this thread
        until the newest asked for is shown, unless another thread does so already."""
        with self._state:
            if self.tour is None:
                return
            n = len(self.tour.steps)
            self._wanted = wanted = min(max(int(target(self._wanted)), 0), n - 1)
            self._apply, self._asked = apply_settings, self._asked + 1
            self.back.disabled, self.next.disabled = wanted == 0, wanted == n - 1
            if self._showing:
                queued = self._wanted
            else:
                self._showing, queued = True, None
        if queued is not None:
            self._say_working(then=queued)
            return
        try:
            while True:
                with self._state:
                    k, apply, asked = self._wanted, self._apply, self._asked
                self._show(k, apply, cancelled=lambda: self._asked != asked)
                with self._state:
                    if self._asked == asked or self.tour is None:
                        self._showing = False
                        return
        except BaseException:
            with self._state:
                self._showing = False
            raise

    def _heading(self, k: int) -> str:
        return (f"<b>Tour: {html.escape(self.tour.title)}</b> · "
                f"step <b class='bn-tour-step'>{k + 1}</b> of {len(self.tour.steps)}")

    def _say_working(self, k: int | None = None, then: int | None = None):
        tour = self.tour
        if tour is None:
            return
        shown = self.index if k is None else k
        later = "" if then is None or then == shown else f" (then step {then + 1})"
        self.heading.object = (self._heading(shown) +
                               f" · <i class='bn-tour-busy'>working …{later}</i>")

    def _show(self, k: int, apply_settings: bool, cancelled):
        tour = self.tour
        if tour is None:
            return
        self.index, step = k, tour.steps[k]
        if apply_settings:
            self.lab.settings.param.update(**tour.settings(k))
        self._write_address()
        if step.page:
            _set_page(getattr(self.lab, step.tab.lower()), step.page)
        # sent even when unchanged: a page switched twice within one round trip (Compare,
        # then Live) can be left showing the first while the server holds the second
        self.lab.tabs.active = TABS.index(step.tab)
        self.lab.tabs.param.trigger("active")
        self.text.object = step.text
        self.back.visible = self.next.visible = True
        self.replay.visible = "run" in step.actions
        if self.perform_actions and step.actions:
            self._say_working(k)
            try:
                if self.lab.live.runner is None:
                    self.lab.live.rebuild()
                for action in step.actions:
                    if cancelled():
                        return
                    ACTIONS[action](self.lab, cancelled)
            finally:
                if not cancelled() and self.tour is tour:
                    self.heading.object = self._heading(k)
        else:
            self.heading.object = self._heading(k)


def _set_page(view, values: Mapping):
    """A page's own controls: its parameters, or the ``value`` of its named widgets."""
    params = {k: v for k, v in values.items() if k in view.param}
    view.param.update(**params)
    for name, value in values.items():
        if name not in params:
            getattr(view, name).value = value


def page_values(view, names) -> dict:
    """The current values of a page's controls named as in ``Step.page``."""
    return {n: getattr(view, n) if n in view.param else getattr(view, n).value for n in names}
