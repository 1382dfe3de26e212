"""A page that connects after the server has discarded its session: Bokeh builds the
session again in the WebSocket's handler, and the page must work as any other. It
happens to a page slower than ``BNLAB_PAGE_PATIENCE_S`` (0 here: Bokeh's own
unused-session lifetime, 5 s here, applies from the build) or beyond the sessions the
server keeps waiting (``server.MOST_SESSIONS_WAITING``). The server sends resources as a
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


def test_a_websocket_closing_after_its_session_was_discarded_only_releases_it():
    """A page's WebSocket that closes after Bokeh discarded its session (a tab closed
    while loading) made Bokeh's ``on_close`` raise an ``AssertionError`` that Tornado
    logged as an uncaught exception; the lab's server releases the connection only."""
    from types import SimpleNamespace

    from bokeh.server.connection import ServerConnection
    from bokeh.server.views.ws import WSHandler

    from bnlab.ui import server
    session = SimpleNamespace(subscribe=lambda c: None, unsubscribe=lambda c: None)
    lost = []

    def handler():
        connection = ServerConnection(None, None, None, session)
        connection.detach_session()                 # what discarding the session does
        return SimpleNamespace(connection=connection, close_code=None, close_reason=None,
                               application=SimpleNamespace(client_lost=lost.append))

    original = WSHandler.on_close
    try:
        if not getattr(original, "tolerates_gone_sessions", False):
            with pytest.raises(AssertionError):
                original(handler())
        server._close_pages_whose_session_is_gone()
        gone = handler()
        WSHandler.on_close(gone)
        assert lost == [gone.connection]
    finally:
        WSHandler.on_close = original
