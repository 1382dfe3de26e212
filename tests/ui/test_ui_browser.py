"""The lab in a real browser (Playwright + Debian chromium); one server per module."""
import json
import time
import warnings
from pathlib import Path

import pytest

expect = pytest.importorskip("playwright.sync_api").expect
PlaywrightTimeout = pytest.importorskip("playwright.sync_api").TimeoutError
SHOTS = Path(__file__).resolve().parents[2] / "test-output"

pytestmark = pytest.mark.ui

LOAD_TIMEOUT = 90_000


def _open(browser, url, viewport=(1500, 1300), **device):
    """A new browser context on ``url`` (``device``: Playwright's context options beyond
    the viewport), once its status line shows; if it never does, the failure says what
    the page showed and logged, with a screenshot beside it."""
    ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, **device)
    page = ctx.new_page()
    page.set_default_navigation_timeout(LOAD_TIMEOUT)      # a first load on a busy machine
    page.console_errors, page.console_log = [], []
    page.on("console", lambda m: page.console_log.append(f"{m.type}: {m.text}"))
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.console_errors.append(str(e)))
    page.frames_received = []            # the server's WebSocket messages to this page
    page.frames_sent = []                # and the page's to the server
    page.on("websocket", lambda ws: (
        ws.on("framereceived", lambda frame: page.frames_received.append(frame)),
        ws.on("framesent", lambda frame: page.frames_sent.append(frame))))
    page.goto(url)
    try:
        page.wait_for_selector(".bn-status b", timeout=LOAD_TIMEOUT)
    except PlaywrightTimeout:
        shot = SHOTS / f"no-status-{time.strftime('%H%M%S')}.png"
        page.screenshot(path=str(shot), full_page=True)
        shown = {"status": page.locator(".bn-status div").all_inner_texts(),
                 "spinners": page.locator(".pn-loading").count(),
                 "layouts": page.locator(".bk-Column, .bk-Row").count()}
        raise AssertionError(f"{url}: no status line within {LOAD_TIMEOUT / 1000:.0f} s; "
                             f"the page shows {shown}; console: {page.console_log[-12:]}; "
                             f"errors: {page.console_errors}; screenshot {shot}") from None
    return ctx, page


def _bold(page):
    """Bold fields of the status line: method, iteration, energy[, state]."""
    return page.locator(".bn-status b").all_text_contents()


def _method(page):
    return (_bold(page) or [""])[0]


def _iteration(page):
    b = _bold(page)
    return int(b[1]) if len(b) > 1 and b[1].isdigit() else -1


def _stopped(page):
    return any(w in _bold(page) for w in ("converged", "diverged"))


#: the states in which a run has stopped, as its status line words them
STOPPED = ("converged", "diverged", "cap reached", "stalled")


def _text(page, css):
    """The text of an HTML pane (it lives in the pane's shadow root, which Playwright's
    locators pierce and the host's innerText does not)."""
    return " ".join(page.locator(f"{css} div").all_inner_texts())


def _wait_stopped(page, timeout_s):
    for _ in range(timeout_s):
        if set(_bold(page)) & set(STOPPED):
            return
        page.wait_for_timeout(1000)
    raise AssertionError(f"the run has not stopped: {_text(page, '.bn-status')}")


def _tab(page, name):
    """Show the page ``name``: click its tab until it is the active one. A click that
    did not switch the tab is retried and reported as a warning, one that switched it
    leaves the wait to the caller. (Under load, about once in a hundred, a page's content
    never came, the tab active in the browser and the server idle: Panel left the Tabs
    patch in its write queue, ``bnlab.ui.queued_writes``.) The
    server's log says "bnlab page shown" for each tab change it received."""
    tab = page.locator(".bk-tab", has_text=name).first
    active = page.locator(".bk-tab.bk-active", has_text=name)
    for attempt in range(3):
        tab.click()
        try:
            active.wait_for(timeout=10_000)
        except PlaywrightTimeout:
            continue
        if attempt:
            warnings.warn(f"the {name} tab took {attempt + 1} clicks to open")
        return
    raise AssertionError(f"the {name} tab did not open in 3 clicks; active: "
                         f"{page.locator('.bk-tab.bk-active').all_inner_texts()}")


def _wait_method(page, name, timeout_s=120):
    for _ in range(int(timeout_s * 2)):
        if _method(page) == name:
            return
        page.wait_for_timeout(500)
    raise AssertionError(f"status still shows method {_method(page)!r}, expected {name!r}")


def _wait_for_iteration(page, k):
    for _ in range(60):
        if _iteration(page) == k:
            return
        page.wait_for_timeout(500)
    assert _iteration(page) == k


