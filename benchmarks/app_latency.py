"""Lab latency: step request → updated plot data, updates per second while running,
the α explorer's sweep (sequential runs against the one batched program) and its
scrub frame (slider → the Bokeh change message), and page load → first plot in a real
browser.

    python benchmarks/app_latency.py [--no-browser] [--no-live]

Targets (2 cores): step → plot < 150 ms at n = 200 and < 400 ms at n = 1000;
≥ 10 updates / s while running at n = 200; a scrub frame ≤ 100 ms. The baseline
measured in the same process is the bare jitted engine step (``engine.step`` + block),
so "UI overhead" is the ratio of the two.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import jax

from bnlab.ui.controls import Status
from bnlab.ui.live import LiveView
from bnlab.ui.settings import LabSettings

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 15


def _median_ms(fn, repeats=REPEATS):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times)


def step_latency(n_train: int, method="ep"):
    """(step→plot ms, bare engine step ms, ticks per second) at n_train points."""
    s = LabSettings(method=method, n=int(round(n_train / 0.75)))
    live = LiveView(s, Status())
    assert live.rebuild(), live.status.errors
    r = live.runner
    for _ in range(2):
        live.step(1)                               # warm everything

    def bare():
        jax.block_until_ready(r.stepper.step(r.state))

    ui_t, base_t = [], []
    for _ in range(REPEATS):                       # interleaved: both see the same load
        base_t.append(_median_ms(bare, 1))
        ui_t.append(_median_ms(lambda: live.step(1), 1))
    ui, base = statistics.median(ui_t), statistics.median(base_t)
    s.speed = 60.0
    t, ticks = time.perf_counter(), 0
    while time.perf_counter() - t < 3.0:
        live.model.tick()
        ticks += 1
    rate = ticks / (time.perf_counter() - t)
    return len(r.problem.y), ui, base, rate


def alpha_scrub(passes: int = 5):
    """The α explorer on the α tour's problem: (sequential sweep s, cold and warm;
    batched sweep s, cold and warm; frame ms, median and max). Sequential: what the
    explorer did before, a ``Runner`` stepped to its stop per α and for VI
    (``compare_model.converge``); batched: ``alpha_sweep``'s one program. A frame: the slider
    set to another α → the explorer's Bokeh sources replaced → the document's change
    events encoded as the message the browser is sent."""
    import panel as pn
    from bokeh.document import Document
    from bokeh.protocol import Protocol

    from bnlab.ui import tours
    from bnlab.ui.alpha_sweep import ALPHAS, alpha_sweep
    from bnlab.ui.compare import CompareView
    from bnlab.ui.compare_model import converge
    from bnlab.ui.problem import build_problem
    s = LabSettings(**tours.ALPHA.settings(len(tours.ALPHA.steps) - 1))
    problem = build_problem(s)

    def sequential():
        converge(problem, "vi", s)
        for a in ALPHAS:
            converge(problem, "ep" if a == 1.0 else "pep", s, alpha=a)

    def timed(fn):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    seq = (timed(sequential), statistics.median(timed(sequential) for _ in range(3)))
    batched = (timed(lambda: alpha_sweep(problem, s)),
               statistics.median(timed(lambda: alpha_sweep(problem, s)) for _ in range(3)))
    view = CompareView(s)
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    events = []
    doc.on_change(events.append)
    view.run_sweep()
    frames = []
    for _ in range(passes):
        for a in ALPHAS:
            events.clear()
            t = time.perf_counter()
            view.alpha_slider.value = a
            assert events, "the frame changed nothing in the document"
            Protocol().create("PATCH-DOC", events).content_json
            frames.append(1e3 * (time.perf_counter() - t))
    return seq, batched, (statistics.median(frames), max(frames))


def page_load():
    """Seconds from navigation to the first drawn posterior plot (cold, then warm)."""
    from playwright.sync_api import sync_playwright
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import CHROMIUM, CHROMIUM_ARGS, _free_port
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "panel", "serve", str(ROOT / "apps/lab.py"),
                             "--port", str(port), "--num-threads", "4", "--liveness"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import urllib.request
    for _ in range(180):
        try:
            urllib.request.urlopen(f"http://localhost:{port}/liveness", timeout=5)
            break
        except OSError:
            time.sleep(0.5)
    out = []
    try:
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(2):
                page = b.new_page()
                t = time.perf_counter()
                page.goto(f"http://localhost:{port}/lab")
                page.wait_for_selector(".bn-status b", timeout=180_000)
                page.wait_for_selector(".bn-band canvas", state="attached", timeout=60_000)
                out.append(time.perf_counter() - t)
                page.close()
            b.close()
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def main():
    import os
    print("App latency (median of", REPEATS, "step requests; EP, 1-D probit classification; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for n, target in ((200, 150.0), (1000, 400.0)) if "--no-live" not in sys.argv else ():
        N, ui, base, rate = step_latency(n)
        print(f"  n = {N:5d}: step → plot data {ui:7.1f} ms (target < {target:.0f}) | "
              f"bare engine step {base:6.1f} ms | UI overhead ×{ui / base:5.1f} | "
              f"ticks / s at full speed {rate:5.1f} (display capped at 20)")
    seq, batched, frame = alpha_scrub()
    print(f"  α explorer (α tour's problem, 21 α + VI): sequential runs {seq[0]:.2f} s cold, "
          f"{seq[1]:.3f} s warm | one batched program {batched[0]:.2f} s cold, "
          f"{batched[1]:.3f} s warm")
    print(f"  α scrub frame (slider → encoded Bokeh message): median {frame[0]:.1f} ms, "
          f"max {frame[1]:.1f} ms (target ≤ 100)")
    if "--no-browser" not in sys.argv:
        cold, warm = page_load()
        print(f"  page load → first plot: {cold:.1f} s cold (includes JAX compilation), "
              f"{warm:.1f} s warm")


if __name__ == "__main__":
    main()
