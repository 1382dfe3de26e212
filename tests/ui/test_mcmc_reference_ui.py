"""The lab's MCMC reference states log p(y) as BDMC's interval with a verdict: checked
against the closed-form evidence of Gaussian regression and against the run's own
numbers, resolved and unresolved."""
import html

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from bnlab.ui.compare_plots import _energy_limits, _log_z_line
from bnlab.ui.mcmc_ref import MCMCReference
from bnlab.ui.problem import build_problem
from bnlab.ui.settings import LabSettings


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(tmp_path))


@pytest.fixture(scope="module")
def problem():
    return build_problem(LabSettings(dataset="regression_1d", likelihood="gaussian", lik_scale=1.0,
                                     n=24))


def _exact(problem):
    m, p = problem.model, problem.params
    K = np.asarray(m.prior_covariance(p, jnp.asarray(problem.X), jnp.asarray(problem.X)))
    noise = float(np.asarray(p["likelihood"]["noise"]).reshape(-1)[0])
    y = np.asarray(problem.y).reshape(-1)
    return multivariate_normal(np.zeros(len(y)), K + noise * np.eye(len(y))).logpdf(y)


def test_interval_holds_the_closed_form_and_the_verdict_follows_the_tolerance(problem):
    ref = MCMCReference()
    ref.compute(problem, num_temps=200, num_chains=128, tolerance=10.0, start="prior")
    lo, hi = ref.interval
    assert lo < _exact(problem) < hi, (lo, _exact(problem), hi)
    text = ref.summary_html()
    assert f"[{lo:.3f}, {hi:.3f}]" in text and "Resolved: the interval is" in text
    assert "Not resolved" not in text and f"split-R̂ {ref.rhat:.3f}" in text
    assert ref.ess >= 100 and ref.next_schedule(problem) == 200     # nothing to refine
    truth = ref.truth_for(problem)
    assert truth["interval"] == (lo, hi) and truth["converged"]
    assert _energy_limits([], truth)[0] < lo and _energy_limits([], truth)[1] > hi
    span = _log_z_line(truth, 0.5, "#000")[0]
    assert list(span.data) == [lo, hi]                 # the band drawn is the interval

    strict = MCMCReference()
    strict.compute(problem, num_temps=200, num_chains=128, tolerance=1e-4, start="prior")
    text = strict.summary_html()
    assert "Not resolved: the interval is" in text and "again for 800 temperatures" in text
    assert strict.next_schedule(problem) == 800
    assert "(not resolved)" in _log_z_line(strict.truth_for(problem), 0.5, "#000")[2].text

    # annealed from EP's posterior, the exact one for a Gaussian likelihood, the interval
    # is the closed form (to the prior's jitter, 1e-9 · mean diag K) and resolved
    exact = MCMCReference()
    exact.compute(problem, num_temps=200, num_chains=128, tolerance=1e-4)
    lo, hi = exact.interval
    assert abs(lo - _exact(problem)) < 1e-6 and abs(hi - _exact(problem)) < 1e-6
    assert "from EP's posterior" in exact.summary_html() and exact.converged


def test_surfaces_page_counts_the_unresolved_cells():
    """The Surfaces page's line counts the cells whose interval is wider than the
    tolerance (the 'mcmc' scheme's converged flag, set by ``bnlab.surface``) and those
    whose upper estimate lies below VI's ELBO; all resolved is said plainly."""
    import xarray as xr

    from bnlab.ui.mcmc_notes import interval_note, mcmc_note
    vi = np.array([[-10.0, -9.0, -8.0], [-11.0, -10.0, -9.0]])
    upper = vi + np.array([[0.1, -0.2, 0.3], [0.1, 0.1, -0.1]])      # 2 cells below VI

    def ds(resolved):
        dims = ("scheme", "variance", "lengthscale")
        conv = np.stack([np.ones((2, 3), bool), resolved])
        return xr.Dataset({"log_marginal": (dims, np.stack([vi, upper - 0.1])),
                           "log_marginal_se": (dims, np.full((2, 2, 3), 0.01)),
                           "converged": (dims, conv),
                           "mcmc_lower": (dims[1:], upper - 0.1),
                           "mcmc_upper": (dims[1:], upper)},
                          coords={"scheme": ["vi", "mcmc"], "variance": [0.5, 1.0],
                                  "lengthscale": [0.5, 1.0, 2.0]},
                          attrs={"n_train": 50, "mcmc_tolerance": 0.05})
    some = np.array([[True, False, False], [True, True, False]])
    text = html.unescape(interval_note(ds(some), remedy="compute again"))
    assert "wider than 0.05 nats at 3 of 6 cells" in text and "bn-warn" in text
    assert "below VI's ELBO at 2 cells" in text and text.endswith("compute again.</span>")
    assert "at all 6 cells: resolved" in interval_note(ds(np.ones((2, 3), bool)))
    assert interval_note(ds(some).drop_vars(["mcmc_upper"])) == ""
    assert mcmc_note(ds(some)).startswith(interval_note(ds(some)))


