"""Property: over scales 1e-150…1e150 for the inputs X, the targets y, the lengthscale
ℓ, the prior variance σ² and the Gaussian noise σ_n², EP's log p(y) (and, in ``-m
slow``, the quasi-Newton, linearisation and fixed-step methods') is finite and
equals the closed form log N(y | 0, K + σ_n²I) to 1e-6, or the call raises a
ValueError naming the input float64 cannot hold. The fast suite draws a few
derandomised examples; ``-m slow`` draws many more.

Only problems whose K + σ_n²I has a condition number κ ≤ 1e6 are drawn: float64's
rounding of K's entries (ε σ²) moves log p(y) by about κε relative, so beyond that
neither the engine nor a numpy closed form is exact. (Inputs within 1e-2 lengthscales
of each other at σ²/σ_n² ≥ 1e10 are such problems; there EP is 1e-5 off, or diverges
with a NaN energy once C's computed eigenvalues go negative: not yet refused.)"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import bnlab

N = 8
_BASE = np.random.default_rng(7)
_X = np.sort(_BASE.uniform(-3, 3, N))
_Y = np.sin(2 * _X) + 0.1 * _BASE.standard_normal(N)
_Y = _Y / np.max(np.abs(_Y))          # |y| ≤ 10^log_y: 1e150 at most (bnlab.MAX_TARGET)

SCALE = st.floats(-150, 150)


def _correlation(X, lengthscale):
    """Matérn-5/2 correlation in numpy, 0 once √5 d/ℓ passes 745 (where e^−r underflows,
    before r² overflows)."""
    d = np.abs(X[:, None] - X[None, :])
    r = math.sqrt(5) * np.minimum(d / lengthscale, 1e3)
    return np.where(r < 745, (1 + r + r * r / 3) * np.exp(-np.minimum(r, 745)), 0.0)


def _closed_form(X, y, lengthscale, variance, noise):
    """(log N(y | 0, σ²C + σ_n²I), κ) from the eigendecomposition at the scale s =
    max(σ², σ_n²): (σ²/s)C + (σ_n²/s)I = Q diag(λ) Qᵀ with λ = (σ²/s)c + σ_n²/s, c ≥ 0
    the eigenvalues of C (inputs far inside one lengthscale give C = 11ᵀ, where a
    Cholesky factor fails), κ = max λ / min λ. The value is None where it leaves
    float64."""
    c, Q = np.linalg.eigh(_correlation(X, lengthscale))
    s = max(variance, noise)
    lam = (variance / s) * np.maximum(c, 0.0) + noise / s
    top = np.max(np.abs(y))
    z = (Q.T @ (y / top)) ** 2 / lam                 # y's scale taken out: no overflow
    log_quad = 2 * math.log(top) - math.log(s) + math.log(np.sum(z))
    kappa = lam.max() / lam.min()
    if log_quad > math.log(1e308):
        return None, kappa
    return (-0.5 * math.exp(log_quad) - 0.5 * np.sum(np.log(lam))
            - 0.5 * N * (math.log(s) + math.log(2 * math.pi))), kappa


def _refusal_is_due(message, method, y, var, noise, exact):
    """Whether ``message`` refuses a problem float64 cannot resolve for ``method``, and
    names its input: the noise against the prior variance (every method), the targets
    whose log p(y) leaves float64, the noise against the targets' rounding for the
    energies of the posterior mean (N(ε max|y|)²/σ_n² > 1e-6 nats), and the noise against
    the prior variance for pep_qn's secant cavity (σ²/σ_n² > 1e4)."""
    beyond = exact is None or exact < -1e300 * (1 - 1e-6)
    if message.startswith("y reaches"):
        return beyond
    if message.startswith(f"Gaussian noise {noise:.3g} against a prior"):
        return var / noise > 1e300
    if not message.startswith(f"Gaussian noise {noise:.3g} is too small"):
        return False
    with np.errstate(over="ignore"):
        rounding = N * (np.finfo(float).eps * np.max(np.abs(y))) ** 2 / noise
    energy = bnlab.methods.REGISTRY[method].energy
    return (energy in ("laplace", "vfe") and rounding > 1e-6
            or method == "pep_qn" and var / noise > 1e4)


def _check(log_x, log_y, log_ell, log_var, log_noise, method="ep"):
    X, y = _X * 10.0**log_x, _Y * 10.0**log_y
    ell, var, noise = 10.0**log_ell, 10.0**log_var, 10.0**log_noise
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=ell, variance=var),
                     bnlab.likelihoods.Gaussian(noise=noise))
    exact, kappa = _closed_form(X, y, ell, var, noise)
    assume(kappa <= 1e6)
    try:
        res = bnlab.infer(model, X, y, method=method)
    except ValueError as error:
        assert _refusal_is_due(str(error), method, y, var, noise, exact), str(error)
        return
    assert exact is not None, f"log p(y) leaves float64, {method} gave {res.log_marginal}"
    assert res.converged and np.isfinite(res.log_marginal)
    assert res.log_marginal == pytest.approx(exact, rel=1e-6)


@settings(max_examples=12, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(SCALE, SCALE, SCALE, SCALE, SCALE)
def test_gaussian_ep_is_exact_or_refused_at_every_scale(log_x, log_y, log_ell, log_var,
                                                        log_noise):
    _check(log_x, log_y, log_ell, log_var, log_noise)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCALE, SCALE, SCALE, SCALE, SCALE)
def test_gaussian_ep_is_exact_or_refused_at_every_scale_many(log_x, log_y, log_ell, log_var,
                                                             log_noise):
    _check(log_x, log_y, log_ell, log_var, log_noise)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["laplace_qn", "vi_qn", "pep_qn", "pl2_qn", "pl", "pl2",
                                    "taylor", "vi_gn"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCALE, SCALE, SCALE, SCALE, SCALE)
def test_other_site_methods_are_exact_or_refused_at_every_scale(method, log_x, log_y, log_ell,
                                                               log_var, log_noise):
    """The quasi-Newton, linearisation and fixed-step forms, each exact for a Gaussian
    likelihood (``test_extremes_methods`` checks them on a fixed grid in the fast suite)."""
    _check(log_x, log_y, log_ell, log_var, log_noise, method)
