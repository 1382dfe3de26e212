"""BDMC's bounds on a surface and from the command line, against the Gaussian
likelihood's closed-form log p(y) at every cell."""
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import multivariate_normal

import bnlab
from bnlab.cli import main

GRID = {"lengthscale": np.array([0.5, 2.0]), "variance": np.array([0.5, 2.0])}


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(tmp_path / "cache"))


def _exact(X, y, lengthscale, variance):
    """log N(y | 0, K + σₙ² I) for the CLI's default kernel (Matérn-5/2) and noise."""
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=lengthscale, variance=variance),
                     bnlab.likelihoods.Gaussian())
    p = model.init_params()
    K = np.asarray(model.prior_covariance(p, jnp.asarray(X), jnp.asarray(X)))
    noise = float(np.asarray(p["likelihood"]["noise"]).reshape(-1)[0])
    return multivariate_normal(np.zeros(len(y)), K + noise * np.eye(len(y))).logpdf(y)


def _check_bounds(surf, X, y):
    for i, ell in enumerate(GRID["lengthscale"]):
        for j, var in enumerate(GRID["variance"]):
            cell = surf.isel(lengthscale=i, variance=j)
            exact = _exact(X, y, ell, var)
            lo, hi = float(cell.mcmc_lower), float(cell.mcmc_upper)
            lo_se, hi_se = float(cell.mcmc_lower_se), float(cell.mcmc_upper_se)
            # the prior's jitter (1e-9 · mean diag K) moves log p(y) by about 1e-8
            assert lo - 3 * lo_se - 1e-6 < exact < hi + 3 * hi_se + 1e-6, (ell, var, lo, exact, hi)
            assert abs(lo - exact) < 0.5 and abs(hi - exact) < 0.5
            width = (hi + 2 * hi_se) - (lo - 2 * lo_se)
            assert bool(cell.converged.sel(scheme="mcmc")) == (width < surf.attrs["mcmc_tolerance"])
            assert float(cell.mcmc_gap) == pytest.approx(hi - lo)


def test_surface_holds_both_bounds_around_the_closed_form():
    ds = bnlab.datasets.load("regression_1d", n=12)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian())
    surf = bnlab.surface(model, ds.X, ds.y, methods=["vi", "mcmc"], grid=GRID,
                         mcmc_options={"num_temps": 300, "num_chains": 16, "tolerance": 0.8})
    np.testing.assert_array_equal(surf.mcmc_lower.values,
                                  surf.log_marginal.sel(scheme="mcmc").values)
    _check_bounds(surf, ds.X, ds.y)
    assert surf.attrs["mcmc_tolerance"] == 0.8
    assert np.isfinite(surf.mcmc_rhat.values).all() and (surf.mcmc_bulk_ess.values > 10).all()


def test_cli_writes_the_bounds_and_counts_the_unresolved_cells(tmp_path, capsys):
    """``--mcmc`` writes both bounds per cell and counts the unresolved cells; a bad
    tolerance or start is refused by the parser."""
    ds = bnlab.datasets.load("regression_1d", n=12)
    path, out = tmp_path / "d.csv", tmp_path / "s.nc"
    pd.DataFrame({"x": ds.X[:, 0], "y": ds.y}).to_csv(path, index=False)
    grid = [f"--grid=lengthscale={np.log(0.5)}:{np.log(2.0)}:2",
            f"--grid=variance={np.log(0.5)}:{np.log(2.0)}:2"]
    rc = main(["surface", "--data", str(path), "--likelihood", "gaussian", "--methods", "vi",
               "--mcmc", "--temps", "300", "--chains", "16", "--mcmc-tolerance", "1e-3",
               *grid, "--out", str(out)])
    assert rc == 0
    surf = xr.load_dataset(out)
    _check_bounds(surf, ds.X, ds.y)
    text = capsys.readouterr().out
    # annealed from EP's posterior, exact for a Gaussian likelihood: every cell resolved
    assert "0 of 4 cells not resolved (interval wider than 0.001 nats)" in text
    with pytest.raises(SystemExit):
        main(["surface", "--data", str(path), "--likelihood", "gaussian", "--mcmc",
              "--mcmc-tolerance", "-1", "--out", str(out)])
    assert "argument --mcmc-tolerance:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["surface", "--data", str(path), "--likelihood", "gaussian", "--mcmc",
              "--mcmc-start", "vi", "--out", str(out)])
    assert "argument --mcmc-start:" in capsys.readouterr().err


def test_surface_refines_the_unresolved_cells_until_a_budget():
    """``mcmc_options`` with ``max_temps``: cells still unresolved after 10 temperatures
    are rerun at 40, then 160; a cell stops at the first schedule that resolves it
    (or at 160), and every cell's interval holds the probit evidence in closed form
    (Sheppard's orthant probability, n = 3)."""
    X, y = np.array([[-1.0], [0.0], [1.2]]), np.array([1.0, -1.0, 1.0])
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    surf = bnlab.surface(model, X, y, methods=["mcmc"], grid=GRID,
                         mcmc_options={"num_temps": 10, "max_temps": 160, "num_chains": 64,
                                       "tolerance": 0.4, "start": "prior"})
    temps = surf.iterations.sel(scheme="mcmc").values
    resolved = surf.converged.sel(scheme="mcmc").values
    assert set(temps.ravel()) <= {10, 40, 160} and (temps > 10).any()
    assert resolved[temps < 160].all()
    for i, ell in enumerate(GRID["lengthscale"]):
        for j, var in enumerate(GRID["variance"]):
            m = bnlab.GP(bnlab.kernels.Matern52(lengthscale=ell, variance=var),
                         bnlab.likelihoods.Bernoulli("probit"))
            S = np.outer(y, y) * np.asarray(m.prior_covariance(m.init_params(), jnp.asarray(X),
                                                              jnp.asarray(X))) + np.eye(3)
            R = S / np.sqrt(np.outer(np.diag(S), np.diag(S)))
            truth = np.log(0.125 + (np.arcsin(R[0, 1]) + np.arcsin(R[0, 2])
                                    + np.arcsin(R[1, 2])) / (4 * np.pi))
            cell = surf.isel(lengthscale=i, variance=j)
            lo = float(cell.mcmc_lower - 2 * cell.mcmc_lower_se)
            hi = float(cell.mcmc_upper + 2 * cell.mcmc_upper_se)
            assert lo - 0.1 < truth < hi + 0.1, (ell, var, lo, truth, hi)
            assert bool(resolved[i, j]) == (hi - lo < 0.4)
