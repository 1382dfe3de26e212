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


def test_a_websocket_whose_session_is_gone_is_released_and_its_messages_dropped(caplog):
    """A page's WebSocket that closes after Bokeh let go of its session (a tab closed
    while loading) made Bokeh's ``on_close`` raise an ``AssertionError`` that Tornado
    logged as an uncaught exception, and a message the page had sent meanwhile (a plot's
    new width) was logged as "error handling message" with the same traceback; the
    lab's server releases the connection and drops the message."""
    import asyncio
    import logging
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from bokeh.protocol import Protocol
    from bokeh.server.connection import ServerConnection
    from bokeh.server.protocol_handler import ProtocolHandler
    from bokeh.server.views.ws import WSHandler

    from bnlab.ui import server
    session = SimpleNamespace(subscribe=lambda c: None, unsubscribe=lambda c: None)
    lost = []

    def handler():
        connection = ServerConnection(Protocol(), None, None, session)
        connection.detach_session()                 # the connection let go of
        return SimpleNamespace(connection=connection, close_code=None, close_reason=None,
                               application=SimpleNamespace(client_lost=lost.append),
                               handler=ProtocolHandler())

    request = Protocol().create("PULL-DOC-REQ")     # as a plot's new width, a PATCH-DOC

    def run(coroutine):         # on a thread of its own: Playwright may run a loop here
        with ThreadPoolExecutor(1) as thread:
            return thread.submit(asyncio.run, coroutine).result()

    def errors_logged(call):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            result = call()
        return result, [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]

    original_close, original_handle = WSHandler.on_close, WSHandler._handle
    try:
        if not getattr(original_close, "tolerates_gone_sessions", False):
            with pytest.raises(AssertionError):
                original_close(handler())
            _, errors = errors_logged(lambda: run(original_handle(handler(), request)))
            assert any("error handling message" in e for e in errors)
        server._tolerate_pages_whose_session_is_gone()
        gone = handler()
        WSHandler.on_close(gone)
        assert lost == [gone.connection]
        work, errors = errors_logged(lambda: run(WSHandler._handle(handler(), request)))
        assert work is None and errors == []
        assert "PULL-DOC-REQ from a page whose session is gone was dropped" in caplog.text
    finally:
        WSHandler.on_close, WSHandler._handle = original_close, original_handle
