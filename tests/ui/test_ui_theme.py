"""The dark theme (the header's switch: ``?theme=dark``) shows what the light one does:
the MCMC reference, the energy trace, the data points and the coloured status text are
drawn in the theme's palette, and each colour stands out from the theme's own
background by WCAG 2's contrast ratio (3:1 for marks on a plot, 4.5:1 for text). In
black, the MCMC band and the energy trace vanished on the dark background."""
import re

import panel as pn
import pytest
from panel.theme.fast import Fast

from bnlab.ui import markup, palette
from bnlab.ui.live_plots import LivePlots


def _luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a #rrggbb colour (or 'black')."""
    colour = {"black": "#000000"}.get(colour, colour)
    rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _expand(colour: str) -> str:
    return "#" + "".join(2 * c for c in colour[1:]) if len(colour) == 4 else colour


@pytest.mark.parametrize("theme", ["default", "dark"])
def test_what_the_lab_draws_in_its_themes_ink_stands_out_in_that_theme(theme):
    with pn.config.set(theme=theme):
        colours = palette.current()
        plots = LivePlots()
        plots.build_rest()
        pane = markup.html_pane("")
    assert colours is (palette.DARK if theme == "dark" else palette.LIGHT)
    figure = Fast._themes[theme]().bokeh_theme._json["attrs"]["figure"]
    plot_bg, card_bg = figure["background_fill_color"], figure["border_fill_color"]
    assert _contrast(colours.ink, plot_bg) >= 4.5 and _contrast(colours.data, plot_bg) >= 3
    mcmc = {r.glyph.line_color for r in plots.band.renderers
            if r.data_source is plots.src["mcmc"]}
    energy = {r.glyph.line_color for r in plots.energy.renderers if r.visible}  # not its frame
    data = {r.glyph.fill_color for r in plots.band.renderers if r.data_source is plots.src["data"]}
    assert mcmc == energy == {colours.ink} and data == {colours.data}
    assert pane.stylesheets == [colours.text_css]
    text = [_expand(c) for c in re.findall(r"color: (#[0-9a-fA-F]+);", colours.text_css)]
    assert len(text) == 6
    assert all(_contrast(c, card_bg) >= 4.5 for c in text), \
        {c: round(_contrast(c, card_bg), 2) for c in text}