def test_the_lower_bound_is_every_elbo_the_surface_holds():
    """The ELBO the notes hold MCMC against is that of any scheme whose record reports
    one (energy 'vfe'), not VI's by name: VI's quasi-Newton variant alone gives it, and
    with VI the higher of the two per cell (both are lower bounds on log p(y)); Power
    EP's energy is none; a cell not converged gives none."""
    import xarray as xr

    from bnlab.ui.mcmc_notes import elbo
    low = np.array([[-10.0, -9.0, -8.0], [-11.0, -10.0, -9.0]])
    high = low + np.array([[0.5, -0.5, 0.0], [1.0, -1.0, 0.0]])

    def ds(schemes, values, converged):
        dims = ("scheme", "variance", "lengthscale")
        return xr.Dataset({"log_marginal": (dims, np.stack(values)),
                           "converged": (dims, np.stack(converged))},
                          coords={"scheme": schemes, "variance": [0.5, 1.0],
                                  "lengthscale": [0.5, 1.0, 2.0]})
    yes, no = np.ones((2, 3), bool), np.array([[True, True, False], [True, True, True]])
    np.testing.assert_array_equal(elbo(ds(["vi_qn"], [low], [yes])), low)
    np.testing.assert_array_equal(elbo(ds(["vi", "vi_qn", "pep"], [low, high, high + 5],
                                          [yes, no, yes])),
                                  np.where(no, np.maximum(low, high), low))
    assert elbo(ds(["pep", "laplace"], [low, high], [yes, yes])) is None
    assert np.isnan(elbo(ds(["vi"], [low], [no]))[0, 2])


def test_surfaces_page_greys_the_cells_mcmc_cannot_order():
    """A cell is grey on the MCMC panel, and the dashed MCMC contour leaves it out,
    where MCMC's interval ([lower − 2 se, upper + 2 se]) is wider than the tolerance
    and than the approximations' spread there; a cell within tolerance, or whose
    interval is narrower than the spread, keeps its contour."""
    import xarray as xr

    from bnlab.ui.mcmc_notes import unsettled_cells
    from bnlab.ui.surface_plots import contour_layout
    laplace = np.array([[-10.5, -9.5, -8.5], [-11.0, -10.0, -9.0]])
    ep = laplace + np.array([[0.4, 0.4, 0.01], [0.4, 0.01, 0.4]])    # spread 0.4 or 0.01
    lower = ep + 0.05
    upper = lower + np.array([[0.3, 0.3, 0.3], [0.01, 0.3, 0.3]])     # widths +4 se
    within = np.array([[False, False, False], [True, False, False]])  # converged flag
    dims = ("scheme", "variance", "lengthscale")
    ds = xr.Dataset({"log_marginal": (dims, np.stack([laplace, ep, lower])),
                     "converged": (dims, np.stack([np.ones((2, 3), bool)] * 2 + [within])),
                     "diverged": (dims, np.zeros((3, 2, 3), bool)),
                     "mcmc_lower": (dims[1:], lower), "mcmc_upper": (dims[1:], upper),
                     "mcmc_lower_se": (dims[1:], np.full((2, 3), 0.01)),
                     "mcmc_upper_se": (dims[1:], np.full((2, 3), 0.01))},
                    coords={"scheme": ["laplace", "ep", "mcmc"], "variance": [0.5, 1.0],
                            "lengthscale": [0.5, 1.0, 2.0]},
                    attrs={"n_train": 1, "mcmc_tolerance": 0.05})
    # widths 0.34 (0.05 at the converged cell) against spreads 0.4, 0.4, 0.01 / 0.4, 0.01, 0.4
    expected = np.array([[False, False, True], [False, True, False]])
    np.testing.assert_array_equal(unsettled_cells(ds), expected)
    panels = contour_layout(ds, variable="log_marginal").values()
    mcmc_panel = [p for p in panels if any(e.group == "Unsettled" for e in p.values())]
    assert len(mcmc_panel) == 1
    grey = [e for e in mcmc_panel[0].values() if e.group == "Unsettled"][0]
    np.testing.assert_array_equal(np.isfinite(grey.dimension_values(2, flat=False)), expected)
    for p in panels:
        if p is mcmc_panel[0]:
            continue
        contours = [e for e in p.values() if type(e).__name__ == "Contours"]
        assert len(contours) == 2          # the panel's own, and MCMC's dashed one
