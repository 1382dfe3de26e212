"""GP regression where the prior's correlation is singular to float64's rounding (a
lengthscale far beyond the inputs' span) and the noise is tiny beside the variance:
refused naming the noise (``GP.check_conditioning``); just above the noise the refusal
names, every method's log p(y) is within the rounding bound of the evidence computed
with 60 digits."""
import re

import mpmath
import numpy as np
import pytest

import bnlab
from bnlab.model import CONDITIONING_MARGIN


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 8))
    return X, np.sin(2 * X) + 0.1 * rng.standard_normal(8)


def evidence_60_digits(X, y, variance, noise, lengthscale):
    """log N(y | 0, σ²C + σ_n²I), C the Matérn-5/2 correlation, in 60-digit arithmetic
    from the float64 inputs (which are exact binary numbers)."""
    with mpmath.workdps(60):
        n, root5 = len(X), mpmath.sqrt(5)
        K = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                r = root5 * abs(mpmath.mpf(X[i]) - mpmath.mpf(X[j])) / lengthscale
                K[i, j] = (variance * (1 + r + r * r / 3) * mpmath.exp(-r)
                           + (noise if i == j else 0))
        L = mpmath.cholesky(K)
        a = mpmath.lu_solve(L, mpmath.matrix([mpmath.mpf(v) for v in y]))
        return float(-sum(v * v for v in a) / 2 - sum(mpmath.log(L[i, i]) for i in range(n))
                     - n * mpmath.log(2 * mpmath.pi) / 2)


def _model(lengthscale, variance, noise):
    return bnlab.GP(bnlab.kernels.Matern52(lengthscale=lengthscale, variance=variance),
                    bnlab.likelihoods.Gaussian(noise=noise))


@pytest.mark.parametrize("lengthscale, variance", [(1e3, 1e20), (100.0, 1e12)])
def test_noise_below_the_correlations_rounding_is_refused_and_above_it_exact(
        regression, lengthscale, variance):
    """Before: (ℓ, σ²) = (1e3, 1e20) with σ_n² = 0.1 was NaN and 'diverged' for ep, vi
    and laplace (the factor of I + K/σ_n² failed); (100, 1e12) converged to a value
    rounding had moved. Above the named noise the log-determinant's rounding is at most
    1/``CONDITIONING_MARGIN`` nats (Nε over the smallest eigenvalue), and so is the
    methods' distance to the 60-digit evidence, up to a factor of 2."""
    X, y = regression
    with pytest.raises(ValueError, match=r"Gaussian noise 0\.1 is too small for float64") as e:
        bnlab.infer(_model(lengthscale, variance, 0.1), X, y, method="ep")
    noise = 2 * float(re.search(r"raise the noise above ([0-9.e+-]+)", str(e.value)).group(1))
    exact = evidence_60_digits(X, y, variance, noise, lengthscale)
    for method in ("ep", "vi", "laplace"):
        res = bnlab.infer(_model(lengthscale, variance, noise), X, y, method=method)
        assert res.converged
        assert res.log_marginal == pytest.approx(exact, abs=2 / CONDITIONING_MARGIN), method


def test_a_well_conditioned_correlation_is_not_refused_at_any_noise(regression):
    """ℓ = 10 on inputs spanning 6: the correlation's smallest eigenvalue (2e-7) is far
    above its rounding, so σ²/σ_n² = 1e16 is solved, to 1e-9 of the 60-digit evidence."""
    X, y = regression
    res = bnlab.infer(_model(10.0, 1e15, 0.1), X, y, method="ep")
    assert res.converged
    assert res.log_marginal == pytest.approx(evidence_60_digits(X, y, 1e15, 0.1, 10.0), abs=1e-9)


def _markov(lengthscale, noise):
    return bnlab.MarkovGP(bnlab.kernels.Matern52(lengthscale=lengthscale),
                          bnlab.likelihoods.Gaussian(noise=noise))


def test_a_markov_gp_refuses_noise_its_filter_cannot_resolve_and_below_is_exact():
    """``MarkovGP.check_conditioning``. Before, on these 20 points with σ² = 1 and
    σ_n² = 1e-14, EP returned NaN and 'diverged', and VI and Laplace 'converged' 13.3
    and 3.4 nats from the 60-digit evidence (the full GP: EP 3e-6 nats from it, VI
    2e-3). At the noise the refusal names, every method is within 8e-5 nats of it for
    ℓ from 0.1 to 10."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 20))
    y = np.sin(2 * X) + 0.1 * rng.normal(size=20)
    with pytest.raises(ValueError, match=r"^Gaussian noise 1e-14 is too small for the Markov "
                                         r".*raise the noise to 1e-07 or more, or use the full GP"):
        bnlab.infer(_markov(1.0, 1e-14), X, y, method="vi")
    for lengthscale in (0.1, 1.0, 10.0):
        exact = evidence_60_digits(X, y, 1.0, 1e-7, lengthscale)
        for method in ("ep", "vi", "laplace"):
            res = bnlab.infer(_markov(lengthscale, 1e-7), X, y, method=method)
            assert res.converged and not res.diverged
            assert res.log_marginal == pytest.approx(exact, abs=5e-4), (lengthscale, method)
