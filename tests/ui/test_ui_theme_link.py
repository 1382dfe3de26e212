"""``?theme=`` in a link is checked like every other link parameter: an unknown theme
gives the page in the default theme (Panel's template raised a KeyError and the page
did not load) and is named in the link's notification."""
import panel as pn
import pytest
from panel.io.state import _state
from panel.theme import DarkTheme, DefaultTheme

from bnlab.ui.app import unknown_theme
from bnlab.ui.server import LabTemplate
from bnlab.ui.settings import link_notice


@pytest.fixture
def query(monkeypatch):
    def set_query(**args):
        monkeypatch.setattr(_state, "session_args",
                            property(lambda self: {k: [v.encode()] for k, v in args.items()}))
    return set_query


@pytest.mark.parametrize("asked, theme", [("foo", DefaultTheme), ("<b>x</b>", DefaultTheme),
                                          ("dark", DarkTheme), ("default", DefaultTheme),
                                          ("'dark'", DarkTheme)])
def test_the_page_builds_in_a_known_theme_whatever_the_link_asks(query, asked, theme):
    query(theme=asked)
    page = LabTemplate(title="t", main=[pn.pane.Markdown("x")])
    assert isinstance(page._design.theme, theme)
    assert (theme is DarkTheme) == isinstance(page._design.theme, DarkTheme)


def test_an_unknown_theme_is_named_with_the_links_other_bad_values():
    bad = unknown_theme("?alpha=0.3&theme=foo")
    assert bad == {"theme": ("foo", "is not a theme of the lab (default, dark); the default "
                                    "theme is shown")}
    assert "theme = “foo” is not a theme of the lab" in link_notice(bad)
    assert unknown_theme("?theme=dark&alpha=0.3") == {} and unknown_theme("?alpha=1") == {}
