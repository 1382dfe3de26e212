"""Guided tours in a real browser (Playwright + Debian chromium): ``?tour=alpha``
opens the narration, Next walks through every step, each step's text is shown and its
settings reach the sidebar, the URL and the live run; the address names the step, a
copied address reopens that step with its settings, and Exit takes the tour (and its
card) off the page and out of the address. The other tours walk the same way under
``-m slow`` (their steps compute MCMC references and a surface)."""
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from bnlab.ui import tours

expect = pytest.importorskip("playwright.sync_api").expect

pytestmark = pytest.mark.ui

STEP_TIMEOUT_MS = 480_000      # a cold server compiles and samples MCMC on a busy machine
UPDATE_TIMEOUT_MS = 120_000    # a setting's round trip while the load test shares the cores


def _button(page, name):
    return page.locator(".bn-tour button", has_text=name)


def _step_shown(page, k):
    """Wait until the panel shows step k (1-based) and its actions are done (the
    heading's "working …" mark is gone). Locators, not document.querySelector: Panel's
    widgets live in shadow roots."""
    expect(page.locator(".bn-tour-step")).to_have_text(str(k), timeout=STEP_TIMEOUT_MS)
    expect(page.locator(".bn-tour-busy")).to_have_count(0, timeout=STEP_TIMEOUT_MS)


def _query(page) -> dict:
    """The address's query as the page holds it now (``page.url`` may lag a history
    update)."""
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.evaluate("location.href")).query).items()}


def _card_shown(page) -> bool:
    """Whether the template card around the tour panel is displayed."""
    return page.evaluate("getComputedStyle(document.querySelector('.bn-tour')"
                         ".closest('.card-margin')).display") != "none"


def _open(browser, url, size=(1500, 1300)):
    """A new browser context's page at ``url`` in a window of ``size``, and the list
    its JavaScript errors go to."""
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, timeout=STEP_TIMEOUT_MS)
    return ctx, page, errors


def _walk(page, tour):
    """Next through every step of ``tour`` (the page shows its first): each step's number,
    text, settings (the sidebar's method, the address) and page."""
    n = len(tour.steps)
    for k, step in enumerate(tour.steps):
        if k:
            _button(page, "Next ▶").click()
        _step_shown(page, k + 1)
        assert page.get_by_text(f"step {k + 1} of {n}").count() == 1
        first_words = step.text.split("**")[1]     # the step's bold opening
        assert page.locator(".bn-tour-text strong").first.inner_text() == first_words
        want = tour.settings(k)
        page.wait_for_function(
            "(m) => new URLSearchParams(document.location.search).get('method') === m",
            arg=want["method"], timeout=UPDATE_TIMEOUT_MS)
        if want["method"] == "pep":
            assert float(_query(page)["alpha"]) == want["alpha"]
        expect(page.locator(".ctl-method select")).to_have_value(
            re.compile("^" + re.escape(want["method"] + " —")), timeout=UPDATE_TIMEOUT_MS)
        page.wait_for_function("(k) => document.location.search.includes('step=' + k)",
                               arg=k + 1, timeout=UPDATE_TIMEOUT_MS)
        assert _query(page)["tour"] == tour.key
        if step.tab == "Live":
            expect(page.locator(".bn-status b").first).to_have_text(want["method"],
                                                                    timeout=UPDATE_TIMEOUT_MS)
        else:
            expect(page.locator(".bk-tab.bk-active")).to_have_text(step.tab)
    assert _button(page, "Next ▶").is_disabled()


def test_alpha_tour_walks_through_its_steps(lab_browser, lab_url, shots):
    tour = tours.ALPHA
    ctx, page, errors = _open(lab_browser, lab_url + "?tour=alpha")
    _walk(page, tour)
    n = len(tour.steps)
    page.screenshot(path=str(shots / "ui-tour-alpha.png"), full_page=True)
    # Back returns to the previous step's settings
    _button(page, "◀ Back").click()
    expect(page.locator(".bn-tour-step")).to_have_text(str(n - 1), timeout=STEP_TIMEOUT_MS)
    page.wait_for_function("() => document.location.search.includes('method=ep')",
                           timeout=STEP_TIMEOUT_MS)
    # the address of this step, copied after the user changed a setting, reopens the
    # step with the changed setting kept
    page.locator(".ctl-lengthscale input").first.fill("3.5")
    page.locator(".ctl-lengthscale input").first.press("Enter")
    page.wait_for_function("() => document.location.search.includes('lengthscale=3.5')",
                           timeout=UPDATE_TIMEOUT_MS)
    copied = page.evaluate("location.href")
    assert _card_shown(page)
    _button(page, "Exit tour").click()
    page.wait_for_selector(".bn-tour", state="hidden", timeout=UPDATE_TIMEOUT_MS)
    page.wait_for_function("() => !document.location.search.includes('tour=')",
                           timeout=UPDATE_TIMEOUT_MS)
    assert "step" not in _query(page) and _query(page)["lengthscale"] == "3.5"
    assert not _card_shown(page)
    other = ctx.new_page()
    other.on("pageerror", lambda e: errors.append(str(e)))
    other.goto(copied, timeout=STEP_TIMEOUT_MS)
    _step_shown(other, n - 1)
    assert other.locator(".ctl-lengthscale input").first.input_value() == "3.5"
    assert _query(other)["lengthscale"] == "3.5" and _query(other)["step"] == str(n - 1)
    assert errors == []
    ctx.close()


