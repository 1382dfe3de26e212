"""Hostile uploads: content that names a server file or a URL, script in a column name,
files too large for the lab. The upload is parsed from its bytes only, every message
that quotes it is escaped, and its size is checked before anything is built."""
import http.server
import threading

import numpy as np
import pytest

from bnlab import datasets
from bnlab.ui import problem as lab_problem
from bnlab.ui.controls import Controls, Status
from bnlab.ui.live import LiveView
from bnlab.ui.problem import (FULL_GP_MAX_N, MAX_UPLOAD_BYTES, MAX_UPLOAD_ROWS, SettingError,
                              build_problem, upload_text)
from bnlab.ui.settings import LabSettings

XSS = '<img src=x onerror="window.__xss=1">'
GOOD_CSV = b"x,y\n0.1,0.5\n0.4,-0.2\n0.9,0.3\n"


@pytest.fixture(scope="module")
def csv_server():
    """A local HTTP server that serves a valid CSV and counts the requests it gets."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.end_headers()
            self.wfile.write(GOOD_CSV)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/data.csv", hits
    server.shutdown()


@pytest.fixture()
def csv_file(tmp_path):
    path = tmp_path / "server-side.csv"
    path.write_bytes(GOOD_CSV)
    return path


def _pointers(csv_file, url):
    """Upload contents that name something else: server files and a URL."""
    return [str(csv_file), f"file://{csv_file}", url, "/etc/passwd"]


def test_content_naming_a_file_or_url_is_parsed_as_csv_text(csv_file, csv_server):
    url, hits = csv_server
    assert datasets.read_csv(csv_file).X.shape == (3, 1)      # the file itself is valid
    for content in _pointers(csv_file, url):
        for parsed in (content, content.encode()):
            with pytest.raises(ValueError, match="no data rows.*path or URL is not read"):
                datasets.from_csv(parsed)
        with pytest.raises(ValueError, match="no data rows.*path or URL is not read"):
            datasets.from_csv_bytes(content.encode())
    assert hits == []


def test_parsers_take_only_what_they_say(csv_file, csv_server):
    url, hits = csv_server
    with pytest.raises(TypeError, match="bytes"):
        datasets.from_csv_bytes(str(csv_file))
    with pytest.raises(ValueError, match="could not read the CSV file"):
        datasets.read_csv(url)                                   # a path, never fetched
    assert hits == []
    a, b = datasets.read_csv(csv_file), datasets.from_csv_bytes(GOOD_CSV)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, [0.5, -0.2, 0.3])


def test_lab_upload_of_a_path_or_url_is_an_error_and_the_run_is_kept(csv_file, csv_server):
    url, hits = csv_server
    s, st = LabSettings(dataset="regression_1d"), Status()
    controls, live = Controls(s, st), LiveView(s, st)
    assert live.rebuild()
    runner = live.runner
    for content in _pointers(csv_file, url):
        controls.upload.value = content.encode()
        assert "no data rows" in st.errors["csv"], content
        assert live.runner is runner
        assert "⚠" in controls.hints["csv"].object
    assert hits == []


def test_error_text_quoting_the_upload_is_escaped():
    s, st = LabSettings(dataset="regression_1d"), Status()
    controls, live = Controls(s, st), LiveView(s, st)
    assert live.rebuild()
    runner = live.runner
    controls.upload.value = f"x,{XSS}\n1,2\n3,oops\n".encode()
    pane = controls.hints["csv"]
    assert "non-numeric" in pane.object and "the data in use are unchanged" in pane.object
    assert "<img" not in pane.object and "&lt;img src=x onerror=&quot;" in pane.object
    # refused before it replaced anything: the data set and its run are as they were
    assert s.dataset == "regression_1d" and live.runner is runner
    assert "<img" not in live.status_pane.object


def test_an_empty_upload_says_so_and_keeps_the_run():
    s, st = LabSettings(dataset="regression_1d"), Status()
    controls, live = Controls(s, st), LiveView(s, st)
    assert live.rebuild()
    runner = live.runner
    for empty in (b"", b"\n  \n"):
        controls.upload.value = empty
        assert "the file is empty" in st.errors["csv"]
        assert "⚠" in controls.hints["csv"].object
        assert s.dataset == "regression_1d" and live.runner is runner
        controls.upload.value = None


def test_oversized_upload_is_refused_before_parsing():
    s, st = LabSettings(dataset="regression_1d"), Status()
    controls = Controls(s, st)
    big = b"x,y\n" + b"0.123456789,0.987654321\n" * (MAX_UPLOAD_BYTES // 24 + 1)
    with pytest.raises(SettingError, match=r"the file is 8\.0 MB, more than the lab reads "
                                           r"\(CSV files up to 8 MB") as e:
        upload_text(big)
    assert e.value.control == "csv"
    controls.upload.value = big
    assert "8 MB" in st.errors["csv"] and s.csv_text == "" and s.dataset == "regression_1d"
    with pytest.raises(SettingError, match="not UTF-8"):
        upload_text(b"x,y\n\xff\xfe,1\n")


def _csv(n, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-3, 3, (n, d)), axis=0)
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    header = ",".join([f"x{i}" for i in range(d)] + ["y"])
    return header + "\n" + "\n".join(",".join(f"{v:.6g}" for v in row)
                                      for row in np.column_stack([X, y])) + "\n"


def test_too_many_rows_or_columns_are_refused():
    text = _csv(200_000)                                 # the 3.8 MB file that took a server down
    assert len(text) < MAX_UPLOAD_BYTES
    s = LabSettings(dataset="csv", csv_text=text, model="sparse")
    with pytest.raises(SettingError, match=f"more than {MAX_UPLOAD_ROWS} data rows") as e:
        build_problem(s)
    assert e.value.control == "csv"
    s.csv_text = ",".join(f"c{i}" for i in range(2000)) + "\n" + ",".join(["1"] * 2000) + "\n"
    with pytest.raises(SettingError, match="more than 1000 columns"):
        build_problem(s)


def test_full_gp_above_its_size_suggests_the_scalable_models(monkeypatch):
    """n between the full GP's limit and the upload limit: the model control says to
    switch, nothing dense is built, and the Markov model then runs on the same data."""
    n = FULL_GP_MAX_N + 1
    built = []
    make_model = lab_problem.make_model
    monkeypatch.setattr(lab_problem, "make_model",
                        lambda s, X, lik: built.append(s.model) or make_model(s, X, lik))
    s, st = LabSettings(dataset="csv", csv_text=_csv(n), likelihood="gaussian"), Status()
    live = LiveView(s, st)
    assert not live.rebuild() and live.runner is None and built == []
    assert f"{n} training points" in st.errors["model"]
    assert "sparse model" in st.errors["model"] and "Markov model" in st.errors["model"]
    s.model = "markov"
    assert st.errors == {} and built == ["markov"] and len(live.problem.y) == n
    live.step(2)
    assert np.isfinite(live.runner.snapshot()["status"]["energy"])
    s.param.update(model="full", csv_text=_csv(n, d=2))    # 2-D: only the sparse model
    assert "sparse model" in st.errors["model"] and "Markov" not in st.errors["model"]


# -- in a real browser ------------------------------------------------------------------

def _open(browser, url):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1300})
    page = ctx.new_page()
    page.goto(url)
    return ctx, page


def _upload(page, name, content):
    page.wait_for_selector("input[type=file]", state="attached", timeout=90_000)
    page.locator("input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "text/csv", "buffer": content}])


def _step_reaches_iteration_one(page):
    page.wait_for_selector(".bn-status b", timeout=90_000)
    page.get_by_role("button", name="Step", exact=True).click()
    iteration = page.locator(".bn-status b").nth(1)       # method, iteration, energy, state
    for _ in range(120):
        if iteration.text_content() == "1":
            return
        page.wait_for_timeout(500)
    pytest.fail(f"no step: the status reads {page.locator('.bn-status').text_content()!r}")


@pytest.mark.ui
def test_browser_shows_a_script_column_name_as_text(lab_browser, lab_url):
    ctx, page = _open(lab_browser, lab_url + "?dataset=csv")
    _upload(page, "xss.csv", f"x,{XSS}\n1,2\n3,oops\n".encode())
    # the hint already names the missing file before the upload is parsed: wait for its
    # verdict on this file
    hint = page.locator(".ctl-csv .bn-error", has_text="non-numeric")
    hint.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)                    # time for an injected <img> to fail
    assert XSS in hint.text_content() and "non-numeric" in hint.text_content()
    assert page.evaluate("() => window.__xss") is None
    ctx.close()


@pytest.mark.ui
def test_browser_oversized_upload_gets_a_message_and_the_server_keeps_serving(
        lab_browser, lab_url):
    ctx, page = _open(lab_browser, lab_url)
    _step_reaches_iteration_one(page)             # a run on the preset data
    page.locator(".ctl-dataset select").select_option(label="My CSV file (upload)")
    _upload(page, "huge.csv", _csv(200_000).encode())
    page.locator(f".ctl-csv .bn-error:has-text('more than {MAX_UPLOAD_ROWS} data rows')").wait_for(
        timeout=60_000)
    other_ctx, other = _open(lab_browser, lab_url)   # another session is served as usual
    _step_reaches_iteration_one(other)
    other_ctx.close()
    ctx.close()


def test_an_empty_file_after_a_bad_one_replaces_its_error():
    """The browser sends an empty file as no content with a file name (Panel's
    FileInput): its own error replaces the bad file's, which used to stay on screen."""
    s, st = LabSettings(dataset="regression_1d"), Status()
    controls = Controls(s, st)
    controls.upload.param.update(value=b"x,y\n1,2\n3,oops\n", filename="bad.csv")
    assert "non-numeric" in st.errors["csv"]
    controls.upload.param.update(value=None, filename="empty.csv")
    assert "the file is empty" in st.errors["csv"] and "non-numeric" not in st.errors["csv"]
    assert s.dataset == "regression_1d"


def test_csv_errors_count_data_rows_as_a_person_does():
    """Row 3 of the data (line 4 of the file) is the bad one, and is called 3."""
    from bnlab.datasets import from_csv_bytes
    with pytest.raises(ValueError, match=r"non-numeric values in CSV data rows 3 \(the "
                                         r"first row after the header is 1\)"):
        from_csv_bytes(b"x,y\n1,2\n2,3\n3,oops\n4,5\n")
    with pytest.raises(ValueError, match=r"empty cells in CSV data rows 1, 4 \("):
        from_csv_bytes(b"x,y\n1,\n2,3\n3,4\n,5\n")
