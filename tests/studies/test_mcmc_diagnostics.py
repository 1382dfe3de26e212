"""AIS's own error bars: the effective sample size and the standard error of log Ẑ it
reports, checked against repeated independent runs (the spread over seeds)."""
import numpy as np
import pytest

import bnlab
from bnlab.studies.mcmc import ais, effective_sample_size


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(tmp_path))


def test_effective_sample_size_limits():
    """Kong's ESS: C for equal weights, 1 for one chain carrying all the weight, and
    (Σw)²/Σw² computed stably from log weights far outside exp's range."""
    assert effective_sample_size(np.full(64, -1e4)) == pytest.approx(64)
    assert effective_sample_size(np.r_[0.0, np.full(63, -800.0)]) == pytest.approx(1.0)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    assert effective_sample_size(np.log(w) - 900) == pytest.approx(w.sum() ** 2 / (w ** 2).sum())


def test_reported_standard_error_and_ess_match_the_spread_over_seeds():
    """Eight independent AIS runs on a small probit problem (ESS 40 or more of 128
    chains each): the standard deviation of their log Ẑ lies within a factor of two of
    the standard error the runs report (both ways: an error far too small or far too
    large fails), every run is within 3 reported errors of the mean of the others (with
    eight runs, a 2σ bound is missed by chance for one of them about a third of the
    time), and
    the ESS agrees with the spread of the weights it summarises (se² ≈ (C/ESS − 1)/C,
    the delta method)."""
    ds = bnlab.datasets.load("classification_1d", n=30)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.5, variance=2.0),
                     bnlab.likelihoods.Bernoulli("probit"))
    C = 128
    runs = [ais(model, ds.X, ds.y, num_temps=300, num_chains=C, seed=s, use_cache=False,
                direction="forward")
            for s in range(8)]
    log_z = np.array([r.log_z for r in runs])
    se = np.array([r.log_z_se for r in runs])
    ess = np.array([r.ess for r in runs])
    assert (ess >= 40).all() and (ess <= C).all(), ess
    spread = log_z.std(ddof=1)
    assert 0.5 * se.mean() < spread < 2.0 * se.mean(), (spread, se)
    for k in range(len(runs)):
        others = np.delete(log_z, k).mean()
        assert abs(log_z[k] - others) < 3 * np.hypot(se[k], spread / np.sqrt(len(runs) - 1))
    np.testing.assert_allclose(se, np.sqrt((C / ess - 1) / C), rtol=0.05)
