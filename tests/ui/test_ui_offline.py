"""The lab in a classroom without internet: a page load, a step and a visit to every
page make no request outside the lab server's origin. The server runs with
``BOKEH_RESOURCES=cdn`` (a deployment default that sends the page to cdn.bokeh.org and
cdn.holoviz.org): the lab must serve its own resources even then."""
from urllib.parse import urlsplit

import pytest

from test_ui_browser import _tab

pytestmark = pytest.mark.ui

SESSION_OPENED = "bnlab session opened"      # logged by bnlab.ui.server per session built

#: Bokeh discards a session no page is connected to 5 s after its build or its page's
#: disconnection (by default 15 s), and builds it again if its page connects later
LAB_SERVER_ARGS = ("--unused-session-lifetime", "5000", "--check-unused-sessions", "1000")
LAB_SERVER_ENV = {"BOKEH_RESOURCES": "cdn"}


def _foreign(urls, lab_url):
    """The URLs that would leave the lab server (data: and blob: stay in the page)."""
    origin = urlsplit(lab_url)
    return [u for u in urls if urlsplit(u).scheme not in ("data", "blob") and
            (urlsplit(u).hostname, urlsplit(u).port) != (origin.hostname, origin.port)]


def test_page_requests_stay_on_the_server_origin(lab_browser, lab_url):
    ctx = lab_browser.new_context(viewport={"width": 1500, "height": 1300})
    page = ctx.new_page()
    requests, sockets = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(lab_url, wait_until="networkidle")
    assert _foreign(requests, lab_url) == []              # else the page stays blank offline
    page.wait_for_selector(".bn-status b", timeout=90_000)
    page.get_by_role("button", name="Step", exact=True).click()
    for tab in ("Compare", "Surfaces", "About"):
        _tab(page, tab)
        page.wait_for_load_state("networkidle")
    # a setting changed while the Live page is not shown rebuilds its run, and its panes
    # update models that are out of the page (the tabs are dynamic): Panel then moved
    # its shared loading.css, and with it every component's, to cdn.holoviz.org
    page.locator(".ctl-lengthscale input").first.fill("2")
    page.locator(".ctl-lengthscale input").first.press("Enter")
    page.wait_for_timeout(3000)
    _tab(page, "Live")
    page.wait_for_load_state("networkidle")
    page.locator(".ctl-dataset select").select_option(label="My CSV file (upload)")
    page.wait_for_selector("input[type=file]", state="attached", timeout=30_000)
    page.wait_for_load_state("networkidle")
    ctx.close()
    assert len(requests) > 10 and sockets                 # the page and its scripts loaded
    assert _foreign(requests + sockets, lab_url) == []
    assert [u for u in requests if "mathjax" in u.lower()] == []   # 1.8 MB the lab needs not


def visit_late(lab_browser, lab_url, lab_server_log) -> tuple:
    """Open the lab with its ``bokeh.min.js`` held back 8 s (longer than the servers'
    5 s unused-session lifetime), step once, close: (sessions the server built for it,
    the page's requests, its JavaScript errors)."""
    import time

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
    return lab_server_log.read_text().count(SESSION_OPENED) - built_before, requests, errors


def test_a_page_that_connects_late_keeps_its_session_and_its_styles(lab_browser, lab_url,
                                                                     lab_server_log):
    """A page whose scripts arrive after the unused-session lifetime (a class arriving at
    once on a small server) keeps the session built for it
    (``server._keep_session_until_its_page_loads``): the server builds one session for it,
    not a second one when it connects, and offline its page is complete
    (``test_ui_session_rebuilt`` covers a page whose session was built again)."""
    built, requests, errors = visit_late(lab_browser, lab_url, lab_server_log)
    assert built == 1 and errors == []
    assert len(requests) > 10 and _foreign(requests, lab_url) == []


def test_the_lab_shows_no_emoji_a_classroom_machine_may_have_no_font_for():
    """A character outside Unicode's basic plane (an emoji) is drawn as an empty box
    where no emoji font is installed, as in Debian's chromium here; the lab's arrows and
    symbols (▶ ↺ ⤓ ↪) are in DejaVu and in the systems' own fonts."""
    from pathlib import Path

    import bnlab.ui
    ui = Path(bnlab.ui.__file__).parent
    found = [(path.name, number, char) for path in sorted(ui.glob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for char in line if ord(char) > 0xFFFF]
    assert found == []


def test_mathjax_is_sent_only_with_tex_and_the_lab_writes_none():
    """Panel's MathJax bundle goes with a page only when one of its HTML or Markdown
    panes holds TeX, and no text the lab shows (its panes on every page, the About page,
    the tours' narrations) holds any, so leaving the bundle out loses nothing."""
    import panel as pn
    from bokeh.embed.util import contains_tex_string
    from bokeh.resources import Resources
    from panel.io.resources import bundle_resources

    from bnlab.ui import tours
    from bnlab.ui.app import Lab
    from bnlab.ui.server import send_mathjax_only_for_tex

    send_mathjax_only_for_tex()

    def sends_mathjax(text):
        roots = [pn.pane.Markdown(text).get_root()]
        bundle = bundle_resources(roots, Resources(mode="server"))
        return any("mathjax" in str(getattr(f, "url", f)) for f in bundle.js_files)

    assert sends_mathjax("the evidence $$\\log p(y)$$") and not sends_mathjax("log p(y) ≤ 0")
    lab = Lab()
    texts = [pane.object for pane in pn.Row(lab.controls, lab.tabs, lab.tour.layout).select(
        pn.pane.HTML) + pn.Row(lab.controls, lab.tabs).select(pn.pane.Markdown)
             if isinstance(pane.object, str)]
    texts += [step.text for tour in tours.TOURS.values() for step in tour.steps]
    assert len(texts) > 20
    assert [t[:60] for t in texts if contains_tex_string(t) or "$" in t] == []
