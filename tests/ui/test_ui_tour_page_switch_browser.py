"""A tour switched quickly between a Live step and a Compare step, in a real browser
(Playwright + Debian chromium): the α tour's step 5 (Live page, an EP run) and step 6
(Compare page, the α sweep), Next and Back clicked while each step still works. The
lab's pages are dynamic tabs: a hidden page's models leave the page and come back when
it is shown, while its panes keep being updated. Every patch the server sends must be
one the page can apply: BokehJS rejects, whole, a patch that refers to a model the page
does not hold ("reference … isn't known"), and the page then stays out of step with
the server (the cause: a hold taken on a worker thread, ``bnlab.ui.held``). Marked
slow, as it walks a tour; ``test_ui_worker_holds`` checks the cause without a browser."""
import random

import pytest

from test_ui_tours_browser import _button, _open, _step_shown

pytestmark = [pytest.mark.ui, pytest.mark.slow]

SWITCHES = 40


def test_switching_between_a_live_and_a_compare_step_keeps_the_page_in_step(
        lab_browser, lab_url, lab_server_log):
    ctx, page, errors = _open(lab_browser, lab_url + "?tour=alpha&step=5")
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    _step_shown(page, 5)
    rng = random.Random(5)
    for i in range(SWITCHES):
        try:
            _button(page, "Next ▶" if i % 2 == 0 else "◀ Back").click(no_wait_after=True)
        except Exception:
            # a page out of step may never enable the button: its errors say why
            assert errors == [], errors
            raise
        page.wait_for_timeout(rng.uniform(80, 700))
    _step_shown(page, 5)      # an even number of switches: back on the Live step
    page.locator(".bn-status").first.wait_for(state="visible", timeout=30_000)
    assert errors == []
    log = lab_server_log.read_text()
    assert "Traceback" not in log, log[-3000:]
    ctx.close()
