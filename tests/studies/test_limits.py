"""Every surface is sized before it runs (``bnlab.studies.work_limits``): above the work
limit or the available memory it is a ValueError stating the estimate, raised before
any point is solved; test inputs are checked like ``predict`` checks them."""
import re
import time

import numpy as np
import pytest

import bnlab
from bnlab.studies import work_limits
from bnlab.studies.work_limits import (AIS_MOVE_COST, AIS_MOVE_OVERHEAD, ITERATION_OVERHEAD,
                                       START_MAX_ITERS)

N = 12


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=N)
    y = np.where(X + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    return model, X, y


def _grid(a, b):
    return {"lengthscale": np.geomspace(0.5, 2, a), "variance": np.geomspace(0.5, 2, b)}


def test_the_estimate_is_grid_points_times_iteration_caps_times_n_cubed(problem):
    model, X, y = problem
    # the site methods twice their caps (a warm run and its cold redo); AIS: its moves,
    # four n³ set-ups and the capped EP and Laplace runs of its start
    expect = 2 * 3 * (2 * (7 + 11) * (N**3 + ITERATION_OVERHEAD)
                      + AIS_MOVE_COST * 50 * 4 * 1 * (N**2 + AIS_MOVE_OVERHEAD) + 4 * N**3
                      + 2 * START_MAX_ITERS * (N**3 + ITERATION_OVERHEAD))
    with pytest.raises(ValueError, match=re.escape(f"up to {expect:.3g} units")) as err:
        bnlab.surface(model, X, y, methods=["laplace", "ep", "mcmc"], grid=_grid(2, 3),
                      max_iters={"laplace": 7, "ep": 11},
                      mcmc_options={"num_temps": 50, "num_chains": 4}, max_work=expect * 0.99)
    assert "max_work=" in str(err.value) and "--max-work" in str(err.value)


def test_a_grid_of_a_million_points_is_refused_at_once(problem):
    model, X, y = problem
    start = time.perf_counter()
    with pytest.raises(ValueError, match="units of work"):
        bnlab.surface(model, X, y, methods=["laplace"], grid=_grid(1000, 1000))
    assert time.perf_counter() - start < 2


def test_max_work_raises_the_limit_and_the_result_is_unchanged(problem):
    model, X, y = problem
    kw = dict(methods=["laplace"], grid=_grid(2, 2), max_iters=20)
    work = 4 * 2 * 20 * (N**3 + ITERATION_OVERHEAD)
    with pytest.raises(ValueError, match="units of work"):
        bnlab.surface(model, X, y, max_work=work / 2, **kw)
    surf = bnlab.surface(model, X, y, max_work=work, **kw)
    exact = bnlab.infer(model, X, y, method="laplace", max_iters=20,
                        params={"kernel": [{"lengthscale": 0.5, "variance": 0.5}],
                                "likelihood": {}})
    assert surf.log_marginal.values[0, 0, 0] == pytest.approx(exact.log_marginal, abs=1e-6)


def test_the_estimate_covers_a_warm_point_redone_cold():
    """Warm from σ_n² = 1e-149 to 1e-2 EP needs ≈ 490 damped steps; with a cap of 5 the
    warm run stalls (measured here from the first point's converged sites) and the
    point is redone cold (from the noise's own site precision, ``Engine.cold_sites``)
    in 3, which the surface reports. The surface did 3 + 5 + 3 iterations, more than the
    2 × 5 the estimate counted when it left the redo out; it now counts 2 × 5 per
    point."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 10))
    y = np.sin(2 * X) + 0.1 * rng.standard_normal(10)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=0.1))
    grid = {"noise": [1e-149, 1e-2], "variance": [1.0]}
    surf = bnlab.surface(model, X, y, methods=["ep"], max_iters=5, grid=grid).sel(scheme="ep")
    params = lambda noise: {"kernel": [{"lengthscale": 1.0, "variance": 1.0}],
                            "likelihood": {"noise": noise}}
    first = bnlab.infer(model, X, y, method="ep", max_iters=5, params=params(1e-149))
    second = bnlab.Stepper(model, X, y, "ep", params=params(1e-2))
    _, _, warm_iters, warm_converged, _ = second.engine.run(
        second.params, second.X, second.y, second.settings, 5, first.sites)
    assert first.converged and not bool(warm_converged) and int(warm_iters) == 5
    assert bool(surf["converged"].all())
    iterations = int(surf["iterations"].sum()) + int(warm_iters)
    assert iterations == 11
    measured = iterations * (len(X) ** 3 + ITERATION_OVERHEAD)
    with pytest.raises(ValueError, match="units of work"):
        bnlab.surface(model, X, y, methods=["ep"], max_iters=5, grid=grid,
                      max_work=measured * 0.999)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "lots"])
def test_a_bad_max_work_is_named(problem, bad):
    model, X, y = problem
    with pytest.raises((ValueError, TypeError), match="max_work must"):
        bnlab.surface(model, X, y, methods=["laplace"], grid=_grid(2, 2), max_work=bad)


def test_more_memory_than_available_is_refused_before_any_work(problem, monkeypatch):
    model, X, y = problem
    need = work_limits.surface_memory(N, 1, 4, ["laplace"], 1)
    # sites (n and n × 1 × 1 per point) and results, plus 8 n × n matrices in flight
    assert need == 4 * (8 * (2 + 8) + 8 * N * 2) + 8 * 8 * N**2
    monkeypatch.setattr(work_limits, "available_memory", lambda: need - 1)
    with pytest.raises(ValueError, match="GiB of memory"):
        bnlab.surface(model, X, y, methods=["laplace"], grid=_grid(2, 2), workers=1)


def test_test_inputs_need_the_training_inputs_columns(problem):
    model, X, y = problem
    with pytest.raises(ValueError, match="X_test has 3 column"):
        bnlab.surface(model, X, y, methods=["laplace"], grid=_grid(2, 2),
                      X_test=np.zeros((4, 3)), y_test=np.ones(4))


def test_the_command_lines_bounds_are_the_labs():
    from bnlab.ui import mcmc_ref
    from bnlab.ui.surfaces import SurfacesView
    assert work_limits.MAX_TEMPS == mcmc_ref.MAX_TEMPS
    assert work_limits.MAX_CHAINS == mcmc_ref.NUM_CHAINS
    assert work_limits.MAX_AXIS_POINTS == SurfacesView.param.points.bounds[1]


def test_an_ais_schedule_beyond_memory_is_refused_before_any_work(problem, monkeypatch):
    model, X, y = problem
    # one point at once: its prior's covariance and factor, its start's three n × n
    # matrices, 16 chains' states, 2 × 10⁹ temperatures
    need = 8 * (5 * N**2 + 4 * 16 * N + 2 * 10**9)
    assert work_limits.ais_memory(N, 10**9, 16, 1) == need
    monkeypatch.setattr(work_limits, "available_memory", lambda: need - 1)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="num_temps=1000000000 .* GiB of memory"):
        bnlab.mcmc.ais(model, X, y, num_temps=10**9, use_cache=False)
    assert time.perf_counter() - start < 2