def _choose(page, control, label):
    page.locator(f".ctl-{control} select").select_option(label=label)


def test_default_page_loads_without_console_errors_or_warnings(lab_browser, lab_url, shots):
    """No warning either: Bokeh warned "could not set initial ranges" at each render of a
    figure with no data yet (the band before its first run, the distance plot before a
    second iteration, the two-point plot before a pick), 17 times on this page."""
    ctx, page = _open(lab_browser, lab_url)
    assert _method(page) == "vi" and _iteration(page) == 0
    page.wait_for_selector(".bn-band canvas", state="attached", timeout=30_000)
    page.wait_for_selector(".bn-psd canvas", state="attached", timeout=60_000)
    page.wait_for_timeout(1000)                       # the later plots rendered
    page.screenshot(path=str(shots / "ui-default.png"), full_page=True)
    assert page.console_errors == []
    assert [m for m in page.console_log if m.startswith("warning")] == []
    ctx.close()


def test_an_editable_sliders_label_sits_beside_its_number_box(lab_browser, lab_url):
    """Centred on the box, as a label; Panel's own alignment put it under the box's
    text (its centre 10 px lower)."""
    ctx, page = _open(lab_browser, lab_url)

    def centre(locator):
        box = locator.bounding_box()
        return box["y"] + box["height"] / 2

    for control, label in (("lengthscale", "Lengthscale ℓ"), ("rho", "Damping ρ")):
        row = page.locator(f".ctl-{control}")
        assert abs(centre(row.get_by_text(label)) - centre(row.locator("input").first)) < 2
    ctx.close()


def test_a_dragged_slider_sets_its_value_once_when_released(lab_browser, lab_url):
    """Dragging ℓ's slider across thirty positions sets ℓ once, at the release (the
    address, written at each setting change, names a single new ℓ: the box's); before,
    each position rebuilt the run and redrew the page."""
    ctx, page = _open(lab_browser, lab_url)
    page.evaluate("""() => {
      window.bnLengthscales = [];
      for (const name of ["replaceState", "pushState"]) {
        const original = history[name].bind(history);
        history[name] = (state, title, url) => {
          const value = new URL(url, location.href).searchParams.get("lengthscale");
          if (value !== null) window.bnLengthscales.push(value);
          return original(state, title, url);
        };
      }
    }""")
    handle = page.locator(".ctl-lengthscale .noUi-handle").first.bounding_box()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, 31):
        page.mouse.move(x + 5 * step, y)
        page.wait_for_timeout(30)
    page.mouse.up()
    box = page.locator(".ctl-lengthscale input").first
    page.wait_for_function("() => window.bnLengthscales.length > 0", timeout=30_000)
    page.wait_for_timeout(2000)                        # any later write would be in by now
    written = page.evaluate("window.bnLengthscales")
    assert len(set(written)) == 1 and float(box.input_value()) > 1
    assert float(written[0]) == pytest.approx(float(box.input_value()), abs=1e-9)
    ctx.close()


def test_run_ep_grows_energy_trace_and_url_records_it(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url)
    _choose(page, "method", "ep — expectation propagation (Power EP with α = 1)")
    page.wait_for_function("() => document.location.search.includes('method=ep')",
                           timeout=LOAD_TIMEOUT)
    _wait_method(page, "ep")
    page.get_by_role("button", name="▶ Run").click()
    for _ in range(60):
        if _iteration(page) >= 2:
            break
        page.wait_for_timeout(500)
    first = last = _iteration(page)
    for _ in range(60):        # a later step may first compile a program (a fresh clone's
        page.wait_for_timeout(500)     # run under load once stood 1.5 s at iteration 2)
        last = _iteration(page)
        if last > first or "converged" in _bold(page):
            break
    assert first >= 2 and (last > first or "converged" in _bold(page))
    if not _stopped(page):               # EP may converge (and disable Pause) first
        try:
            page.get_by_role("button", name="❚❚ Pause").click(timeout=5_000)
        except Exception:
            assert _stopped(page)
        page.wait_for_timeout(1000)
        paused_at = _iteration(page)
        page.wait_for_timeout(1000)
        assert _iteration(page) == paused_at
    page.screenshot(path=str(shots / "ui-run-ep.png"), full_page=True)
    assert page.console_errors == []
    ctx.close()


def test_step_changes_the_band(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url)
    band = page.locator(".bn-band").first
    before = band.screenshot()
    page.get_by_role("button", name="Step", exact=True).click()
    _wait_for_iteration(page, 1)
    page.wait_for_timeout(500)
    after = band.screenshot(path=str(shots / "ui-step-band.png"))
    assert before != after
    ctx.close()


