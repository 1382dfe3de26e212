"""The α explorer without a browser: the stored sweep is, α by α, what independent
``bnlab.infer`` runs give, and the slider, ▶ and a tour step show the stored α's
results in the figures' data sources."""
import numpy as np
import pytest

import bnlab
from bnlab.ui import tour_panel, tours
from bnlab.ui.alpha_plots import point_picture
from bnlab.ui.alpha_sweep import ALPHAS, MAX_ITERS, alpha_sweep
from bnlab.ui.compare import CompareView
from bnlab.ui.problem import build_problem
from bnlab.ui.settings import LabSettings

#: 'Regression with outliers': every α below about 0.15 diverges there, and VI too
OUTLIERS = LabSettings(dataset="robust_1d")


@pytest.fixture(scope="module")
def outliers():
    return alpha_sweep(build_problem(OUTLIERS), OUTLIERS)


def _infer(problem, settings, method, alpha=1.0):
    return bnlab.infer(problem.model, problem.X, problem.y, method=method, alpha=alpha,
                       damping=settings.rho, tol=1e-6, max_iters=MAX_ITERS,
                       params=problem.params, backtracking=settings.backtrack,
                       acceleration=settings.accelerate,
                       cubature=("gauss_hermite", int(settings.cubature_order)))


def test_the_grid_runs_from_near_vi_to_ep_and_holds_the_tours_alphas():
    assert len(ALPHAS) == 21 and ALPHAS[0] == 0.001 and ALPHAS[-1] == 1.0
    ratios = np.diff(np.log10(ALPHAS))
    np.testing.assert_allclose(ratios, 0.15, atol=0.02)        # log-spaced (rounded)
    assert {0.001, 0.25, 0.5} <= set(ALPHAS)


@pytest.mark.parametrize("alpha", [0.001, 0.011, 0.13, 0.18, 0.5, 1.0])
def test_each_stored_alpha_is_an_independent_infer_run(outliers, alpha):
    """Diverged or not as ``bnlab.infer`` at that α (EP at α = 1), the same converged
    energy and the same band at the plotting grid; the first α that converges is
    0.18 here, so both kinds are checked."""
    p, k = outliers["problem"], outliers["alpha"].index(alpha)
    r = _infer(p, OUTLIERS, "ep" if alpha == 1.0 else "pep", alpha)
    assert outliers["stop"][k].startswith("diverged") == bool(r.diverged)
    assert (outliers["stop"][k] == "converged") == bool(r.converged)
    if r.diverged:
        assert np.isnan(outliers["energy"][k])
        return
    assert abs(outliers["energy"][k] - float(r.log_marginal)) < 1e-6
    mean, var = r.predict(np.asarray(p.Xs))
    band = outliers["bands"][k]
    np.testing.assert_allclose(band["mean"], mean, atol=1e-6)
    np.testing.assert_allclose(band["upper"] - band["lower"], 4 * np.sqrt(var), atol=1e-6)


def test_the_vi_reference_is_an_independent_vi_run():
    """VI on the default problem (it diverges on the outliers): the stored ELBO and band
    are ``bnlab.infer(method="vi")``'s."""
    s = LabSettings()
    p = build_problem(s)
    sweep = alpha_sweep(p, s)
    r = _infer(p, s, "vi")
    assert sweep["vi"]["stop"] == "converged" and r.converged
    assert abs(sweep["vi"]["energy"] - float(r.log_marginal)) < 1e-6
    mean, _ = r.predict(np.asarray(p.Xs))
    np.testing.assert_allclose(sweep["vi"]["band"]["mean"], mean, atol=1e-6)
    # VI's ELBO is a lower bound that Power EP's energy approaches as α → 0
    assert abs(sweep["energy"][0] - sweep["vi"]["energy"]) < 1e-2


def _shown(view):
    return view.explorer.plots.src


