"""The bnlab command line: a surface written to netCDF, and clear errors."""
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bnlab
from bnlab.cli import main


@pytest.fixture
def csv(tmp_path):
    ds = bnlab.datasets.load("classification_1d", n=24)
    path = tmp_path / "data.csv"
    pd.DataFrame({"x": ds.X[:, 0], "label": ds.y}).to_csv(path, index=False)
    return path, ds


def test_surface_command_writes_the_same_values_as_the_library(csv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(tmp_path / "cache"))
    path, ds = csv
    out = tmp_path / "s.nc"
    rc = main(["surface", "--data", str(path), "--likelihood", "probit", "--methods", "laplace,vi",
               "--mcmc", "--temps", "20", "--chains", "2", "--grid", "lengthscale=-1:1:2",
               "--grid", "variance=0:1:2", "--out", str(out)])
    assert rc == 0
    surf = xr.load_dataset(out)
    assert list(surf["scheme"].values) == ["laplace", "vi", "mcmc"]
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    lib = bnlab.surface(model, ds.X, ds.y, methods=["laplace", "vi"],
                        grid={"lengthscale": np.exp([-1.0, 1.0]), "variance": np.exp([0.0, 1.0])})
    np.testing.assert_allclose(surf.log_marginal.values[:2], lib.log_marginal.values, rtol=1e-12)
    assert np.isfinite(surf.log_marginal_se.values[2]).all()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--grid", "lengthscale"], "bad --grid"),
    (["--grid", "lengthscale=-1:1:3", "--grid", "colour=0:1:2"], "unknown grid parameter"),
    (["--methods", "newton"], "unknown method"),
])
def test_surface_command_reports_bad_input(csv, tmp_path, capsys, args, message):
    path, _ = csv
    rc = main(["surface", "--data", str(path), "--likelihood", "probit",
               "--out", str(tmp_path / "x.nc")] + args)
    assert rc == 2
    assert message in capsys.readouterr().err
