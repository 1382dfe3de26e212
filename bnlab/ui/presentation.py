"""Presentation mode: the lab on a classroom projector (``?present=1``, or the header's
Present switch). The sidebar starts folded (☰ opens it), a tour's text stands beside
the page it describes instead of above it (on a 1024 × 768 projector the text card
above left only the top ≈ 100 px of the band it described on screen), the text is
larger, and the keyboard drives the lesson: Space runs or pauses the Live page's run
(a finished run it replays from the start), ← and → go back and on through a tour's
steps."""
from __future__ import annotations

import panel as pn
import param

#: the width of a tour's text beside the pages (the pages keep ≈ 700 px of a 1024 px
#: projector with the sidebar folded)
TEXT_WIDTH = 290

#: larger type for a room: Panel's panes inherit the page's font size through their
#: shadow roots; the tour's text larger still
CSS = """
body { font-size: 17px; }
.bn-tour-text { font-size: 19px; line-height: 1.45; }
"""

#: what the keys do: ``Keys.key`` values
KEYS = {" ": "run_pause", "ArrowLeft": "back", "ArrowRight": "next"}


def asked(session_args: dict) -> bool:
    """Whether a page's address asks for presentation mode (``present=1``; Panel's
    ``pn.state.session_args``, values as lists of bytes)."""
    return session_args.get("present", [b""])[-1] == b"1"


class Keys(pn.custom.JSComponent):
    """The page's keyboard shortcuts (``KEYS``), sent to the server as ``key`` and a
    press count (a key pressed twice is two presses). Keys typed into a field are the
    field's; a button that has the focus (the last one clicked) does not also take
    Space as its own click."""

    key = param.String(default="")
    presses = param.Integer(default=0)

    _esm = """
const KEYS = %s
export function render({ model }) {
  const typing = (el) => el && (["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName) ||
                                el.isContentEditable)
  const down = (e) => {
    const target = e.composedPath()[0]
    if (e.ctrlKey || e.altKey || e.metaKey || !(e.key in KEYS) || typing(target)) return
    e.preventDefault()
    if (target && target.tagName === "BUTTON") target.blur()
    model.key = KEYS[e.key]
    model.presses = model.presses + 1
  }
  const up = (e) => { if (e.key === " " && !typing(e.composedPath()[0])) e.preventDefault() }
  document.addEventListener("keydown", down)
  document.addEventListener("keyup", up)
  model.on("remove", () => {
    document.removeEventListener("keydown", down)
    document.removeEventListener("keyup", up)
  })
}
""" % ("{" + ", ".join(f'"{k}": "{v}"' for k, v in KEYS.items()) + "}")

    def __init__(self, lab, **params):
        super().__init__(width=0, height=0, margin=0, **params)
        self.lab = lab
        self.param.watch(self._pressed, "presses")

    def _pressed(self, event):
        live, tour = self.lab.live, self.lab.tour
        if self.key == "run_pause":
            if live.running:
                live.pause()
            elif live.runner is not None and live.runner.stop_reason() is not None:
                live.replay()          # a finished run: its iterations again
            else:
                live.run()
        elif self.key in ("back", "next") and tour.tour is not None:
            tour.move(-1 if self.key == "back" else +1)


def switch(present: bool) -> pn.widgets.Toggle:
    """The header's Present switch: it reloads the page with ``present=1`` added or
    removed (the address also holds the run and the MCMC reference shown, which the
    reloaded page brings back)."""
    toggle = pn.widgets.Toggle(name="Present", value=present, width=90, margin=(12, 8),
                               button_type="light")
    toggle.jscallback(value="""
const url = new URL(window.location.href)
if (cb_obj.value) { url.searchParams.set("present", "1") } else { url.searchParams.delete("present") }
window.location.assign(url.toString())
""")
    return toggle
