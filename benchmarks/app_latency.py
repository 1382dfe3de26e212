"""Lab latency: step request → updated plot data, updates per second while running,
and page load → first plot in a real browser.

    python benchmarks/app_latency.py [--no-browser]

Targets (2 cores): step → plot < 150 ms at n = 200 and < 400 ms at n = 1000;
≥ 10 updates / s while running at n = 200. The baseline measured in the same process
is the bare jitted engine step (``engine.step`` + block), so "UI overhead" is the
ratio of the two.
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
        live._tick()
        ticks += 1
    rate = ticks / (time.perf_counter() - t)
    return len(r.problem.y), ui, base, rate


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
    for n, target in ((200, 150.0), (1000, 400.0)):
        N, ui, base, rate = step_latency(n)
        print(f"  n = {N:5d}: step → plot data {ui:7.1f} ms (target < {target:.0f}) | "
              f"bare engine step {base:6.1f} ms | UI overhead ×{ui / base:5.1f} | "
              f"ticks / s at full speed {rate:5.1f} (display capped at 20)")
    if "--no-browser" not in sys.argv:
        cold, warm = page_load()
        print(f"  page load → first plot: {cold:.1f} s cold (includes JAX compilation), "
              f"{warm:.1f} s warm")


if __name__ == "__main__":
    main()