def test_slider_play_and_a_tour_step_show_the_stored_alphas_band(outliers):
    """Each frame puts the stored α's band, energy and point picture into the figures'
    sources (nothing else changes: VI's and EP's outlines keep their data); ▶ walks the
    grid from its first α; Pause stops it: a frame of the paused play moves nothing,
    and a second play starts over. The α tour's last step sets the slider to 0.5."""
    view = CompareView(OUTLIERS)
    view.run_sweep()                     # the program compiled for ``outliers`` is reused
    sweep = view.sweep
    assert sweep["stop"] == outliers["stop"]
    src = _shown(view)
    outlines = {key: src[key].data for key in ("vi", "ep", "curve")}
    point = int(view.explorer.point_input.value)
    for a in (0.5, 0.25, 1.0, 0.001):
        view.alpha_slider.value = a
        k = ALPHAS.index(a)
        if sweep["stop"][k].startswith("diverged"):
            assert len(src["alpha"].data["x"]) == 0 and len(src["shown"].data["alpha"]) == 0
            assert "diverged" in view.explorer.plots.band.title.text
            assert len(src["q"].data["f"]) == 0
        else:
            for edge in ("mean", "lower", "upper"):
                np.testing.assert_array_equal(src["alpha"].data[edge], sweep["bands"][k][edge])
            assert list(src["shown"].data["energy"]) == [sweep["energy"][k]]
            assert f"α = {a:g}" in view.explorer.plots.band.title.text
            np.testing.assert_allclose(src["q"].data["density"],
                                       point_picture(sweep, k, point)["q"]["density"])
    assert all(src[key].data is data for key, data in outlines.items())

    explorer = view.explorer
    generation = explorer.play()
    assert explorer.playing and view.alpha_slider.value == ALPHAS[0]
    for k in range(1, 6):
        explorer.advance(generation)
        assert view.alpha_slider.value == ALPHAS[k]
    explorer.toggle_play()                                  # Pause
    assert not explorer.playing
    explorer.advance(generation)                            # the paused play's next frame
    assert view.alpha_slider.value == ALPHAS[5]
    generation = explorer.play()                            # again, from the start
    for _ in range(len(ALPHAS)):
        explorer.advance(generation)
    assert view.alpha_slider.value == 1.0 and not explorer.playing     # ends at EP
    np.testing.assert_array_equal(src["alpha"].data["mean"], sweep["bands"][-1]["mean"])

    step = tours.ALPHA.steps[-1]
    tour_panel._set_page(view, step.page)
    assert tour_panel.page_values(view, step.page) == {"alpha_slider": 0.5, "pair_open": False}
    np.testing.assert_array_equal(src["alpha"].data["upper"],
                                  sweep["bands"][ALPHAS.index(0.5)]["upper"])

    generation = explorer.play()                    # the page closes while ▶ plays
    view.close()
    assert not explorer.playing and view.sweep is None
    drawn = {key: source.data for key, source in src.items()}
    explorer.advance(generation)
    view.alpha_slider.value = 0.25                  # nothing left to draw, no error
    assert all(src[key].data is data for key, data in drawn.items())


@pytest.mark.parametrize("model", ["sparse", pytest.param("markov", marks=pytest.mark.slow)])
def test_sparse_and_markov_sweeps_are_infer_runs_too(model):
    """The same program serves every model: on the sparse tour's problem (M = 5
    inducing points, FITC at α = 1, VFE as α → 0) and on a Markov GP, each stored α is
    ``bnlab.infer``'s run, and VI's energy (VFE) is the lowest."""
    if model == "sparse":
        s = LabSettings(**tours.SPARSE.settings(len(tours.SPARSE.steps) - 1))
    else:
        s = LabSettings(model="markov")
    p = build_problem(s)
    sweep = alpha_sweep(p, s)
    for alpha in (0.011, 0.5, 1.0):
        k = ALPHAS.index(alpha)
        r = _infer(p, s, "ep" if alpha == 1.0 else "pep", alpha)
        assert sweep["stop"][k] == "converged" and r.converged
        assert abs(sweep["energy"][k] - float(r.log_marginal)) < 1e-6
        mean, _ = r.predict(np.asarray(p.Xs))
        np.testing.assert_allclose(sweep["bands"][k]["mean"], mean, atol=1e-6)
    assert sweep["vi"]["energy"] <= min(sweep["energy"]) + 1e-9
