"""Shared fixtures. UI fixtures: one ``panel serve apps/lab.py`` per test module and one
headless Debian chromium driven by Playwright (imported lazily, so this file imports
without playwright installed)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def pytest_configure(config):
    """Share compiled XLA programs between test modules and xdist workers through JAX's
    persistent compilation cache: the suite compiles the same engines many times. Then
    bnlab's settings with their defaults (``bnlab.configure``), before any test builds an
    array: float64 for the tests that make their own JAX arrays before calling bnlab."""
    import jax
    jax.config.update("jax_compilation_cache_dir",
                      os.environ.get("BNLAB_TEST_XLA_CACHE",
                                     str(Path(tempfile.gettempdir()) / "bnlab-test-xla-cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    import bnlab
    bnlab.configure()


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_code():
    """Drop compiled programs after each module: a process may hold 65 530 memory
    mappings, and the suite's thousands of executables would pass that (XLA then
    segfaults). See ``bnlab._runtime.compiled``."""
    yield
    import bnlab
    bnlab.clear_compiled()


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


#: ``panel serve`` with every thread's Python stack written to its log on SIGUSR1
_SERVE_DUMPABLE = ("import faulthandler, signal, sys; "
                   "faulthandler.register(signal.SIGUSR1, all_threads=True); "
                   "from panel.command import main; sys.argv[0] = 'panel'; main()")


#: each browser module's server and its log: {module name: (process, log path)}
_SERVERS = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """When a browser test fails, its report shows what its pages logged
    (``_report_pages``) and the last lines of its module's lab server log (which says
    "bnlab page shown" for each tab change it received), and the server writes every
    thread's Python stack to that log at once, after a line naming the test: what the
    server was doing while the page waited (a page that never showed its content)."""
    report = (yield).get_result()
    if report.when != "call" or not report.failed:
        return
    _report_pages(item, report)
    server = _SERVERS.get(item.module.__name__)
    if server is None:
        return
    proc, log_path = server
    lines = log_path.read_text(errors="replace").splitlines()
    report.sections.append(("the lab server's log, last 40 lines", "\n".join(lines[-40:])))
    if proc.poll() is None:
        with open(log_path, "a") as log:
            log.write(f"=== {item.name} failed at {time.strftime('%H:%M:%S')}; "
                      f"the server's threads:\n")
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)


def _report_pages(item, report):
    """Add what each of a failed test's open browser pages logged (console, page errors,
    the server's last messages and its own, summarised by ``_message_lines``) to its
    report: a page that never showed its content may have dropped a patch it could not
    apply ("reference … isn't known"), or never been sent one."""
    browser = item.funcargs.get("lab_browser")
    for number, page in enumerate(p for c in getattr(browser, "contexts", ()) for p in c.pages):
        frames, sent = getattr(page, "frames_received", []), getattr(page, "frames_sent", [])
        report.sections.append((f"page {number} ({page.url[:120]})", "\n".join(
            ["console:", *getattr(page, "console_log", [])[-40:],
             "errors:", *getattr(page, "console_errors", []),
             f"the last of {len(frames)} WebSocket frames received:",
             *_message_lines(frames[-60:]),
             f"the last of {len(sent)} WebSocket frames sent:",
             *_message_lines(sent[-30:])])))


def _message_lines(frames):
    """A line per Bokeh message header (its type, and the request it answers) and per
    document event in its content (kind, model id, attribute), from raw WebSocket frames
    (binary buffers left out)."""
    import json
    lines = []
    for frame in frames:
        try:
            content = json.loads(frame)
        except (TypeError, ValueError, UnicodeDecodeError):
            continue                                      # a binary buffer
        if isinstance(content, dict) and content.keys() == {"id"}:
            continue                                      # a buffer's header
        if isinstance(content, dict) and "msgtype" in content:
            lines.append(f"{content['msgtype']} (reqid {content.get('reqid')})")
        elif isinstance(content, dict) and "events" in content:
            lines += [f"  {e.get('kind')} {(e.get('model') or {}).get('id')}.{e.get('attr')}"
                      for e in content["events"]]
        elif content:
            lines.append(f"  {frame[:160]}")
    return lines


@pytest.fixture(scope="module")
def lab_url(request):
    """URL of a fresh ``panel serve apps/lab.py`` (stopped after the module, with the
    module's ``LAB_SERVER_ARGS`` and, on top of this process's environment, its
    ``LAB_SERVER_ENV`` if it has them), its log in
    test-output/lab-server-<module>.log (with the server's thread stacks when a test
    failed: ``pytest_runtest_makereport``)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM}")
    port = _free_port()
    name = request.module.__name__.rsplit(".", 1)[-1]
    log_path = ROOT / "test-output" / f"lab-server-{name}.log"
    log_path.parent.mkdir(exist_ok=True)
    log_path.write_text("")
    log = open(log_path, "a")         # appended to by the server and by the hook above
    proc = subprocess.Popen([sys.executable, "-c", _SERVE_DUMPABLE, "serve",
                             str(ROOT / "apps" / "lab.py"),
                             "--port", str(port), "--num-threads", "4", "--liveness",
                             "--allow-websocket-origin", f"localhost:{port}",
                             *getattr(request.module, "LAB_SERVER_ARGS", ())],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **getattr(request.module, "LAB_SERVER_ENV", {})})
    url = f"http://localhost:{port}/lab"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://localhost:{port}/liveness", timeout=5)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("panel serve exited early")
            time.sleep(0.5)
    else:
        proc.terminate()
        pytest.fail("panel serve did not answer within 90 s")
    _SERVERS[request.module.__name__] = (proc, log_path)
    yield url
    _SERVERS.pop(request.module.__name__, None)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture()
def lab_server_log(request, lab_url) -> Path:
    """The log file of this module's lab server (``lab_url``): what the server did."""
    return _SERVERS[request.module.__name__][1]


@pytest.fixture(scope="module")
def lab_browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def shots():
    """Directory for screenshots (git-ignored)."""
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    return out
