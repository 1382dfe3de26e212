"""The lab restarted: a second server's first plot against a warm server's.

    python benchmarks/lab_restarts.py [--rounds 2] [--programs] [--warm]

Per round, in a fresh cache directory (``BNLAB_CACHE_DIR``), two ``panel serve
apps/lab.py`` in a row (with ``--warm``: ``panel serve apps/lab.py --warm``, which builds
the opening run before serving, as the README serves it), each with two visitors one after the other (a fresh headless
Chromium context each, so no browser cache; the browser starts before the server):

- server 1 starts with an empty compile cache; its first visitor compiles the opening
  run's programs, its second visitor is a *warm server's new session*;
- server 2 starts on the cache server 1 filled: its first visitor is the *second
  server's first plot*, its second visitor a warm session again.

Timed per visitor: navigation → first Live plot (the status line's numbers and the
posterior band drawn, as ``app_latency.page_load``); per server also its spawn →
``/liveness`` (imports, the server's start) and spawn → the first visitor's plot.
Printed as ratios to the same round's warm sessions (the median of the two). Each
server records what JAX traced, lowered, compiled and loaded from the persistent cache
(``bnlab._runtime.compile_log``, written on SIGUSR2 after each visitor): ``--programs``
lists server 2's first visitor's programs.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import CHROMIUM, CHROMIUM_ARGS, _free_port  # noqa: E402

#: ``panel serve`` with a compile log (``bnlab._runtime.compile_log``, loaded as a file of
#: its own) that starts once the app has imported JAX, as a plain server would, and
#: that it writes (cumulative) to ``$BNLAB_BENCH_COMPILE_LOG`` on SIGUSR2
SERVE = """
import importlib.util, json, os, signal, sys
from pathlib import Path
LOG = []

def start_log():
    path = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]) / "bnlab/_runtime/compile_log.py"
    spec = importlib.util.spec_from_file_location("bench_compile_log", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    LOG.append(module.CompileLog().__enter__())

class AfterJax:
    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module
        def exec_module(module):
            load(module)
            start_log()
        spec.loader.exec_module = exec_module
        return spec

def dump(*_):
    out = os.environ["BNLAB_BENCH_COMPILE_LOG"]
    log = LOG[0]
    with open(out + ".tmp", "w") as f:
        json.dump({"trace": log.trace_seconds, "lower": log.lower_seconds,
                   "traced": log.traced,
                   "programs": [[p.name, p.seconds, p.loaded] for p in log.programs]}, f)
    os.replace(out + ".tmp", out)

sys.meta_path.insert(0, AfterJax())
signal.signal(signal.SIGUSR2, dump)
from panel.command import main
sys.argv[0] = "panel"
main()
"""


class Server:
    """One ``panel serve apps/lab.py`` on a free port, its spawn time and compile log."""

    def __init__(self, env, log_path: Path, args=()):
        self.port, self.log_path = _free_port(), log_path
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, "serve", str(ROOT / "apps/lab.py"), "--port",
             str(self.port), "--liveness",
             "--allow-websocket-origin", f"localhost:{self.port}", *args],
            cwd=ROOT, env=dict(env, BNLAB_BENCH_COMPILE_LOG=str(log_path)),
            stdout=open(log_path.with_suffix(".out"), "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://localhost:{self.port}/liveness", timeout=5)
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    tail = log_path.with_suffix(".out").read_text()[-3000:]
                    self.stop()
                    raise RuntimeError(f"panel serve did not start:\n{tail}") from None
                time.sleep(0.05)
        self.serving = time.perf_counter() - self.spawned

    def visit(self, browser) -> tuple[float, float]:
        """A new visitor: (navigation → first plot, spawn → first plot) in seconds."""
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        t = time.perf_counter()
        page.goto(f"http://localhost:{self.port}/lab")
        page.wait_for_selector(".bn-status b", timeout=300_000)
        page.wait_for_selector(".bn-band canvas", state="attached", timeout=60_000)
        done = time.perf_counter()
        ctx.close()
        return done - t, done - self.spawned

    def compile_log(self) -> dict:
        """The server's compile events so far."""
        self.log_path.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR2)
        for _ in range(200):
            if self.log_path.exists():
                return json.loads(self.log_path.read_text())
            time.sleep(0.05)
        raise RuntimeError("the server wrote no compile log")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def events(after: dict, before: dict | None = None) -> dict:
    """What happened between two compile logs: seconds traced, lowered, compiled by XLA
    and loaded from the cache, and the programs compiled / loaded."""
    before = before or {"trace": 0.0, "lower": 0.0, "programs": [], "traced": []}
    programs = after["programs"][len(before["programs"]):]
    return {"trace": after["trace"] - before["trace"], "lower": after["lower"] - before["lower"],
            "compile": sum(s for _, s, hit in programs if not hit),
            "load": sum(s for _, s, hit in programs if hit),
            "compiled": [(n, s) for n, s, hit in programs if not hit],
            "loaded": [(n, s) for n, s, hit in programs if hit],
            "traced": after["traced"][len(before["traced"]):]}


def server_round(env, browser, log_path, args) -> dict:
    server = Server(env, log_path, args)
    try:
        first_nav, first_spawn = server.visit(browser)
        first_log = server.compile_log()
        warm_nav, _ = server.visit(browser)
        warm_log = server.compile_log()
    finally:
        server.stop()
    return {"serving": server.serving, "first": first_nav, "first_spawn": first_spawn,
            "warm": warm_nav, "events": events(first_log),
            "warm_events": events(warm_log, first_log)}


def describe(e: dict) -> str:
    return (f"trace {e['trace']:.2f} s, lower {e['lower']:.2f} s, XLA {len(e['compiled'])} "
            f"programs {e['compile']:.2f} s, cache loads {len(e['loaded'])} {e['load']:.2f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warm", action="store_true", help="serve with panel's --warm")
    ap.add_argument("--programs", action="store_true",
                    help="list server 2's first visitor's traced and loaded programs")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for key in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE", "BNLAB_EXPORT_CACHE"):
        env.pop(key, None)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory() as cache:
                own = dict(env, BNLAB_CACHE_DIR=cache)
                log = Path(cache) / "compile-log.json"
                serve = ["--warm"] if args.warm else []
                one = server_round(own, browser, log, serve)
                two = server_round(own, browser, log, serve)
            warm = statistics.median([one["warm"], two["warm"]])
            print(f"round {r + 1}{' (--warm)' if args.warm else ''}, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
                  f"warm server's new session: {one['warm']:.2f} / {two['warm']:.2f} s "
                  f"(server 1 / 2)")
            for name, s in (("server 1 (empty cache)", one), ("server 2 (cache filled)", two)):
                print(f"  {name}: spawn → serving {s['serving']:.2f} s; first visitor: "
                      f"navigation → plot {s['first']:.2f} s (÷ warm {s['first'] / warm:.2f}), "
                      f"spawn → plot {s['first_spawn']:.2f} s (÷ warm "
                      f"{s['first_spawn'] / warm:.2f})")
                print(f"    to the first plot: {describe(s['events'])}")
                print(f"    warm visitor:      {describe(s['warm_events'])}")
            if args.programs:
                e = two["events"]
                print("  server 2, first visitor — traced:", ", ".join(e["traced"]))
                for n, s in sorted(e["compiled"] + e["loaded"], key=lambda p: -p[1]):
                    print(f"    {n:<50} {s:6.3f} s {'loaded' if (n, s) in e['loaded'] else 'XLA'}")
        browser.close()


if __name__ == "__main__":
    main()
