"""A page that connects after the server has discarded its session: Bokeh builds the
session again in the WebSocket's handler, and the page must work as any other. It
happens to a page slower than ``BNLAB_PAGE_PATIENCE_S`` (0 here: Bokeh's own
unused-session lifetime, 5 s here, applies from the build) or beyond the sessions the
server keeps waiting (``app.MOST_SESSIONS_WAITING``). The server sends resources as a
deployment may (``BOKEH_RESOURCES=cdn``): a session built so had every stylesheet on
cdn.holoviz.org, and offline its page was left unstyled."""
import time

import pytest

from test_ui_offline import SESSION_OPENED, _foreign

pytestmark = pytest.mark.ui

LAB_SERVER_ARGS = ("--unused-session-lifetime", "5000", "--check-unused-sessions", "1000")
LAB_SERVER_ENV = {"BOKEH_RESOURCES": "cdn", "BNLAB_PAGE_PATIENCE_S": "0"}


def test_a_page_whose_session_was_discarded_gets_a_new_one_that_works(lab_browser, lab_url,
                                                                        lab_server_log):
    from playwright.sync_api import expect
    built_before = lab_server_log.read_text().count(SESSION_OPENED)
    ctx = lab_browser.new_context(viewport={"width": 1500, "height": 1300})
    page = ctx.new_page()
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.route("**/bokeh.min.js*", lambda route: (time.sleep(8), route.continue_()))
    page.goto(lab_url, timeout=90_000)
    page.wait_for_selector(".bn-status b", timeout=90_000)
    page.get_by_role("button", name="Step", exact=True).click()
    expect(page.locator(".bn-status b").nth(1)).to_have_text("1", timeout=30_000)  # its run
    page.wait_for_load_state("networkidle")
    ctx.close()
    assert lab_server_log.read_text().count(SESSION_OPENED) - built_before == 2
    assert len(requests) > 10 and _foreign(requests, lab_url) == []
    assert errors == []
