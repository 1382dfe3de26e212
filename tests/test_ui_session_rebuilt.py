"""A page that connects after the server has discarded its session: Bokeh builds the
session again in the WebSocket's handler, and the page must work as any other. It
happens to a page slower than ``BNLAB_PAGE_PATIENCE_S`` (0 here: Bokeh's own
unused-session lifetime, 5 s here, applies from the build) or beyond the sessions the
server keeps waiting (``app.MOST_SESSIONS_WAITING``). The server sends resources as a
deployment may (``BOKEH_RESOURCES=cdn``): a session built so had every stylesheet on
cdn.holoviz.org, and offline its page was left unstyled."""
import pytest

from test_ui_offline import _foreign, visit_late

pytestmark = pytest.mark.ui

LAB_SERVER_ARGS = ("--unused-session-lifetime", "5000", "--check-unused-sessions", "1000")
LAB_SERVER_ENV = {"BOKEH_RESOURCES": "cdn", "BNLAB_PAGE_PATIENCE_S": "0"}


def test_a_page_whose_session_was_discarded_gets_a_new_one_that_works(lab_browser, lab_url,
                                                                        lab_server_log):
    built, requests, errors = visit_late(lab_browser, lab_url, lab_server_log)
    assert built == 2 and errors == []
    assert len(requests) > 10 and _foreign(requests, lab_url) == []
