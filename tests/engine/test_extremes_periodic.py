"""The periodic kernel at extreme periods, lengthscales and variances: GP regression
against log N(y | 0, σ²C + σ_n²I) with C computed from the exact phase of the given
floats (Python's fractions), or a ValueError naming the period where the inputs span
more periods than float64 resolves."""
import math
from fractions import Fraction

import numpy as np
import pytest
from test_extremes_gaussian import assert_cells_converged_to

import bnlab


@pytest.fixture(scope="module")
def regression():
    """Ten points, two of them exactly two periods of 0.5 apart (0.25 and 1.25)."""
    rng = np.random.default_rng(0)
    X = np.sort(np.concatenate([rng.uniform(-3, 3, 8), [0.25, 1.25]]))
    return X, np.sin(2 * X) + 0.1 * rng.standard_normal(10)


def periodic_log_evidence(X, y, lengthscale, variance, period, noise):
    """log N(y | 0, σ²C + σ_n²I), C_ij = exp(−2 sin²(π f_ij)/ℓ²) with f_ij the exact
    distance of (x_i − x_j)/p to the nearest integer (rational arithmetic on the
    floats), factored at the scale max(σ², σ_n²)."""
    N = len(X)
    C = np.eye(N)
    for i in range(N):
        for j in range(N):
            t = (Fraction(X[i]) - Fraction(X[j])) / Fraction(period)
            C[i, j] = math.exp(-2 * (math.sin(math.pi * float(t - round(t))) / lengthscale) ** 2)
    s = max(variance, noise)
    L = np.linalg.cholesky((variance / s) * C + (noise / s) * np.eye(N))
    a = np.linalg.solve(L, y / math.sqrt(s))
    return (-0.5 * a @ a - np.log(np.diag(L)).sum()
            - 0.5 * N * (math.log(s) + math.log(2 * math.pi)))


CASES = [(1e-3, 0.3, v) for v in (1e-150, 1.0, 1e150)] + [(1e-3, 0.5, 1.0),
    (0.3, 1e-6, 1.0), (1e-3, 1e-4, 1.0), (0.3, 0.3, 1e-150), (0.3, 0.3, 1e150),
    (1e-100, 1e100, 1.0), (1e100, 1e100, 1.0), (1e100, 0.5, 1.0), (1e100, 1e-100, 1.0)]


@pytest.mark.parametrize("method", ["ep", "laplace", "vi"])
def test_periodic_regression_is_the_closed_form_at_extreme_scales(regression, method):
    """Within the phase check (``Periodic.check_inputs``) every method is the closed form,
    ℓ and p from 1e-100 to 1e100, σ² from 1e-150 to 1e150 (float64's sine reduces
    π(x − x')/p ≈ 1e100 exactly; what it cannot know is the phase of a rounded
    quotient: the cases the next test refuses)."""
    X, y = regression
    wrong = []
    for lengthscale, period, variance in CASES:
        model = bnlab.GP(bnlab.kernels.Periodic(lengthscale=lengthscale, variance=variance,
                                                period=period),
                         bnlab.likelihoods.Gaussian(noise=0.1))
        res = bnlab.infer(model, X, y, method=method)
        exact = periodic_log_evidence(X, y, lengthscale, variance, period, 0.1)
        if not (res.converged and abs(res.log_marginal - exact) <= 1e-6 * abs(exact)):
            wrong.append((lengthscale, period, variance, res.converged, res.log_marginal, exact))
    assert wrong == []


@pytest.mark.parametrize("period, lengthscale", [(1e-9, 1.0), (1e-300, 1.0), (0.5, 1e-100)])
def test_phases_float64_cannot_resolve_are_refused(regression, period, lengthscale):
    """float64 knows t = (x − x')/p to ε|t|, and the correlation moves by up to
    min(3.8/ℓ, 2π/ℓ²) per period of phase: inputs spanning 5e9 periods (log p(y) was off
    by 4e-6 relative at 6e9 periods, 7e-4 at 6e12, NaN at 6e300), or ℓ = 1e-100 at any
    period (a correlation 0 or 1 decided by the rounding: at p = 1e-6 the pair 1.0
    apart read t = 1e6 exactly and correlation 1, where t = 1/fl(1e-6) misses an
    integer by 5e-11 and the correlation is 0), are refused naming both, in ``infer``
    and at a surface's grid point."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Periodic(period=period, lengthscale=lengthscale),
                     bnlab.likelihoods.Gaussian(0.1))
    refusal = rf"params\['kernel'\]\[0\]: period {period:g} and lengthscale {lengthscale:g} "
    with pytest.raises(ValueError, match=r"^" + refusal + r"against inputs spanning .* periods"):
        bnlab.infer(model, X, y, method="ep")
    model = bnlab.GP(bnlab.kernels.Periodic(period=1.0), bnlab.likelihoods.Gaussian(0.1))
    with pytest.raises(ValueError, match=rf"^at the grid point period = {period:g}, "
                                         rf"lengthscale = {lengthscale:g}: {refusal}"):
        bnlab.surface(model, X, y, methods=["ep"],
                      grid={"period": [period, 1.0], "lengthscale": [lengthscale, 1.0]})


def test_periodic_surface_cells_are_the_closed_form(regression):
    """A surface over period 1e-100…0.5 × lengthscale 1e50…1e100 (corners that pass the
    phase check): every EP cell is the closed form."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Periodic(period=0.5), bnlab.likelihoods.Gaussian(0.1))
    periods, lengthscales = [1e-100, 0.5], [1e50, 1e100]
    cells = bnlab.surface(model, X, y, methods=["ep"],
                          grid={"period": periods, "lengthscale": lengthscales}).sel(scheme="ep")
    assert_cells_converged_to(cells, periods, lengthscales, lambda period, lengthscale:
                              periodic_log_evidence(X, y, lengthscale, 1.0, period, 0.1))


def test_test_inputs_are_checked_with_the_training_inputs(regression):
    """A prediction reads the phase between each test input and every training input:
    p = 1e-3 passes on training inputs spanning 6 (6e3 periods) but a test input at
    1e7 spans 1e10 periods, where the rounding decides the correlation. Refused naming
    the period, in ``predict``, ``log_predictive``, the live ``Stepper.predict`` and at a
    surface's grid point (before, each returned a number)."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Periodic(period=1e-3), bnlab.likelihoods.Gaussian(0.1))
    far, refusal = np.array([0.0, 1e7]), r"period 0\.001 and lengthscale 1 against inputs"
    res = bnlab.infer(model, X, y, method="ep")
    res.predict(X[:3])                                        # near the training inputs
    with pytest.raises(ValueError, match=refusal):
        res.predict(far)
    with pytest.raises(ValueError, match=refusal):
        res.log_predictive(far, np.zeros(2))
    stepper = bnlab.Stepper(model, X, y, "ep")
    with pytest.raises(ValueError, match=refusal):
        stepper.predict(stepper.init(), far)
    with pytest.raises(ValueError, match=r"at the grid point lengthscale = 0\.5, variance = "
                                         r"0\.5: params\['kernel'\]\[0\]: period 0\.001"):
        bnlab.surface(model, X, y, methods=["ep"], X_test=far, y_test=np.zeros(2),
                      grid={"lengthscale": [0.5, 1.0], "variance": [0.5, 1.0]})
