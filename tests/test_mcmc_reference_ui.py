"""The lab's MCMC reference states log p(y) as BDMC's interval with a verdict: checked
against the closed-form evidence of Gaussian regression and against the run's own
numbers, resolved and unresolved."""
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from bnlab.ui.compare import _energy_limits, _log_z_line
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
    ref.compute(problem, num_temps=200, num_chains=128, tolerance=10.0)
    lo, hi = ref.interval
    assert lo < _exact(problem) < hi, (lo, _exact(problem), hi)
    text = ref.summary_html()
    assert f"[{lo:.3f}, {hi:.3f}]" in text and "resolved: the interval is" in text
    assert "not resolved" not in text and f"split-R̂ {ref.rhat:.3f}" in text
    assert ref.ess >= 100 and ref.next_schedule(problem) == 200     # nothing to refine
    truth = ref.truth_for(problem)
    assert truth["interval"] == (lo, hi) and truth["converged"]
    assert _energy_limits([], truth)[0] < lo and _energy_limits([], truth)[1] > hi
    span = _log_z_line(truth, 0.5, "#000")[0]
    assert list(span.data) == [lo, hi]                 # the band drawn is the interval

    strict = MCMCReference()
    strict.compute(problem, num_temps=200, num_chains=128, tolerance=1e-4)
    text = strict.summary_html()
    assert "not resolved: the interval is" in text and "again for 800 temperatures" in text
    assert strict.next_schedule(problem) == 800
    assert "(not resolved)" in _log_z_line(strict.truth_for(problem), 0.5, "#000")[2].text