def test_bad_csv_shows_the_error_and_keeps_the_page(lab_browser, lab_url, shots):
    """A CSV the lab cannot read is refused before it replaces anything: the error is
    under the upload, and the data in use (a good CSV uploaded before) keep their run,
    which still steps."""
    ctx, page = _open(lab_browser, lab_url)
    _choose(page, "dataset", "My CSV file (upload)")
    page.wait_for_selector("input[type=file]", state="attached", timeout=30_000)
    good = "x,y\n" + "".join(f"{0.1 * i:.1f},{(-1) ** i * 0.3:.1f}\n" for i in range(12))
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "good.csv", "mimeType": "text/csv", "buffer": good.encode()}])
    step = page.get_by_role("button", name="Step", exact=True)
    expect(page.get_by_text("12 training points")).to_have_count(1, timeout=60_000)
    expect(step).to_be_enabled(timeout=60_000)
    step.click()
    _wait_for_iteration(page, 1)
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "bad.csv", "mimeType": "text/csv", "buffer": b"x,y\n1,2\n3,oops\n"}])
    page.wait_for_selector(".bn-error:has-text('non-numeric')", timeout=30_000)
    assert page.get_by_text("the data in use are unchanged").count() > 0
    # in red: the panes carry the lab's text styles into their shadow roots
    colour = page.locator(".bn-error:has-text('non-numeric')").evaluate(
        "e => getComputedStyle(e).color")
    assert colour == "rgb(176, 0, 32)"
    page.screenshot(path=str(shots / "ui-bad-csv.png"), full_page=True)
    step.click()
    _wait_for_iteration(page, 2)
    assert page.get_by_text("12 training points").count() == 1
    ctx.close()


def test_sessions_are_independent_and_shared_url_restores(lab_browser, lab_url, shots):
    ctx_a, a = _open(lab_browser, lab_url)
    _choose(a, "method", "ep — expectation propagation (Power EP with α = 1)")
    _wait_method(a, "ep")
    ctx_b, b = _open(lab_browser, lab_url)
    assert _method(b) == "vi" and _method(a) == "ep"
    shared = lab_url + "?dataset=counts_1d&method=pep&alpha=0.3&kernel=matern32"
    ctx_c, c = _open(lab_browser, shared)
    _wait_method(c, "pep")
    assert c.locator(".ctl-dataset select").input_value().startswith("Counts")
    assert c.get_by_text("Poisson counts").count() > 0
    c.screenshot(path=str(shots / "ui-shared-url.png"), full_page=True)
    assert _method(b) == "vi"
    for ctx in (ctx_a, ctx_b, ctx_c):
        ctx.close()


_SURFACE_PANEL_JS = """(title) => {
  for (const view of Bokeh.index.all_views())
    if (view.frame && view.model.title && view.model.title.text === title) {
      const box = view.el.getBoundingClientRect(), frame = view.frame.bbox;
      return {x: box.x, y: box.y, width: box.width, height: box.height, left: frame.left,
              right: frame.right, top: frame.top, bottom: frame.bottom};
    }
  return null;
}"""

_SCROLL_TO_PANEL_JS = """(title) => {
  for (const view of Bokeh.index.all_views())
    if (view.frame && view.model.title && view.model.title.text === title)
      view.el.scrollIntoView({block: "center"});
}"""

#: what of the page reaches past the right edge of the card that holds it, where the
#: card cuts it off: every element under the tabs, through Panel's shadow roots but not
#: into a plot's canvas (whose glyph layers may extend past its frame, clipped)
_PAST_THE_EDGE_JS = """() => {
  const tabs = document.querySelector('.bk-panel-models-tabs-Tabs');
  const edge = tabs.closest('fast-card').getBoundingClientRect().right + 1;
  const past = [];
  function walk(root) {
    for (const el of root.children) {
      const box = el.getBoundingClientRect();
      if (box.width > 0 && box.right > edge)
        past.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')}: ` +
                  `${Math.round(box.left)}–${Math.round(box.right)} px`);
      if (el.classList.contains('bk-Canvas')) continue;
      if (el.shadowRoot) walk(el.shadowRoot);
      walk(el);
    }
  }
  walk(tabs);
  if (tabs.shadowRoot) walk(tabs.shadowRoot);
  return past;
}"""

#: a projector's screen, the sidebar open: ≈ 600 px for a page
PROJECTOR = (1024, 768)


