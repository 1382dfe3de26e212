"""Split-R̂ and bulk ESS (ArviZ's definitions, Vehtari et al. 2021) against a case
worked by hand, the AR(1) process's known effective sample size, and the β = 1 chains
of the MCMC reference."""
import numpy as np
import pytest
from scipy.special import ndtri

import bnlab
from bnlab.studies.chain_diagnostics import bulk_ess, ess, rhat, split_chains, summary
from bnlab.studies.mcmc import ais


def test_rhat_of_a_case_worked_by_hand():
    """Two chains [1, 2, 3, 4] and [5, 6, 7, 8]: split, they are [1, 2], [3, 4], [5, 6],
    [7, 8], whose pooled ranks are the values themselves, so z_r = Φ⁻¹((r − 3/8) / 8.25).
    Bulk: W = mean of (z_a − z_b)² / 2 over the pairs, B/N = variance of the pair means
    (N = 2), R̂ = √((W/2 + B/N) / W). Tail: |θ − 4.5| = 3.5, 2.5, 1.5, .5, .5, 1.5, 2.5,
    3.5, tied in pairs, so ranks 7.5, 5.5, 3.5, 1.5 | 1.5, 3.5, 5.5, 7.5: the split
    chains' ranks are (7.5, 5.5), (3.5, 1.5), (1.5, 3.5), (5.5, 7.5)."""
    draws = np.array([[1.0, 2, 3, 4], [5, 6, 7, 8]])
    np.testing.assert_array_equal(split_chains(draws), [[1, 2], [5, 6], [3, 4], [7, 8]])

    def by_hand(rank_pairs):
        z = ndtri((np.asarray(rank_pairs) - 0.375) / 8.25)
        W = np.mean([(a - b) ** 2 / 2 for a, b in z])
        means = z.mean(axis=1)
        between = np.sum((means - means.mean()) ** 2) / 3          # B / N
        return np.sqrt((W / 2 + between) / W)

    bulk = by_hand([[1, 2], [3, 4], [5, 6], [7, 8]])
    tail = by_hand([[7.5, 5.5], [3.5, 1.5], [1.5, 3.5], [5.5, 7.5]])
    assert bulk > 2.5 > tail                                           # the chains disagree
    assert rhat(draws) == pytest.approx(max(bulk, tail), rel=1e-12)


def test_ess_of_independent_and_of_ar1_draws():
    """Independent draws: ESS ≈ the number of draws and R̂ ≈ 1. AR(1) with φ = 0.8:
    ESS = S (1 − φ) / (1 + φ) (the integrated autocorrelation time (1 + φ)/(1 − φ)),
    within 15 % on 4 × 5000 draws. Chains stuck at different levels: R̂ far above 1.
    Fails for an ESS without the autocorrelation sum, or an R̂ without the between-
    chain variance."""
    rng = np.random.default_rng(0)
    iid = rng.normal(size=(4, 2000))
    assert abs(rhat(iid) - 1) < 0.01
    assert bulk_ess(iid) == pytest.approx(8000, rel=0.1)
    phi, x = 0.8, np.zeros((4, 5000))
    x[:, 0] = rng.normal(size=4) / np.sqrt(1 - phi ** 2)
    e = rng.normal(size=x.shape)
    for t in range(1, x.shape[1]):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    theory = x.size * (1 - phi) / (1 + phi)
    assert ess(x) == pytest.approx(theory, rel=0.15)
    assert bulk_ess(x) == pytest.approx(theory, rel=0.15)
    stuck = rng.normal(size=(4, 500)) + np.arange(4)[:, None] * 3
    assert rhat(stuck) > 1.5
    with pytest.raises(ValueError, match="at least 4 draws"):
        rhat(np.ones((2, 3)))
    with pytest.raises(ValueError, match="trace must be"):
        summary(np.ones((5, 2)))


def test_reference_reports_the_chains_diagnostics():
    """The MCMC reference's β = 1 chains (64 chains × 200 ESS transitions on a small
    Gaussian-likelihood problem) have R̂ near 1 (the worst of 17 traced quantities; its
    excess over 1 is about (τ − 1) / 2N for N = 100 draws per split half and an
    autocorrelation time τ of about 10 transitions) and a bulk ESS of hundreds; with 8
    transitions the same chains' R̂ is clearly worse."""
    ds = bnlab.datasets.load("regression_1d", n=12)
    model = bnlab.GP(bnlab.kernels.RBF(lengthscale=0.7, variance=1.3),
                     bnlab.likelihoods.Gaussian(noise=0.5))
    long = ais(model, ds.X, ds.y, num_temps=50, num_chains=64, posterior_steps=200,
               use_cache=False)
    assert 1.0 <= long.rhat < 1.1 and 500 < long.bulk_ess <= 64 * 200 * 1.2
    short = ais(model, ds.X, ds.y, num_temps=50, num_chains=64, posterior_steps=8,
                use_cache=False)
    assert short.rhat > long.rhat + 0.1
