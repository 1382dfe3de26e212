"""The few HTML snippets the lab wraps around text. The text is always escaped: error
messages quote user data (CSV column names and cells), and a browser must show them as
text, never run them."""
from __future__ import annotations

from html import escape

import panel as pn
from bokeh.models import Tooltip

from . import palette


def html_pane(text: str = "", **params) -> pn.pane.HTML:
    """An HTML pane for text made with these snippets, with the stylesheet that colours
    them for the page's theme (``palette.current``): Panel draws each pane in a shadow
    root of its own, which the page's stylesheet does not reach."""
    return pn.pane.HTML(text, stylesheets=[palette.current().text_css], **params)


def error(message) -> str:
    """A warning line for an error message (``<span class="bn-error">``)."""
    return f'<span class="bn-error">⚠ {escape(str(message))}</span>'


def warning(message) -> str:
    """A caution that is not an error (``<span class="bn-warn">``)."""
    return f'<span class="bn-warn">⚠ {escape(str(message))}</span>'


def reason(message) -> str:
    """A note on why a control is disabled (``<span class="bn-reason">``)."""
    return f'<span class="bn-reason">{escape(str(message))}</span>'


def caption(message) -> str:
    """What the chosen option is, in full (``<span class="bn-caption">``)."""
    return f'<span class="bn-caption">{escape(str(message))}</span>'


def tooltip_below(text: str) -> Tooltip:
    """A button's hover text, shown under it: Panel places a description's tooltip to the
    right, where it was cut off by the window's edge for the buttons at the right of a
    row (the MCMC reference button at 1400 px)."""
    return Tooltip(content=text, position="bottom_center", attachment="below",
                   stylesheets=[":host { white-space: initial; max-width: 300px; }"])
