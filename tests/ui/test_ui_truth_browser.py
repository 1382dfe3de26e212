"""The lab tells the truth, in a real browser (Playwright + Debian chromium): runs stop
and say why, Compare's table shows each method's α, the α explorer marks diverged α,
the MCMC band carries its ESS, a bad link is named, the plots show they are busy."""
import re

import pytest

from test_ui_browser import (LOAD_TIMEOUT, _bold, _choose, _open, _tab, _text, _wait_method,
                             _wait_stopped)

expect = pytest.importorskip("playwright.sync_api").expect
pytestmark = pytest.mark.ui


def test_a_run_of_vi_qn_stops_and_says_why(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url + "?method=vi_qn")
    _wait_method(page, "vi_qn")
    page.get_by_role("button", name="▶ Run").click()
    _wait_stopped(page, 240)
    status = _text(page, ".bn-status")
    assert "running" not in status
    assert page.get_by_role("button", name="▶ Run").is_enabled()     # callback stopped
    it = int(_bold(page)[1])
    page.wait_for_timeout(1500)
    assert int(_bold(page)[1]) == it
    page.screenshot(path=str(shots / "ui-vi-qn-stopped.png"), full_page=True)
    assert page.console_errors == []
    ctx.close()


def test_a_bad_link_keeps_its_good_values_and_names_the_bad_one(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url + "?alpha=5&method=pep")
    _wait_method(page, "pep")
    note = page.locator(".notyf__message").first
    note.wait_for(timeout=30_000)
    assert "alpha" in note.inner_text() and "“5”" in note.inner_text()
    page.wait_for_function("() => document.location.search.includes('alpha=0.5')",
                           timeout=30_000)
    assert "method=pep" in page.evaluate("document.location.search")
    page.screenshot(path=str(shots / "ui-bad-link.png"), full_page=True)
    ctx.close()


#: records, in the order BokehJS applies them, the band's busy overlay going on and off
#: and every data change; a warm compilation cache can make the overlay last less than a
#: frame, which polling the page's DOM would miss. ``bnBusyEnded``: an "off" after an "on"
#: (an "off" may come first: the first build's, when it arrives after the status line)
_RECORD_BUSY = """() => { window.bnBusy = [];
  window.bnBusyEnded = () => { const on = bnBusy.indexOf('on');
                               return on >= 0 && bnBusy.indexOf('off', on) > on; };
  for (const doc of Bokeh.documents) doc.on_change((e) => {
    if (e.attr === 'css_classes' && e.value.includes('bn-band'))
      window.bnBusy.push(e.value.includes('pn-loading') ? 'on' : 'off');
    else if (e.attr === 'data' && e.model.type === 'ColumnDataSource')
      window.bnBusy.push('data'); }); }"""


def test_the_busy_overlay_covers_the_plots_while_a_new_problem_compiles(lab_browser, lab_url):
    ctx, page = _open(lab_browser, lab_url)
    page.evaluate(_RECORD_BUSY)
    _choose(page, "kernel", "Matérn 3/2")
    page.wait_for_function("() => window.bnBusyEnded()", timeout=LOAD_TIMEOUT)
    page.wait_for_timeout(500)
    seen = page.evaluate("window.bnBusy")
    on, off = seen.index("on"), len(seen) - 1 - seen[::-1].index("off")
    assert "data" not in seen[:on], seen               # nothing redrawn before the overlay
    assert "data" in seen[on:off], seen                # the new problem drawn under it
    assert "on" not in seen[off:] and "data" not in seen[off:], seen
    assert page.locator(".bn-band.pn-loading").count() == 0
    ctx.close()


def test_compare_table_shows_alpha_for_pep_and_its_own_energy(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url)
    _tab(page, "Compare")
    page.locator(".bn-compare-method_a select").select_option(label="pep")
    # the choice has reached the server when it enables α (A): Panel's worker threads
    # may run a click sent right after it first (once in a full run: laplace ran)
    expect(page.locator(".bn-compare-alpha_a input")).to_be_enabled(timeout=30_000)
    page.get_by_role("button", name="Run both to convergence").click()
    page.wait_for_selector(".bn-compare-table td.bn-alpha", timeout=240_000)
    alphas = page.locator(".bn-compare-table td.bn-alpha").all_inner_texts()
    energies = [float(t) for t in page.locator(".bn-compare-table td.bn-energy").all_inner_texts()]
    assert alphas == ["0.5", "1 (EP)"]
    assert abs(energies[0] - energies[1]) > 1e-3
    page.screenshot(path=str(shots / "ui-compare-alpha.png"), full_page=True)
    ctx.close()


def test_mcmc_band_carries_its_ess(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url)
    page.get_by_role("button", name="MCMC reference").click()
    page.wait_for_selector(".bn-mcmc .bn-ess", timeout=300_000)
    text = _text(page, ".bn-mcmc")
    assert re.search(r"effective sample size \d+ of 256", text), text
    assert re.search(r"log p\(y\) ≈ -?\d+\.\d+ ± \d\.\d+", text), text
    page.screenshot(path=str(shots / "ui-mcmc-ess.png"), full_page=True)
    ctx.close()


def test_outliers_sweep_marks_its_diverged_alphas(lab_browser, lab_url, shots):
    ctx, page = _open(lab_browser, lab_url + "?dataset=robust_1d")
    _wait_method(page, "ep")                          # the preset opens with EP
    _tab(page, "Compare")
    page.get_by_role("button", name="Sweep α from 0 to 1").click()
    page.wait_for_selector(".bn-sweep-note .bn-bad", timeout=480_000)
    note = _text(page, ".bn-sweep-note")
    assert re.search(r"diverged at α = 0\.001, 0\.0014, ", note), note
    assert "VI diverged" in note
    page.screenshot(path=str(shots / "ui-outliers-sweep.png"), full_page=True)
    ctx.close()
