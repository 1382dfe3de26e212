"""The command line's bounds and paths: ``--data`` read up to ``--max-bytes``, AIS and
grid sizes bounded as the lab bounds them, the work estimate before any work
(``--max-work``), output, input and store distinct, no temporary file left behind, and
Ctrl-C answered with one line."""
import os

import pandas as pd
import pytest

import bnlab
from bnlab.cli import MAX_DATA_BYTES, main


@pytest.fixture
def csv(tmp_path):
    ds = bnlab.datasets.load("classification_1d", n=24)
    path = tmp_path / "data.csv"
    pd.DataFrame({"x": ds.X[:, 0], "label": ds.y}).to_csv(path, index=False)
    return path


@pytest.fixture
def no_surface(monkeypatch):
    def refuse(*args, **kwargs):
        pytest.fail("the command computed a surface before refusing its arguments")
    monkeypatch.setattr(bnlab, "surface", refuse)


def _run(argv):
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _argv(data, out, *extra):
    return ["surface", "--data", str(data), "--likelihood", "probit", "--out", str(out), *extra]


def test_the_default_byte_limit_is_the_labs_upload_limit():
    from bnlab.ui.problem import MAX_UPLOAD_BYTES
    assert MAX_DATA_BYTES == MAX_UPLOAD_BYTES


def test_an_endless_input_is_refused_at_the_byte_limit(tmp_path, capsys, no_surface):
    assert _run(_argv("/dev/zero", tmp_path / "s.nc")) == 2
    assert f"larger than {MAX_DATA_BYTES} bytes (--max-bytes" in capsys.readouterr().err


def test_max_bytes_bounds_an_ordinary_file(csv, tmp_path, capsys, no_surface):
    size = csv.stat().st_size
    assert _run(_argv(csv, tmp_path / "s.nc", "--max-bytes", str(size - 1))) == 2
    assert f"larger than {size - 1} bytes" in capsys.readouterr().err


@pytest.mark.parametrize("argv, option", [
    (["--temps", "16001"], "--temps"),
    (["--chains", "257"], "--chains"),
    (["--grid", "lengthscale=-1:1:42"], "--grid"),
    (["--max-work", "0"], "--max-work"),
    (["--max-work", "nan"], "--max-work"),
    (["--max-bytes", "0"], "--max-bytes"),
])
def test_sizes_beyond_the_labs_bounds_are_refused(csv, tmp_path, capsys, no_surface, argv, option):
    assert _run(_argv(csv, tmp_path / "s.nc", *argv)) == 2
    assert f"argument {option}:" in capsys.readouterr().err


def test_the_work_estimate_stops_a_run_before_it_starts(csv, tmp_path, capsys):
    out = tmp_path / "s.nc"
    assert _run(_argv(csv, out, "--max-work", "1000")) == 2
    err = capsys.readouterr().err
    assert "units of work" in err and "--max-work" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"]


@pytest.mark.parametrize("store", ["out", "data", "parent of out"])
def test_the_store_is_neither_the_output_nor_the_input(csv, tmp_path, capsys, no_surface, store):
    out = tmp_path / "sub" / "s.nc"
    out.parent.mkdir()
    path = {"out": out, "data": csv, "parent of out": out.parent}[store]
    assert _run(_argv(csv, out, "--store", str(path))) == 2
    assert "give the store a path of its own" in capsys.readouterr().err


def test_a_store_in_a_missing_directory_is_refused_before_any_work(csv, tmp_path, capsys,
                                                                   no_surface):
    store = tmp_path / "no" / "s.zarr"
    assert _run(_argv(csv, tmp_path / "s.nc", "--store", str(store))) == 2
    assert "does not exist" in capsys.readouterr().err


def test_temporaries_of_killed_runs_are_removed_and_a_live_runs_kept(csv, tmp_path, monkeypatch):
    out = tmp_path / "s.nc"
    dead = tmp_path / ".s.nc.99999999.k7x2.tmp"          # no process has this id
    impossible = tmp_path / f".s.nc.{10**30}.q9z1.tmp"  # no process can have this id
    live = tmp_path / f".s.nc.{os.getppid()}.a1b2.tmp"    # a running process
    dead.write_bytes(b"")
    impossible.write_bytes(b"")
    live.write_bytes(b"")

    def fail(*args, **kwargs):
        raise ValueError("stop here")
    monkeypatch.setattr(bnlab, "surface", fail)
    assert _run(_argv(csv, out, "--grid", "lengthscale=0:1:2", "--grid", "variance=0:1:2")) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name, "data.csv"]


def test_ctrl_c_prints_one_line_and_leaves_no_file(csv, tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(bnlab, "surface", interrupted)
    store = tmp_path / "s.zarr"
    rc = _run(_argv(csv, tmp_path / "s.nc", "--store", str(store), "--grid",
                    "lengthscale=0:1:2", "--grid", "variance=0:1:2"))
    assert rc == 130
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"bnlab: interrupted, nothing written; rerun the same command to " \
                      f"resume from --store {store}"
    assert not any("Traceback" in line for line in err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"]


def test_the_summary_skips_diverged_and_nan_cells(capsys):
    import numpy as np
    import xarray as xr
    from bnlab.cli import _print_maxima
    values = np.array([[[np.nan, np.nan], [np.nan, np.nan]],
                       [[-1.0, 5.0], [-2.0, np.nan]]])
    diverged = np.array([[[True, True], [True, True]], [[False, True], [False, False]]])
    dims = ("scheme", "lengthscale", "variance")
    surf = xr.Dataset({"log_marginal_per_n": (dims, values), "diverged": (dims, diverged)},
                      coords={"scheme": ["ep", "vi"], "lengthscale": [0.5, 2.0],
                              "variance": [1.0, 3.0]})
    _print_maxima(surf)
    assert capsys.readouterr().out.splitlines() == [
        "      ep: no finite value where it did not diverge",
        "      vi: max log p(y|θ)/n = -1.0000 at lengthscale=0.5, variance=1"]
