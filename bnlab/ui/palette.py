"""The colours that follow the page's theme. The lab has a light and a dark theme (the
header's switch reloads the page with ``?theme=dark``: a new session, whose Panel
config says which). What is drawn in the theme's own ink (the MCMC reference, the
energy trace, the data points, labels on a plot, coloured text) must show on both:
in black it vanished on the dark theme's background. A session reads its palette once,
while its page is built (``current``); the plots it makes later are given it."""
from __future__ import annotations

from dataclasses import dataclass

import panel as pn


@dataclass(frozen=True)
class Palette:
    ink: str          # the reference (MCMC), neutral traces, labels on a plot
    data: str         # data points
    text_css: str     # the classes of ``bnlab.ui.markup``'s snippets


LIGHT = Palette(ink="black", data="#555555", text_css="""
.bn-error { color: #b00020; font-weight: 600; }
.bn-bad { color: #b00020; }
.bn-good { color: #2e7d32; }
.bn-warn { color: #9a5b00; }
.bn-reason { color: #6b6b6b; font-style: italic; }
.bn-caption { color: #444; }
""")

DARK = Palette(ink="#f0f0f0", data="#b4b4b4", text_css="""
.bn-error { color: #ff7070; font-weight: 600; }
.bn-bad { color: #ff7070; }
.bn-good { color: #7bd17f; }
.bn-warn { color: #ffb74d; }
.bn-reason { color: #a8a8a8; font-style: italic; }
.bn-caption { color: #c8c8c8; }
""")


def current() -> Palette:
    """The palette of the session being built (Panel's per-session ``config.theme``)."""
    return DARK if pn.config.theme == "dark" else LIGHT
