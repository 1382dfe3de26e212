"""The α explorer in a real browser (Playwright + Debian chromium): after one sweep, ▶
plays α over the whole grid, frame after frame, and ends with the filled band on EP's
outline; the slider's handle scrubs back by keyboard."""
import pytest

from test_ui_browser import _open, _tab, _wait_method

pytestmark = pytest.mark.ui

#: the page's α sources (``AlphaPlots.src``, named ``bn-alpha-<key>``), and every title
#: of the band plot as the browser applies it, with its time
_WATCH = """() => { const doc = Bokeh.documents[0];
  window.bnSource = (key) => doc.get_model_by_name('bn-alpha-' + key).data;
  window.bnTitles = [];
  doc.on_change((e) => { if (e.attr === 'text' && String(e.value).startsWith('Posterior at α'))
                           window.bnTitles.push([performance.now(), e.value]); }); }"""


def _arrays(page, key):
    return page.evaluate(f"""() => {{ const d = bnSource('{key}');
        return [Array.from(d.lower), Array.from(d.upper)]; }}""")


def test_play_walks_the_grid_to_ep_and_the_slider_scrubs_back(lab_browser, lab_url, shots):
    from bnlab.ui.alpha_sweep import ALPHAS
    ctx, page = _open(lab_browser, lab_url)
    _wait_method(page, "vi")                      # the default page's run is there
    _tab(page, "Compare")
    page.evaluate(_WATCH)
    page.get_by_role("button", name="Sweep α from 0 to 1").click()
    page.wait_for_function("() => bnSource('alpha').x.length > 0", timeout=480_000)
    at_half, ep = _arrays(page, "alpha"), _arrays(page, "ep")
    assert at_half != ep                          # α = 0.5 is not EP's band
    page.evaluate("bnTitles.length = 0")          # the sweep's own title is not a frame
    page.get_by_role("button", name="▶ Play α from VI to EP").click()
    page.wait_for_function("() => bnTitles.length && bnTitles[bnTitles.length - 1][1]"
                           ".includes('α = 1 ')", timeout=60_000)
    titles = page.evaluate("bnTitles")
    print("frames (ms, title):", [(round(t), title) for t, title in titles])
    shown = [float(t.split("α = ")[1].split(" ")[0]) for _, t in titles]
    assert shown[0] == ALPHAS[0] and shown[-1] == 1.0
    assert shown == sorted(shown) and len(set(shown)) >= len(ALPHAS) - 2    # frame by frame
    assert _arrays(page, "alpha") == ep           # ended on EP's band
    page.get_by_role("button", name="▶ Play α from VI to EP").wait_for(timeout=10_000)
    page.locator(".noUi-handle").last.press("ArrowLeft")
    page.wait_for_function("() => bnTitles[bnTitles.length - 1][1].includes('α = 0.71 ')",
                           timeout=30_000)
    page.screenshot(path=str(shots / "ui-alpha-scrub.png"), full_page=True)
    assert page.console_errors == []
    ctx.close()
