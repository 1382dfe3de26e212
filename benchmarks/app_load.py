"""The lab under a class: rounds of browser sessions against one ``panel serve``.

    python benchmarks/app_load.py [--sessions 5] [--rounds 3] [--one-by-one 5]
                                  [--trace-python-memory] [--page-requests 30]

After a first visitor alone, ``--one-by-one`` visitors arrive one after another (each
once the page before has all its plots; a class coming in), then each round opens
``--sessions`` headless Debian-chromium pages at once (Playwright, localhost only). In
every round each page waits for its first plot (the posterior band drawn, the status
line filled), presses Run (even sessions) or Step 1, 2 or 3 times (odd ones) and waits
for the first update; then every page is closed and the server must release every
session. It prints, per round, the first-plot and first-update times, the server's
resident memory (RSS) and its count of Python memory blocks once the sessions are gone, the
pages that raised a JavaScript error, and the server-side exceptions found in its log.
With ``--trace-python-memory`` the server runs under ``tracemalloc`` (slower, and more
resident memory for the tracing itself) and each round also reports the memory Python's
objects still hold once its sessions are gone: a leak raises it, memory that the
allocators keep after freeing it (the RSS high-water mark of many sessions at once)
does not.
The browsers share this machine's cores with the server: with several at once, each
page waits for the others' rendering too. ``--page-requests N`` then asks for N pages at
once without browsers and times the arrival of each page's HTML: the server's own share
of a class arriving at once, as when the students' browsers run on their own machines.

``tests/ui/test_ui_load.py`` runs the same ``load_rounds`` and asserts: every session
updated, the step-only sessions stopped at exactly their own number of steps (no state
shared between sessions), no JavaScript error on any page (such as a patch the browser
could not apply), no exception in the server log, no Python objects left behind by the
closed sessions, and the RSS after the last round within 10 % of the RSS after a single
session (rounds of five) or after the first round of the same size (rounds of thirty).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: Bokeh discards a session this long after its page's connection closed (a session
#: whose page has not loaded yet is kept: ``bnlab.ui.server._keep_session_until_its_page_loads``);
#: the defaults, 15 s and a check every 17 s, only slow the measurement down
SESSION_ARGS = ["--unused-session-lifetime", "5000", "--check-unused-sessions", "1000"]
#: one malloc arena for the server's threads, as the README advises for serving: freed
#: session memory is then in one heap that malloc_trim can hand back
SERVER_ENV = {"MALLOC_ARENA_MAX": "1"}
OPENED = "bnlab session opened"                 # logged by bnlab.ui.server per session built
CLOSED = "bnlab session closed"                 # … and per session released
EXCEPTION = re.compile(r"Traceback|Error|Exception")
#: how long a page may take to show its first plot (and its HTML to arrive), by default
PAGE_TIMEOUT_S = 180.0


#: The report of a message that was in flight when the browser closed the socket (a
#: closed tab: the transport's race, not the application's) is the one traceback not
#: counted as a server-side exception: raised in Tornado's write (bokeh/bokeh#7619), or
#: in Panel's dispatch of a message's parts, whose second write finds the socket the
#: first one closed (holoviz/panel#3341); no frame of it is the lab's
def _closed_socket_report(block: str) -> bool:
    frames = re.findall(r'File "([^"]+)"', block)
    return ("Task exception was never retrieved" in block
            and ("WebSocketProtocol13.write_message" in block or "_dispatch_msgs" in block)
            and block.rstrip().endswith("tornado.websocket.WebSocketClosedError")
            and all("/tornado/" in f or f.endswith("/panel/io/document.py") for f in frames))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


class Server:
    """``panel serve apps/lab.py --warm`` on a free localhost port, its log in a file
    (``--warm`` builds the default run, compiling its programs, before it listens)."""

    def __init__(self, log_path: Path, extra=(), trace_python_memory: bool = False):
        self.port = free_port()
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "panel", "serve", str(ROOT / "apps" / "lab.py"),
             "--port", str(self.port), "--address", "localhost",
             "--liveness", "--allow-websocket-origin", f"localhost:{self.port}", "--warm",
             *SESSION_ARGS, *extra],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, **SERVER_ENV,
                 **({"PYTHONTRACEMALLOC": "1"} if trace_python_memory else {})})
        self.url = f"http://localhost:{self.port}/lab"
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://localhost:{self.port}/liveness", timeout=5)
                self.released_at_start = self.log().count(CLOSED)    # the --warm session
                return
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError(f"panel serve did not start; see {self.log_path}")
                time.sleep(0.5)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def exceptions(self) -> list[str]:
        """Log lines that report an exception (but Tornado's closed-socket report)."""
        blocks = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", self.log())
        return [line for block in blocks if not _closed_socket_report(block)
                for line in block.splitlines() if EXCEPTION.search(line)]

    def wait_released(self, total: int, timeout_s: float = 120.0):
        """Wait until the server has released ``total`` sessions and every session it
        built (a page that connects after its session's patience,
        ``bnlab.ui.server.PAGE_PATIENCE_S``, has its first session discarded and gets a
        second one)."""
        deadline = time.time() + timeout_s
        while True:
            log = self.log()
            closed = log.count(CLOSED)
            if closed - self.released_at_start >= total and closed >= log.count(OPENED):
                return
            if time.time() > deadline:
                raise TimeoutError(f"{closed - self.released_at_start} of {total} sessions "
                                   f"released, {log.count(OPENED) - closed} still open")
            time.sleep(0.25)

    def sessions_built(self) -> int:
        """Sessions the server has built so far (the ``--warm`` one included)."""
        return self.log().count(OPENED)

    def labs_alive(self) -> int:
        """Lab objects in the server's memory when it last released a session."""
        counts = re.findall(r"labs in memory, this one included: (\d+)", self.log())
        return int(counts[-1]) if counts else -1

    def python_blocks(self) -> int:
        """Memory blocks Python had allocated (``sys.getallocatedblocks``) when the
        server last released a session (after a collection): what a leak of whole
        sessions makes grow, whatever malloc does with the freed memory."""
        counts = re.findall(r"Python memory blocks: (\d+)", self.log())
        return int(counts[-1]) if counts else -1

    def python_heap_mb(self) -> float:
        """Memory held by Python's objects when the server last released a session
        (only when it runs under ``tracemalloc``; else NaN)."""
        sizes = re.findall(r"Python heap: ([\d.]+) MB", self.log())
        return float(sizes[-1]) if sizes else float("nan")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def _bold(page) -> list[str]:
    return page.locator(".bn-status b").all_text_contents()


def iteration(page) -> int:
    b = _bold(page)
    return int(b[1]) if len(b) > 1 and b[1].isdigit() else -1


@dataclass
class Session:
    index: int
    first_plot_s: float = float("nan")
    first_update_s: float = float("nan")
    steps: int = 0                     # 0: pressed Run; k > 0: pressed Step k times
    final_iteration: int = -1
    page_errors: list = field(default_factory=list)   # uncaught JavaScript errors


@dataclass
class Round:
    sessions: list = field(default_factory=list)
    rss_open_mb: float = float("nan")     # all pages open and updated
    rss_closed_mb: float = float("nan")   # every session released
    labs_alive: int = -1                  # Lab objects in memory at the last release
    python_blocks: int = -1               # Python's allocated blocks at the last release
    python_heap_mb: float = float("nan")  # held by Python objects then (tracemalloc only)
    one_by_one: bool = False              # visitors arrived one after another
    sessions_built: int = 0               # server sessions (> pages if some were discarded)

    def summary(self) -> str:
        plot = [s.first_plot_s for s in self.sessions]
        upd = [s.first_update_s for s in self.sessions]
        arrival = "one by one" if self.one_by_one else "at once   "
        heap = ("" if math.isnan(self.python_heap_mb)
                else f" · Python heap {self.python_heap_mb:.1f} MB")
        return (f"{len(self.sessions):3d} sessions {arrival} · first plot median {statistics.median(plot):6.2f} s"
                f" (max {max(plot):6.2f}) · first update median {statistics.median(upd):5.2f} s"
                f" (max {max(upd):5.2f}) · RSS open {self.rss_open_mb:6.0f} MB,"
                f" closed {self.rss_closed_mb:6.0f} MB · labs in memory {self.labs_alive}"
                f" · Python blocks {self.python_blocks}{heap}"
                f" · server sessions {self.sessions_built}"
                f" · pages with JavaScript errors {sum(bool(s.page_errors) for s in self.sessions)}")


class PageWatch:
    """What a page's browser did, for the report of a page that never showed its run:
    its console, the requests still unanswered or failed, its WebSockets."""

    def __init__(self, page):
        self.console, self.pending, self.failed, self.sockets = [], {}, [], []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"[:300]))
        page.on("request", lambda r: self.pending.setdefault(r.url, time.strftime("%X")))
        page.on("requestfinished", lambda r: self.pending.pop(r.url, None))
        page.on("requestfailed", lambda r: (self.pending.pop(r.url, None),
                                            self.failed.append(f"{r.url} {r.failure}")))
        page.on("websocket", self._socket)

    def _socket(self, ws):
        self.sockets.append(f"opened {time.strftime('%X')}")
        ws.on("close", lambda _: self.sockets.append(f"closed {time.strftime('%X')}"))

    def report(self, page) -> str:
        try:
            state = page.evaluate(_BOKEH_STATE_JS)
        except Exception as exc:                    # a page that cannot answer says so
            state = f"(no answer: {exc})"
        return (f"session {_session_id(page)}; BokehJS {state}; WebSockets {self.sockets}; "
                f"unanswered requests {self.pending}; failed requests {self.failed[:5]}; "
                f"console (last 15) {self.console[-15:]}")


#: the page's BokehJS documents: their roots, and whether each has finished rendering
#: (``is_idle``: what makes BokehJS send ``document_ready``, Panel's ``onload``)
_BOKEH_STATE_JS = """() => {
  const B = window.Bokeh;
  if (!B) return {bokeh: false, readyState: document.readyState};
  const docs = B.documents || [];
  return {readyState: document.readyState, documents: docs.length,
          roots: docs.map(d => d.roots().length), idle: docs.map(d => d.is_idle)};
}"""


def _session_id(page) -> str:
    """The Bokeh session of a page, from the token in its HTML (its first part is the
    base64 JSON payload), to find the page's lines in the server's log."""
    import base64
    import json
    try:
        token = re.search(r'"token":\s*"([^"]+)"', page.content()).group(1).split(".")[0]
        return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["session_id"]
    except Exception as exc:
        return f"unknown ({type(exc).__name__})"


def _wait_first_plot(page, watch: PageWatch, timeout_s: float):
    """The posterior plot is drawn and the status line reports the run."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.wait_for_selector(".bn-status b", timeout=timeout_s * 1000)
        page.wait_for_selector(".bn-band canvas", state="attached", timeout=timeout_s * 1000)
    except PlaywrightTimeout:
        raise TimeoutError(f"no first plot in {timeout_s:.0f} s: "
                           f"{watch.report(page)}") from None


def _wait_whole_page(page, timeout_s: float):
    """The plots sent after the first one are on the page too (``LiveView.show_all``)."""
    page.wait_for_selector(".bn-psd canvas", state="attached", timeout=timeout_s * 1000)


def _wait_iteration(page, session: Session, at_least: int, timeout_s: float = 120.0):
    deadline = time.time() + timeout_s
    while iteration(page) < at_least:
        if time.time() > deadline:
            raise TimeoutError(f"session still at iteration {iteration(page)}; its page's "
                               f"JavaScript errors: {session.page_errors[:3]}")
        page.wait_for_timeout(50)


def one_round(browser, server: Server, n: int, released_before: int,
              one_by_one: bool = False, page_timeout_s: float = PAGE_TIMEOUT_S) -> Round:
    """Open n pages at once (or ``one_by_one``: each once the page before has all its
    plots, the earlier pages left open), drive each, close them all, wait for the server
    to let go."""
    rnd = Round([Session(i, steps=0 if i % 2 == 0 else 1 + (i // 2) % 3) for i in range(n)],
                one_by_one=one_by_one)
    ctxs, pages, starts, watches = [], [], [], []
    built_before = server.sessions_built()
    for s in rnd.sessions:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        page.on("pageerror", lambda exc, s=s: s.page_errors.append(str(exc)))
        watches.append(PageWatch(page))
        starts.append(time.perf_counter())
        page.goto(server.url, wait_until="commit", timeout=page_timeout_s * 1000)
        ctxs.append(ctx)
        pages.append(page)
        if one_by_one:
            _wait_first_plot(page, watches[-1], page_timeout_s)
            s.first_plot_s = time.perf_counter() - starts[-1]
            _wait_whole_page(page, page_timeout_s)
    if not one_by_one:
        for s, page, t0, watch in zip(rnd.sessions, pages, starts, watches):
            _wait_first_plot(page, watch, page_timeout_s)
            s.first_plot_s = time.perf_counter() - t0
    for s, page in zip(rnd.sessions, pages):
        t0 = time.perf_counter()
        if s.steps == 0:
            page.get_by_role("button", name="▶ Run").click()
            _wait_iteration(page, s, 1)
        else:
            for k in range(1, s.steps + 1):
                page.get_by_role("button", name="Step", exact=True).click()
                _wait_iteration(page, s, k)
        s.first_update_s = time.perf_counter() - t0
    for s, page in zip(rnd.sessions, pages):
        page.wait_for_timeout(200)
        s.final_iteration = iteration(page)
    rnd.rss_open_mb = server.rss_mb()
    for ctx in ctxs:
        ctx.close()
    server.wait_released(released_before + n)
    time.sleep(1.0)
    rnd.rss_closed_mb = server.rss_mb()
    rnd.labs_alive = server.labs_alive()
    rnd.python_blocks = server.python_blocks()
    rnd.python_heap_mb = server.python_heap_mb()
    rnd.sessions_built = server.sessions_built() - built_before
    return rnd


def page_requests(server: Server, n: int) -> list[float]:
    """``n`` requests for the page at once, no browser: the seconds until each page's
    HTML has arrived. The server builds a visitor's page (widgets, the first figure) on
    its one event loop, so the last of the ``n`` waits for all the others; the sessions,
    never connected, are kept for their pages' patience
    (``bnlab.ui.server.PAGE_PATIENCE_S``), then discarded after the unused-session
    lifetime."""
    times = [math.nan] * n

    def fetch(i):
        t0 = time.perf_counter()
        with urllib.request.urlopen(server.url, timeout=PAGE_TIMEOUT_S) as response:
            response.read()
        times[i] = time.perf_counter() - t0

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def load_rounds(browser, server: Server, sessions: int, rounds: int, report=print,
                one_by_one: int = 0, page_timeout_s: float = PAGE_TIMEOUT_S):
    """A single-session round (the reference RSS), a round of ``one_by_one`` visitors
    arriving one after another (if any), then ``rounds`` rounds of ``sessions`` at once;
    each page waited for at most ``page_timeout_s`` after the one before it."""
    released = 0
    out = []
    plan = [(1, False)] + ([(one_by_one, True)] if one_by_one else []) + [(sessions, False)] * rounds
    for n, staggered in plan:
        rnd = one_round(browser, server, n, released, one_by_one=staggered,
                        page_timeout_s=page_timeout_s)
        released += n
        out.append(rnd)
        report(f"round {len(out) - 1}: " + rnd.summary())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one-by-one", type=int, default=5,
                    help="visitors arriving one after another, after the first (0: none)")
    ap.add_argument("--trace-python-memory", action="store_true",
                    help="run the server under tracemalloc and report the memory Python's "
                         "objects hold after each round")
    ap.add_argument("--page-requests", type=int, default=0,
                    help="after the rounds, this many page requests at once without "
                         "browsers: the server's own time per page (0: none)")
    ap.add_argument("--log", default=str(ROOT / "test-output" / "app-load-server.log"))
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    Path(args.log).parent.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    server = Server(Path(args.log), trace_python_memory=args.trace_python_memory)
    print(f"server up in {time.perf_counter() - t0:.1f} s; RSS {server.rss_mb():.0f} MB")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            rounds = load_rounds(browser, server, args.sessions, args.rounds,
                                 one_by_one=args.one_by_one)
            browser.close()
        first = rounds[0].sessions[0].first_plot_s
        print(f"first plot: 1st visitor {first:.2f} s")
        for label, staggered in (("one by one", True), ("at once", False)):
            later = [s.first_plot_s for r in rounds[1:] if r.one_by_one == staggered
                     for s in r.sessions]
            if later:
                print(f"first plot, later visitors {label}: median "
                      f"{statistics.median(later):.2f} s, max {max(later):.2f} s")
        if args.page_requests:
            from bnlab.ui.server import PAGE_PATIENCE_S
            times = page_requests(server, args.page_requests)
            print(f"{args.page_requests} page requests at once, no browser: median "
                  f"{statistics.median(times):.2f} s, last {max(times):.2f} s")
            print(f"waiting up to {PAGE_PATIENCE_S:.0f} s for the server to let their "
                  f"sessions go")
            server.wait_released(sum(len(r.sessions) for r in rounds) + args.page_requests,
                                 timeout_s=PAGE_PATIENCE_S + 60)
        print(f"RSS after last round / after one session: "
              f"{rounds[-1].rss_closed_mb / rounds[0].rss_closed_mb:.3f}")
        if args.trace_python_memory:
            print(f"Python heap after last round − after one session: "
                  f"{rounds[-1].python_heap_mb - rounds[0].python_heap_mb:+.1f} MB")
        exc = server.exceptions()
        print(f"server-side exception lines: {len(exc)}")
        for line in exc[:20]:
            print("   ", line)
    finally:
        server.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
