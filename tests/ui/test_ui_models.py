"""The pages' models without their views (no Panel page, no browser): what a script or a
test drives. Each is checked against the library called directly."""
import numpy as np
import pytest

import bnlab
from bnlab.ui.alpha_sweep import ALPHAS, AlphaSweepModel
from bnlab.ui.controls import Status
from bnlab.ui.live_model import LiveModel
from bnlab.ui.problem import build_problem
from bnlab.ui.settings import LabSettings
from bnlab.ui.surfaces_model import SURFACE_MAX_ITERS, SurfacesModel, make_grid


def test_the_live_model_solves_and_ticks_to_infers_fixed_point_without_a_view():
    s = LabSettings(method="ep", rho=0.7)
    model = LiveModel(s, Status())
    assert model.rebuild() and model.runner is not None
    p = model.problem
    res = bnlab.infer(p.model, np.asarray(p.X), np.asarray(p.y), method="ep", params=p.params,
                      damping=s.rho, cubature=("gauss_hermite", s.cubature_order),
                      tol=1e-10, max_iters=1000)
    assert model.solve() and model.runner.stop_reason() == "converged"
    assert not model.running and not model.cancelled
    np.testing.assert_allclose(model.runner.energy[-1], res.log_marginal, atol=1e-6)
    model.reset()                       # ticks, as Run's animation takes them, headless
    model.running = True
    for _ in range(1000):
        model.tick()
        if not model.running:
            break
    assert model.runner.stop_reason() == "converged"
    np.testing.assert_allclose(model.runner.energy[-1], res.log_marginal, atol=1e-6)


def test_the_live_model_names_settings_it_cannot_build():
    status = Status()
    model = LiveModel(LabSettings(), status)
    assert model.rebuild()
    model.settings.csv_text, model.settings.dataset = "x,y\n1,a\n", "csv"
    assert model.runner is None and model.problem is None
    assert status.errors and model.message == next(iter(status.errors.values()))


def test_the_surfaces_model_computes_what_bnlab_surface_computes():
    s = LabSettings(method="vi", rho=0.6, alpha=0.4)     # pep runs at the sidebar's α
    model = SurfacesModel(s)
    rows, columns = ("variance", 0.5, 4.0), ("lengthscale", 0.3, 3.0)
    model.compute(["laplace", "pep"], rows, columns, 3)
    assert not model.computing and model.fraction == 1.0
    p = build_problem(s)
    grid = {"variance": np.geomspace(0.5, 4.0, 3), "lengthscale": np.geomspace(0.3, 3.0, 3)}
    ds = bnlab.surface(p.model, p.X, p.y, methods=["laplace", "pep"], grid=grid,
                       params=p.params, alpha=s.alpha, max_iters=SURFACE_MAX_ITERS,
                       damping=s.rho, backtracking=s.backtrack, acceleration=s.accelerate,
                       cubature=("gauss_hermite", s.cubature_order))
    np.testing.assert_allclose(model.dataset["log_marginal"].values, ds["log_marginal"].values,
                               rtol=1e-10)


@pytest.mark.parametrize("rows,columns,why", [
    (("variance", 1.0, 2.0), ("variance", 1.0, 2.0), "two different hyperparameters"),
    (("variance", 2.0, 1.0), ("lengthscale", 1.0, 2.0), "variance: the range needs 0 < from"),
    (("variance", 1.0, 2.0), ("lengthscale", 0.0, 2.0), "lengthscale: the range needs"),
])
def test_a_grid_it_cannot_compute_is_refused_by_name(rows, columns, why):
    with pytest.raises(ValueError, match=why):
        make_grid(rows, columns, 5)
    model = SurfacesModel(LabSettings())
    with pytest.raises(ValueError, match=why):
        model.compute(["laplace"], rows, columns, 5)
    assert model.dataset is None and not model.computing


def test_the_alpha_models_play_walks_the_grid_once_and_a_stale_frame_moves_nothing():
    model = AlphaSweepModel(LabSettings())
    assert model.play() is None and not model.playing        # no sweep: nothing to play
    model.sweep = {"alpha": np.array(ALPHAS)}                 # the play reads no more of it
    first = model.play()
    assert model.playing and model.index == 0
    for k in range(1, 4):
        model.advance(first)
        assert model.index == k
    second = model.play()                                     # a new ▶ replaces the first
    model.advance(first)
    assert model.index == 0 and model.playing
    for _ in range(2 * len(ALPHAS)):
        model.advance(second)
    assert model.index == len(ALPHAS) - 1 and not model.playing      # it ends at EP
    model.close()
    assert model.sweep is None and model.play() is None