@pytest.mark.slow
@pytest.mark.parametrize("key", [key for key in tours.TOURS if key != "alpha"])
def test_every_other_tour_walks_through_its_steps(lab_browser, lab_url, key):
    """The other tours, step by step in a browser, their actions performed (MCMC, runs,
    the α sweep, the surface), with no error in the page."""
    ctx, page, errors = _open(lab_browser, lab_url + f"?tour={key}")
    _walk(page, tours.TOURS[key])
    assert errors == []
    ctx.close()


def test_clicks_at_random_moments_never_break_a_tour(lab_browser, lab_url, lab_server_log):
    """A teacher's clicks at random moments (a fixed seed, 40 clicks of Next, Back,
    Replay, Run and Pause, 0.12–0.6 s apart, many while a step is still working): the
    server logs no exception, the page none, and after a last Next or Back the tour
    shows the step the Next and Back clicks add up to, its run stopped where its text
    says, at the energy an independent run of the step's settings reaches."""
    import random

    from bnlab.ui.compare_model import converge
    from bnlab.ui.problem import build_problem
    from bnlab.ui.settings import LabSettings
    from test_ui_browser import _bold, _text, _wait_stopped
    tour = tours.ALPHA
    last = len(tour.steps) - 2              # the last step with a run (Live page)
    ctx, page, errors = _open(lab_browser, lab_url + "?tour=alpha")
    _step_shown(page, 1)
    rng = random.Random(11)
    wanted = 0
    for _ in range(40):
        name = rng.choice(["Next ▶", "Next ▶", "◀ Back", "Replay", "▶ Run", "❚❚ Pause"])
        button = (_button(page, name) if name in ("Next ▶", "◀ Back", "Replay") else
                  page.locator(".bk-btn", has_text=name))
        # a hidden or disabled button is skipped; a shown one is clicked however long the
        # page takes to let it (a 300 ms limit skipped nearly every click on a loaded
        # machine). Playwright's wait after a click, for the navigation it takes the
        # address's update for, is not waited: it timed out after Next had been clicked,
        # and the click, not counted, left this count a step behind the tour's
        try:
            if not (button.is_visible() and button.is_enabled(timeout=1000)):
                continue
            button.click(timeout=10_000, no_wait_after=True)
        except Exception:
            continue
        if name in ("Next ▶", "◀ Back"):
            wanted = min(max(wanted + (1 if name == "Next ▶" else -1), 0), len(tour.steps) - 1)
        # at least a person's quickest second click apart: Panel hands each click to
        # one of its worker threads, and two clicks within a few milliseconds may be
        # handled in either order (Next at the last step then Back ends a step lower
        # than Back then Next)
        page.wait_for_timeout(rng.uniform(120, 600))
    final = "◀ Back" if wanted > last - 1 else "Next ▶"
    wanted += 1 if final == "Next ▶" else -1
    _button(page, final).click()
    _step_shown(page, wanted + 1)
    _wait_stopped(page, 120)
    settings = LabSettings(**tour.settings(wanted))
    expected = converge(build_problem(settings), settings.method, settings).energy[-1]
    # the step's page is the one on screen (it was once left on Compare under a Live step)
    page.locator(".bn-status").first.wait_for(state="visible", timeout=30_000)
    fields = _bold(page)        # method, iteration, energy, state
    assert f"{expected:.4f}" in fields and "converged" in fields, (
        fields, _text(page, ".bn-status"))
    assert errors == []
    log = lab_server_log.read_text()
    assert "Traceback" not in log and "RuntimeError" not in log, log[-3000:]
    ctx.close()


def test_presentation_mode_fits_a_projector_and_the_keyboard_drives_it(lab_browser, lab_url):
    """``?present=1`` on a 1024 × 768 projector: the sidebar is folded, the tour's text
    stands beside the band it describes (the band's top on the screen, not below a text
    card), → goes to the next step, Space runs and pauses the run, and the address keeps
    the mode for a copied link."""
    from test_ui_browser import _text, _wait_stopped
    ctx, page, errors = _open(lab_browser, lab_url + "?tour=alpha&present=1", (1024, 768))
    _step_shown(page, 1)
    assert not page.locator(".ctl-method").first.is_visible()          # sidebar folded
    text = page.locator(".bn-tour-text").bounding_box()
    band = page.locator(".bn-band").bounding_box()
    assert text["x"] + text["width"] <= band["x"] + 1, (text, band)
    assert band["y"] < 768 - 200, band                  # most of the band is on screen
    page.mouse.click(5, 760)                            # the page has the keyboard
    page.keyboard.press("ArrowRight")
    _step_shown(page, 2)
    _wait_stopped(page, 120)
    assert "present=1" in page.evaluate("location.href")
    page.keyboard.press(" ")                            # the finished run replays …
    expect(page.locator(".bn-status b", has_text="running")).to_have_count(
        1, timeout=UPDATE_TIMEOUT_MS)
    page.keyboard.press(" ")                            # … and Space pauses it
    expect(page.locator(".bn-status b", has_text="running")).to_have_count(
        0, timeout=UPDATE_TIMEOUT_MS)
    assert "step 2 of 6" in _text(page, ".bn-tour-heading")
    assert errors == []
    ctx.close()