#: the boxes of the tooltips shown on the page (Bokeh's, in its elements' shadow roots)
_TOOLTIPS_JS = """() => {
  const boxes = [];
  function walk(root) {
    for (const el of root.querySelectorAll('*')) {
      if ([...el.classList].includes('bk-Tooltip')) {
        const box = el.getBoundingClientRect();
        if (box.width > 0) boxes.push({left: box.left, right: box.right});
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  }
  walk(document);
  return boxes;
}"""


@pytest.mark.parametrize("width", [1024, 1400])
def test_a_buttons_hover_text_stays_on_the_screen(lab_browser, lab_url, width):
    """The MCMC button ends its row: Panel puts a button's hover text to its right, where
    the window's edge cut it (at 1400 px its box reached 1993 px); it is shown below."""
    ctx, page = _open(lab_browser, lab_url, viewport=(width, 900))
    page.wait_for_selector(".bn-psd canvas", state="attached", timeout=60_000)
    for name in ("MCMC reference", "↪ Copy link"):
        page.get_by_role("button", name=name).hover()
        page.wait_for_timeout(800)
        boxes = page.evaluate(_TOOLTIPS_JS)
        assert len(boxes) == 1 and 0 <= boxes[0]["left"] and boxes[0]["right"] <= width, \
            (name, boxes)
        page.mouse.move(0, 0)
        page.wait_for_timeout(300)
    ctx.close()


#: a phone held upright (390 × 844 CSS px, three device pixels to one), touch only
PHONE = (390, 844)


def test_a_phone_shows_the_whole_lab_and_steps_by_touch(lab_browser, lab_url, shots):
    """A phone's browser lays a page that sets no viewport width out 980 CSS px wide and
    shows it zoomed out, to be zoomed in by hand; the lab sets none on purpose: at the
    phone's own width (``width=device-width``) the template's 340 px sidebar filled the
    screen and pushed the pages past its right edge. Laid out at 980 px, nothing
    scrolls sideways, no page reaches past its card, the sidebar's controls are on the
    screen, and a tap on Step takes a step."""
    ctx, page = _open(lab_browser, lab_url, viewport=PHONE, device_scale_factor=3,
                      is_mobile=True, has_touch=True)
    page.wait_for_selector(".bn-psd canvas", state="attached", timeout=60_000)
    page.wait_for_timeout(1000)                       # the later plots laid out
    layout = page.evaluate("() => ({page: document.documentElement.scrollWidth, "
                           "screen: window.innerWidth})")
    assert layout == {"page": 980, "screen": 980}
    assert page.evaluate(_PAST_THE_EDGE_JS) == []
    for control in ("dataset", "lengthscale", "model", "method", "rho"):
        box = page.locator(f".ctl-{control}").first.bounding_box()
        assert 0 <= box["x"] and box["x"] + box["width"] <= 980, (control, box)
    page.get_by_role("button", name="Step", exact=True).tap()
    _wait_for_iteration(page, 1)
    page.screenshot(path=str(shots / "ui-phone.png"), full_page=True)
    assert page.console_errors == []
    ctx.close()


#: whether the ★ of all four surface panels stands at log10 of ℓ (the argument)
_STARS_AT_JS = """(lengthscale) => {
  const xs = [];
  for (const view of Bokeh.index.all_views()) {
    const glyph = view.model.glyph;
    if (glyph && glyph.marker && glyph.marker.value === "star")
      xs.push(...view.model.data_source.data["log10 lengthscale"]);
  }
  return xs.length === 4 && xs.every(x => Math.abs(x - Math.log10(lengthscale)) < 1e-9);
}"""


def _pushed(frames):
    """The headers of the messages among ``frames`` that the server sent on its own (a
    Bokeh message is a header, a metadata and a content frame; a reply to the page's own
    request, such as the OK to a patch the page sent when its layout settled, names that
    request in ``reqid``)."""
    headers = []
    for frame in frames:
        try:
            header = json.loads(frame)
        except (TypeError, ValueError):
            continue
        if isinstance(header, dict) and "msgtype" in header and "reqid" not in header:
            headers.append(header)
    return headers


