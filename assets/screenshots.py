"""Regenerate the README's screenshot of the lab, and one per guided tour, from real runs.

    python assets/screenshots.py [--out assets/lab.png] [--query "method=vi"] [--iterations 15]
    python assets/screenshots.py --tours [alpha skewed ...]      # assets/tour-<key>.png
    python assets/screenshots.py --tours --present               # on a 1024 × 768 projector

Starts ``panel serve apps/lab.py`` on a free port, opens it in headless Chromium
(Debian's /usr/bin/chromium, driven by Playwright), presses Run, waits until the run
has made ``--iterations`` iterations or stopped (converged or diverged), and saves a
screenshot of the page. ``--query`` is the settings part of the URL (the lab keeps its
settings there), e.g. ``"dataset=counts_1d&method=pep&alpha=0.3"``.

``--tours`` opens ``?tour=<key>`` for each tour instead, clicks Next up to the step in
``TOUR_SHOTS`` (the one that shows the tour's point), waits for that step's actions
(MCMC, run, sweep, surfaces) and saves ``assets/tour-<key>.png``.
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))        # this checkout's bnlab (the server runs it), not an installed one
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
LOAD_TIMEOUT_MS = 480_000
#: the step (1-based) each tour's screenshot shows, and the window height that shows
#: its point (the cavity tour's PSD strip, the surfaces' contours)
TOUR_SHOTS = {"alpha": (6, 1700), "skewed": (1, 1100), "cavities": (1, 1350),
              "sparse": (5, 1250), "surface": (1, 1850)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start_lab(port: int) -> subprocess.Popen:
    """``panel serve apps/lab.py``, returned once it answers its liveness probe."""
    proc = subprocess.Popen([sys.executable, "-m", "panel", "serve", str(ROOT / "apps" / "lab.py"),
                             "--port", str(port), "--liveness",
                             "--allow-websocket-origin", f"localhost:{port}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://localhost:{port}/liveness", timeout=5)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("panel serve exited before answering")
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("panel serve did not answer within 120 s")


def status(page) -> list[str]:
    """The bold fields of the lab's status line: method, iteration, energy[, state]."""
    return page.locator(".bn-status b").all_text_contents()


def iteration(page) -> int:
    fields = status(page)
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else -1


def shoot(url: str, out: Path, iterations: int, width: int, height: int) -> int:
    """Open the lab, run it, save the screenshot; returns the iteration shown."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(url)
        page.wait_for_selector(".bn-status b", timeout=LOAD_TIMEOUT_MS)
        page.wait_for_selector(".bn-band canvas", state="attached", timeout=LOAD_TIMEOUT_MS)
        page.get_by_role("button", name="▶ Run").click()
        deadline = time.time() + LOAD_TIMEOUT_MS / 1000
        while time.time() < deadline:
            if iteration(page) >= iterations or {"converged", "diverged"} & set(status(page)):
                break
            page.wait_for_timeout(250)
        else:
            raise RuntimeError(f"the run did not reach {iterations} iterations: {status(page)}")
        page.wait_for_timeout(1500)          # the last frame's plots finish drawing
        shown = iteration(page)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=False)
        browser.close()
    return shown


def _tour_step_done(page, k: int):
    """Step k shown and its actions finished (the heading's "working …" mark gone).
    Playwright locators reach into Panel's shadow roots."""
    from playwright.sync_api import expect

    expect(page.locator(".bn-tour-step")).to_have_text(str(k), timeout=LOAD_TIMEOUT_MS)
    expect(page.locator(".bn-tour-busy")).to_have_count(0, timeout=LOAD_TIMEOUT_MS)


#: whether BokehJS has drawn a figure titled ``title`` (a surface panel, by method)
_PANEL_DRAWN_JS = """(title) => typeof Bokeh !== "undefined" && [...Bokeh.index.all_views()]
    .some(v => v.model.title && v.model.title.text === title)"""


def shoot_tour(base_url: str, key: str, step: int, out: Path, width: int, height: int,
               present: bool = False):
    """Open tour ``key`` (in presentation mode if ``present``), walk to ``step`` and save
    the screenshot."""
    from playwright.sync_api import sync_playwright

    from bnlab.ui.tours import TOURS

    tour = TOURS[key]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{base_url}?tour={key}" + ("&present=1" if present else ""),
                  timeout=LOAD_TIMEOUT_MS)
        for k in range(1, step + 1):
            if k > 1:
                page.locator(".bn-tour button", has_text="Next ▶").click()
            _tour_step_done(page, k)
        if tour.steps[step - 1].tab == "Live":
            deadline = time.time() + LOAD_TIMEOUT_MS / 1000
            while time.time() < deadline and not {"converged", "diverged"} & set(status(page)):
                page.wait_for_timeout(250)
        if tour.steps[step - 1].tab == "Surfaces":     # the contour panels are drawn
            page.wait_for_function(_PANEL_DRAWN_JS, arg=tour.steps[step - 1].page["methods"][0],
                                   timeout=LOAD_TIMEOUT_MS)
        page.wait_for_timeout(2500)          # the plots finish drawing
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=False)
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "lab.png")
    ap.add_argument("--query", default="", help="URL settings, e.g. 'method=ep'")
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--height", type=int, default=1100)
    ap.add_argument("--tours", nargs="*", metavar="KEY",
                    help=f"screenshot guided tours instead (all when no key): {', '.join(TOUR_SHOTS)}")
    ap.add_argument("--present", action="store_true",
                    help="the tours in presentation mode on a 1024 × 768 projector")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    port = free_port()
    lab = start_lab(port)
    try:
        base = f"http://localhost:{port}/lab"
        if args.tours is not None:
            for key in args.tours or TOUR_SHOTS:
                out = ROOT / "assets" / f"tour-{key}.png"
                step, height = TOUR_SHOTS[key]
                if args.present:
                    shoot_tour(base, key, step, out, 1024, 768, present=True)
                else:
                    shoot_tour(base, key, step, out, args.width, height)
                print(out)
            return
        shown = shoot(base + (f"?{args.query}" if args.query else ""), args.out,
                      args.iterations, args.width, args.height)
    finally:
        lab.terminate()
        try:
            lab.wait(10)
        except subprocess.TimeoutExpired:
            lab.kill()
    print(f"{args.out} (iteration {shown})")


if __name__ == "__main__":
    main()
