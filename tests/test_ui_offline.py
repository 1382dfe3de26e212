"""The lab in a classroom without internet: a page load, a step and a visit to every
page make no request outside the lab server's origin. The server runs with
``BOKEH_RESOURCES=cdn`` (a deployment default that sends the page to cdn.bokeh.org and
cdn.holoviz.org): the lab must serve its own resources even then."""
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.ui


@pytest.fixture(scope="module")
def cdn_environment():
    mp = pytest.MonkeyPatch()
    mp.setenv("BOKEH_RESOURCES", "cdn")
    yield
    mp.undo()


@pytest.fixture(scope="module")
def lab_url(cdn_environment, lab_url):
    """conftest's server, started in the environment above (it inherits os.environ)."""
    return lab_url


def test_page_requests_stay_on_the_server_origin(lab_browser, lab_url):
    origin = urlsplit(lab_url)

    def foreign(urls):
        """The URLs that would leave the server (data: and blob: stay in the page)."""
        return [u for u in urls if urlsplit(u).scheme not in ("data", "blob") and
                (urlsplit(u).hostname, urlsplit(u).port) != (origin.hostname, origin.port)]

    ctx = lab_browser.new_context(viewport={"width": 1500, "height": 1300})
    page = ctx.new_page()
    requests, sockets = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(lab_url, wait_until="networkidle")
    assert foreign(requests) == []                        # else the page stays blank offline
    page.wait_for_selector(".bn-status b", timeout=90_000)
    page.get_by_role("button", name="Step", exact=True).click()
    for tab in ("Compare", "Surfaces", "About", "Live"):
        page.locator(".bk-tab", has_text=tab).first.click()
        page.wait_for_load_state("networkidle")
    page.locator(".ctl-dataset select").select_option(label="My CSV file (upload)")
    page.wait_for_selector("input[type=file]", state="attached", timeout=30_000)
    page.wait_for_load_state("networkidle")
    ctx.close()
    assert len(requests) > 10 and sockets                 # the page and its scripts loaded
    assert foreign(requests + sockets) == []