def test_a_run_in_one_session_sends_nothing_to_another(lab_browser, lab_url):
    """Two visitors: while one runs to convergence, the other's page gets no message from
    the server. The template's busy spinner followed Panel's process-wide ``busy`` state:
    each callback of any session (every tick of a run) set the spinner of every open page,
    so each page spun for the others' runs and each tick cost the server an update per
    open page (with 21 pages open, a Run's first update took 1.5–3.3 s, not 0.4–0.6 s)."""
    ctx_a, a = _open(lab_browser, lab_url)
    ctx_b, b = _open(lab_browser, lab_url)
    for page in (a, b):
        page.wait_for_selector(".bn-psd canvas", state="attached", timeout=60_000)
    heard = -1
    while heard != len(b.frames_received):           # b's own page finished arriving
        heard = len(b.frames_received)
        b.wait_for_timeout(1500)
    a.get_by_role("button", name="▶ Run").click()
    _wait_stopped(a, 60)
    assert _stopped(a) and _iteration(a) > 1
    b.wait_for_timeout(500)
    assert _pushed(b.frames_received[heard:]) == []
    assert a.console_errors == [] and b.console_errors == []
    ctx_a.close()
    ctx_b.close()


def test_a_projector_shows_the_live_and_compare_pages_whole(lab_browser, lab_url, shots):
    """At 1024 × 768 with the sidebar open (≈ 600 px for a page) nothing of the Live page,
    its later plots included, nor of the Compare page with a pair run, reaches past the
    card that holds it. The Live page's row of driving buttons, a plain Row, had made the
    pages 830 px wide: the card cut off the plots' legends and tools, the iteration cap
    and the MCMC button, and the third of three plots in a row."""
    ctx, page = _open(lab_browser, lab_url, viewport=PROJECTOR)
    page.wait_for_selector(".bn-psd canvas", state="attached", timeout=60_000)
    page.wait_for_timeout(1000)                       # the later plots laid out
    assert page.evaluate(_PAST_THE_EDGE_JS) == []
    _tab(page, "Compare")
    page.get_by_role("button", name="Run both to convergence").click()
    page.wait_for_selector(".bn-compare-table td.bn-alpha", timeout=240_000)
    page.wait_for_timeout(1500)                       # the pair's plots drawn
    page.screenshot(path=str(shots / "ui-projector-compare.png"))
    assert page.evaluate(_PAST_THE_EDGE_JS) == []
    assert page.console_errors == []
    ctx.close()


def test_surface_panels_paint_their_colour_bar_under_the_frame(lab_browser, lab_url, shots):
    """On a projector's 1024 × 768 screen, the computed surfaces fit the page, and each
    panel's colour bar is painted under its frame. (With the pages in one Column with the
    tour panel, the panels were painted with the colour bar where the y axis belongs,
    while BokehJS's layout numbers were right: only the pixels show it.) Then a new ℓ in
    the sidebar moves the ★ of every panel there."""
    import io

    import numpy as np
    from PIL import Image

    ctx, page = _open(lab_browser, lab_url, viewport=PROJECTOR)
    _tab(page, "Surfaces")
    page.get_by_role("button", name="Compute surfaces").click()
    panel = None
    for _ in range(360):
        panel = page.evaluate(_SURFACE_PANEL_JS, "laplace")
        if panel:
            break
        page.wait_for_timeout(500)
    assert panel, "no surface panel drawn"
    page.wait_for_timeout(1000)                         # its last paint
    assert page.evaluate(_PAST_THE_EDGE_JS) == []
    page.evaluate(_SCROLL_TO_PANEL_JS, "laplace")          # its colour bar in the window
    panel = page.evaluate(_SURFACE_PANEL_JS, "laplace")
    strip = {"x": panel["x"] + panel["left"], "y": panel["y"] + panel["bottom"] + 4,
             "width": panel["right"] - panel["left"],
             "height": panel["height"] - panel["bottom"] - 8}
    page.screenshot(path=str(shots / "ui-surface-panels.png"))
    rgb = np.asarray(Image.open(io.BytesIO(page.screenshot(clip=strip))).convert("RGB"), int)
    coloured = int((rgb.max(-1) - rgb.min(-1) > 80).sum())   # viridis, not grey or white
    assert coloured > 500, (coloured, panel)
    # the ★ follows the sidebar's ℓ on every panel (its sources change, not the panels)
    page.locator(".ctl-lengthscale input").first.fill("2")
    page.locator(".ctl-lengthscale input").first.press("Enter")
    page.wait_for_function(_STARS_AT_JS, arg=2, timeout=30_000)
    assert page.evaluate(_SURFACE_PANEL_JS, "laplace")["x"] == panel["x"]
    # changed while the page is hidden, and the page drawn again: the ★ is at the new ℓ
    _tab(page, "Live")
    page.locator(".ctl-lengthscale input").first.fill("3")
    page.locator(".ctl-lengthscale input").first.press("Enter")
    page.wait_for_timeout(1500)
    _tab(page, "Surfaces")
    page.wait_for_function(_STARS_AT_JS, arg=3, timeout=30_000)
    assert page.console_errors == []
    ctx.close()
