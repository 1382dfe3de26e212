"""bnlab.surface(store=...): finished blocks are written to a Zarr store, a rerun reads
them back and computes only the rest, other arguments are refused by name, and a
damaged block is recomputed, never read as numbers."""

import numpy as np
import pytest
import xarray as xr

import bnlab

GRID = {"lengthscale": np.exp(np.linspace(-0.5, 1.5, 3)), "variance": np.exp(np.linspace(-1, 3, 4))}
METHODS = ["laplace", "ep"]


@pytest.fixture(scope="module")
def problem():
    ds = bnlab.datasets.load("classification_1d", n=24)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    return model, ds


@pytest.fixture(scope="module")
def reference(problem):
    model, ds = problem
    return bnlab.surface(model, ds.X, ds.y, methods=METHODS, grid=GRID, X_test=ds.X_test,
                         y_test=ds.y_test)


def _surface(problem, store, **kw):
    model, ds = problem
    kw = {"methods": METHODS, "grid": GRID, "X_test": ds.X_test, "y_test": ds.y_test, **kw}
    return bnlab.surface(model, ds.X, ds.y, store=store, **kw)


def _assert_equal(a, b):
    for name in ("log_marginal", "log_predictive", "iterations", "converged", "diverged", "psd"):
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_a_cancelled_run_resumes_from_its_store(problem, reference, tmp_path):
    store = tmp_path / "surf.zarr"
    finished = []
    first = _surface(problem, store, workers=1, progress=finished.append,
                     cancel=lambda: len(finished) >= 1)
    assert first.attrs["cancelled"] == 1 and np.isnan(first.log_marginal.values).any()
    again = _surface(problem, store)
    assert again.attrs["cancelled"] == 0
    assert 1 <= again.attrs["blocks_from_store"] < 2 * 4          # 2 runs × (column + 3 rows)
    _assert_equal(again, reference)
    third = _surface(problem, store)                               # everything stored now
    assert third.attrs["blocks_from_store"] == 8
    _assert_equal(third, reference)


def test_other_arguments_are_refused_by_name(problem, tmp_path):
    model, ds = problem
    store = tmp_path / "surf.zarr"
    _surface(problem, store, cancel=lambda: True)                  # creates the store only
    other_grid = dict(GRID, variance=GRID["variance"][:3])
    with pytest.raises(ValueError, match="different grid"):
        _surface(problem, store, grid=other_grid)
    with pytest.raises(ValueError, match=r"different data\b"):
        bnlab.surface(model, ds.X, -ds.y, methods=METHODS, grid=GRID, X_test=ds.X_test,
                      y_test=ds.y_test, store=store)
    with pytest.raises(ValueError, match="different methods, settings"):
        _surface(problem, store, methods=["laplace", "vi"], damping=0.3)
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="not a bnlab surface store"):
        _surface(problem, tmp_path / "plain")


def test_damaged_blocks_are_recomputed(problem, reference, tmp_path):
    store = tmp_path / "surf.zarr"
    _surface(problem, store)
    # block 1 of Laplace: its energy chunk overwritten with bytes that do not decode
    chunks = [p for p in (store / "laplace__energy").rglob("*") if p.is_file()
              and p.relative_to(store / "laplace__energy").parts[:2] == ("c", "1")]
    assert chunks
    for p in chunks:
        p.write_bytes(b"\x00garbage" * 3)
    # block 2 of EP: valid numbers that are not what was computed (a write cut short
    # after the arrays but before the marker would leave the old marker behind)
    ds = xr.open_zarr(store, consolidated=False)
    wrong = ds["ep__energy"][2:3].values + 1.0
    xr.Dataset({"ep__energy": (ds["ep__energy"].dims, wrong)}).to_zarr(
        store, region={"ep__unit": slice(2, 3)}, consolidated=False)
    again = _surface(problem, store)
    assert again.attrs["blocks_from_store"] == 8 - 2
    _assert_equal(again, reference)
    assert _surface(problem, store).attrs["blocks_from_store"] == 8   # rewritten correctly


def test_the_command_line_resumes_from_a_store(tmp_path):
    import pandas as pd
    from bnlab.cli import main
    ds = bnlab.datasets.load("classification_1d", n=24)
    data = tmp_path / "data.csv"
    pd.DataFrame({"x": ds.X[:, 0], "label": ds.y}).to_csv(data, index=False)
    args = ["surface", "--data", str(data), "--likelihood", "probit", "--methods", "laplace",
            "--grid", "lengthscale=-1:1:2", "--grid", "variance=0:1:3",
            "--store", str(tmp_path / "s.zarr")]
    assert main(args + ["--out", str(tmp_path / "a.nc")]) == 0
    assert main(args + ["--out", str(tmp_path / "b.nc")]) == 0
    a, b = xr.load_dataset(tmp_path / "a.nc"), xr.load_dataset(tmp_path / "b.nc")
    assert a.attrs["blocks_from_store"] == 0 and b.attrs["blocks_from_store"] == 3
    np.testing.assert_array_equal(a.log_marginal.values, b.log_marginal.values)
    assert main(args[:-6] + ["--grid", "lengthscale=-1:1:3", "--grid", "variance=0:1:3",
                             "--store", str(tmp_path / "s.zarr"),
                             "--out", str(tmp_path / "c.nc")]) == 2    # other grid: refused
