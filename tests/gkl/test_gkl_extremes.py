"""G-KL's constrained covariance structures for GP regression at a large prior variance
against the noise: refused beyond ``WHITENED_MAX_RATIO`` (``check_whitened_conditioning``),
in ``infer`` and at a surface's grid point; below it, a bound at or below the closed-form
log p(y) and close to it. And G-KL on probit classification at a huge prior variance."""
import sys
from pathlib import Path

import numpy as np
import pytest

import bnlab
from bnlab.gkl.gp import WHITENED_MAX_RATIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from test_extremes_gaussian import gaussian_log_evidence  # noqa: E402
from test_extremes_probit import _overlapping, _probit, exact_log_evidence  # noqa: E402

STRUCTURES = [("banded", {"band": 2}), ("chevron", {"rank": 2}),
              ("factor_analysis", {"rank": 2}), ("subspace", {"rank": 2})]


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 10))
    return X, np.sin(2 * X) + 0.1 * rng.standard_normal(10)


def _model(variance, noise=0.1):
    return bnlab.GP(bnlab.kernels.Matern52(variance=variance),
                    bnlab.likelihoods.Gaussian(noise=noise))


@pytest.mark.parametrize("covariance, options", STRUCTURES)
def test_a_whitened_structure_beyond_its_ratio_is_refused(regression, covariance, options):
    """Before: at σ² = 1e12, σ_n² = 0.1 the subspace structure stopped 'converged' at
    −5e13 where log p(y) = −138.5, and at 1e20 the others at −1.8e7 … −5.6e9."""
    X, y = regression
    with pytest.raises(ValueError, match=rf"Gaussian noise 0\.1 is too small for G-KL's "
                                         rf"'{covariance}' covariance"):
        bnlab.infer(_model(1e12), X, y, method="gkl", covariance=covariance, **options)
    full = bnlab.infer(_model(1e12), X, y, method="gkl", covariance="full")
    assert full.converged
    assert full.log_marginal == pytest.approx(gaussian_log_evidence(X, y, 1e12, 0.1), rel=1e-8)


def test_a_surface_names_the_grid_point_beyond_the_ratio(regression):
    X, y = regression
    with pytest.raises(ValueError, match=r"at the grid point .*variance = 1e\+12.*'banded'"):
        bnlab.surface(_model(1.0), X, y, methods=("gkl",), grid={
            "lengthscale": [0.5, 1.0], "variance": [1.0, 1e12]},
            method_options={"gkl": {"covariance": "banded", "band": 2}})


@pytest.mark.parametrize("covariance, options", STRUCTURES)
def test_within_the_ratio_each_structure_reaches_the_closed_form(regression, covariance,
                                                                 options):
    """At σ²/σ_n² = WHITENED_MAX_RATIO / 100 (1e9), given the iterations it needs: a
    lower bound (a Gaussian q), within 1e-4 nats of log p(y) (the posterior is the
    likelihood's, nearly independent per point, which every family holds)."""
    X, y = regression
    variance = WHITENED_MAX_RATIO / 100 * 0.1
    res = bnlab.infer(_model(variance), X, y, method="gkl", covariance=covariance,
                      max_iters=5000, **options)
    exact = gaussian_log_evidence(X, y, variance, 0.1)
    assert res.converged
    assert exact - 1e-4 <= res.log_marginal <= exact + 1e-9 * abs(exact)


def test_probit_beyond_the_elbos_variance_is_refused_and_below_it_a_bound():
    """G-KL's bound takes E_q[log Φ(yf)] by the same Gauss–Hermite rule as VI's ELBO,
    blind to the wrong-side tail at a huge variance, and is refused beside it
    (``Bernoulli.check_method``): before, at σ² = 1e12 it stopped at −47 812 where
    log p(y) = −9.33. At σ² = 10 it converges below the exact evidence (Genz's orthant
    probability), 0.074 nats under it on these ten points."""
    X, y = _overlapping()
    with pytest.raises(ValueError, match=r"^prior variance 1e\+12 is too large for 'gkl' with "
                                         r"a probit likelihood"):
        bnlab.infer(_probit(1e12), X, y, method="gkl")
    res = bnlab.infer(_probit(10.0), X, y, method="gkl")
    exact = exact_log_evidence(X, y, 10.0)
    assert res.converged and exact - 0.1 < res.log_marginal < exact
