"""Rows that fit the window they are shown in. The lab is projected in classrooms, often
at 1024 × 768 with the sidebar open (≈ 600 px for a page): a ``Row`` is as wide as the
sum of its children's widths and Panel's tabs take the shown page's width, so one row of
fixed-width controls pushed the whole page past the window's edge, where it was cut off
(the plots' legends and tools, the iteration cap, the MCMC button)."""
from __future__ import annotations

import panel as pn


def controls_row(*widgets, align_items: str = "flex-end", **params) -> pn.FlexBox:
    """Fixed-width controls side by side, wrapping onto a new line where the window is
    too narrow; by default their boxes and buttons share one baseline. ``params``: the
    FlexBox's other parameters (``visible``, ...)."""
    return pn.FlexBox(*widgets, flex_wrap="wrap", align_items=align_items,
                      sizing_mode="stretch_width", **params)


def bokeh_pane(fig, css_classes=()) -> pn.Column:
    """A Bokeh figure's pane, the window's width, in a Column that carries ``css_classes``
    (for tests and styling)."""
    return pn.Column(pn.pane.Bokeh(fig, sizing_mode="stretch_width"),
                     css_classes=list(css_classes), sizing_mode="stretch_width", margin=0)
