"""Exports in a real browser: the downloaded CSV files parse and hold the numbers the
page shows, and the copied link opens the same setup in a new session."""
import csv
import io

import pytest

pytestmark = pytest.mark.ui

LOAD_TIMEOUT = 180_000


def _open(browser, url):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1300}, accept_downloads=True)
    page = ctx.new_page()
    page.goto(url, timeout=LOAD_TIMEOUT)
    page.wait_for_selector(".bn-status b", timeout=LOAD_TIMEOUT)
    return ctx, page


def _bold(page):
    return page.locator(".bn-status b").all_text_contents()


def _wait_iteration(page, k):
    for _ in range(240):
        b = _bold(page)
        if len(b) > 1 and b[1] == str(k):
            return b
        page.wait_for_timeout(250)
    raise AssertionError(f"status {_bold(page)} never reached iteration {k}")


def _download(page, label):
    with page.expect_download(timeout=60_000) as info:
        page.get_by_text(label, exact=True).click()
    return list(csv.DictReader(io.StringIO(open(info.value.path()).read())))


def test_trace_and_band_csv_hold_the_shown_numbers(lab_browser, lab_url):
    ctx, page = _open(lab_browser, lab_url)
    for k in (1, 2, 3):
        page.get_by_role("button", name="Step", exact=True).click()
        _wait_iteration(page, k)
    method, iteration, energy = _wait_iteration(page, 3)[:3]
    trace = _download(page, "⤓ Trace CSV")
    assert [int(r["iteration"]) for r in trace] == [0, 1, 2, 3]
    assert f"{float(trace[-1]['energy']):.4f}" == energy
    assert all(r["posterior_psd"] == "1" and float(r["step_size"]) > 0 for r in trace)
    assert trace[0]["accepted"] == "1" and {r["accepted"] for r in trace} <= {"0", "1"}
    band = _download(page, "⤓ Band CSV")
    assert len(band) == 200
    for r in band:
        assert float(r["f1_lower"]) <= float(r["f1_mean"]) <= float(r["f1_upper"])
        assert 0.0 <= float(r["predictive_probability_mean"]) <= 1.0
    ctx.close()


def test_mcmc_csv_holds_the_shown_reference(lab_browser, lab_url):
    """Offered once the MCMC reference is shown: its interval for log p(y), forward and
    reverse estimates with their standard errors and effective sample size are the
    status line's, and its band one row per data point."""
    import re
    ctx, page = _open(lab_browser, lab_url)
    assert not page.get_by_text("⤓ MCMC CSV", exact=True).is_visible()
    page.get_by_role("button", name="MCMC reference").click()
    page.wait_for_selector(".bn-mcmc .bn-ess", timeout=300_000)
    shown = " ".join(page.locator(".bn-mcmc div").all_inner_texts())   # in a shadow root
    lo, hi, log_z, se, upper, upper_se, ess = re.search(
        r"log p\(y\) ∈ \[(-?[\d.]+), (-?[\d.]+)\].*log p\(y\) ≈ (-?[\d.]+) ± ([\d.]+).*"
        r"reverse AIS ≈ (-?[\d.]+) ± ([\d.]+).*effective sample size (\d+)", shown).groups()
    rows = _download(page, "⤓ MCMC CSV")
    described = page.get_by_text(re.compile(r"\d+ training points")).first.inner_text()
    n = int(re.search(r"(\d+) training points", described).group(1))
    assert len(rows) == n
    for r in rows:
        assert float(r["lower"]) <= float(r["mean"]) <= float(r["upper"])
        assert tuple(f"{float(r[c]):.3f}" for c in (
            "interval_lower", "interval_upper", "log_p_y_lower", "log_p_y_lower_se",
            "log_p_y_upper", "log_p_y_upper_se")) == (lo, hi, log_z, se, upper, upper_se)
        assert f"{float(r['ess']):.0f}" == ess
    assert [float(r["x"]) for r in rows] == sorted(float(r["x"]) for r in rows)
    ctx.close()


def test_copy_link_reproduces_the_setup(lab_browser, lab_url):
    ctx, page = _open(lab_browser, lab_url + "?method=pep&alpha=0.3&kernel=matern32")
    page.get_by_role("button", name="↪ Copy link").click()
    field = page.locator(".bn-link input")
    for _ in range(120):
        if "alpha" in field.input_value():
            break
        page.wait_for_timeout(250)
    link = field.input_value()
    assert "method=pep" in link and "alpha=0.3" in link and "kernel=matern32" in link
    ctx2, other = _open(lab_browser, link)
    assert _bold(other)[0] == "pep"
    assert other.locator(".ctl-kernel select").input_value() == "Matérn 3/2"
    ctx.close()
    ctx2.close()
