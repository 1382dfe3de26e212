"""GP regression at extreme scales for the site methods beside EP: each one's log p(y)
equals the closed form log N(y | 0, σ²C + σ_n²I) to 1e-6 and the run converged, or
the call raises a ValueError naming the noise float64 cannot resolve for it. Every
method is exact for a Gaussian likelihood (its fixed point is the posterior), so the
closed form is each one's answer.

The cases move one scale at a time (the noise, the prior variance, the inputs with
the lengthscale, the targets with the variance and noise: the last two are the same
problem in other units) far from 1."""
import math

import numpy as np
import pytest
from test_extremes_gaussian import gaussian_log_evidence

import bnlab

CASES = [  # (x scale, y scale, lengthscale, variance, noise)
    (1, 1, 1, 1, 0.1),
    (1, 1, 1, 1, 1e-12), (1, 1, 1, 1, 1e-50), (1, 1, 1, 1, 1e2), (1, 1, 1, 1, 1e50),
    (1, 1, 1, 1, 1e150),
    (1, 1, 1, 1e-150, 1e-151), (1, 1, 1, 1e-20, 1e-21), (1, 1, 1, 1e20, 0.1),
    (1, 1, 1, 1e150, 0.1),
    (1e-100, 1, 1e-100, 1, 0.1), (1e100, 1, 1e100, 1, 0.1),
    (1, 1e-100, 1, 1e-200, 1e-201), (1, 1e100, 1, 1e200, 1e199),
]
#: methods whose energy or iteration float64 cannot resolve beyond a noise (refusals
#: are the likelihood's ``check_energy`` and ``check_method``)
QUASI_NEWTON = ["laplace_qn", "vi_qn", "pep_qn", "pl2_qn"]
SLOW = pytest.mark.slow      # ≈ 3 s of compilation each; one of each family runs fast
LINEARISATION = ["pl", *(pytest.param(m, marks=SLOW) for m in ("pl2", "pl2_gn", "pl2_riemann"))]
FIXED_STEP = ["taylor", *(pytest.param(m, marks=SLOW) for m in ("vi_gn", "vi_riemann",
                                                                 "heuristic"))]


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 8))
    return X, np.sin(2 * X) + 0.1 * rng.standard_normal(8)


def _wrong_cells(method, X, y):
    """The cases where ``method`` is neither exact and converged nor refused naming the
    noise, as (case, what happened)."""
    wrong = []
    for x_scale, y_scale, ell, var, noise in CASES:
        model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=ell, variance=var),
                         bnlab.likelihoods.Gaussian(noise=noise))
        Xs, ys = X * x_scale, y * y_scale
        exact = gaussian_log_evidence(Xs, ys, var, noise, ell)
        case = (x_scale, y_scale, ell, var, noise)
        try:
            res = bnlab.infer(model, Xs, ys, method=method)
        except ValueError as error:
            if not str(error).startswith(f"Gaussian noise {noise:.3g} is too small"):
                wrong.append((case, str(error)))
            continue
        if not (res.converged and math.isfinite(res.log_marginal)
                and abs(res.log_marginal - exact) <= 1e-6 * abs(exact)):
            wrong.append((case, res.converged, res.diverged, res.log_marginal, exact))
    return wrong


@pytest.mark.parametrize("method", QUASI_NEWTON)
def test_quasi_newton_is_exact_or_refused_at_every_scale(regression, method):
    """B₀ is the surrogate's curvature at the start (``methods.quasi_newton``). With
    BayesNewton's −100·I, 27 of these 56 cells were wrong: 'converged' 10–2000 nats
    off (laplace_qn at σ_n² = 1e-12: −3.24 where log p(y) = −6.01; at σ_n² = 1e50:
    −481.6 where it is −467.9), 'diverged' or stopped at max_iters elsewhere (pl2_qn
    at σ_n² = 1e-50: +1.4e35). pep_qn is refused from σ²/σ_n² = 1e4
    (``Gaussian.check_method``)."""
    assert _wrong_cells(method, *regression) == []


@pytest.mark.parametrize("method", LINEARISATION)
def test_posterior_linearisation_is_exact_or_refused_at_every_scale(regression, method):
    """A Gaussian likelihood's statistical linear regression is the likelihood itself
    (``Gaussian.exact_linearisation``). From the SLR moments, Ω = S − QᵀC⁻¹Q cancelled:
    at σ_n² = 1e-50 PL gave −17.3 and PL2-GN −3.8e16 where log p(y) = −6.01, and PL2's
    Hessian through Ω overflowed at σ² = 1e-150 ('diverged' at the first step); 18 of
    these 56 cells were wrong."""
    assert _wrong_cells(method, *regression) == []


@pytest.mark.parametrize("method", FIXED_STEP)
def test_fixed_step_methods_converge_only_once_the_energy_settles(regression, method):
    """Unmixed, un-searched iterations converge linearly; under noise 1e-12 a mean
    within the site test's 1e-8 of its fixed point still costs the energy 1e-4 nats
    (they 'converged' at −6.014750 where log p(y) = −6.014642): convergence waits
    for the energy too (``engine.state.energy_settled``)."""
    assert _wrong_cells(method, *regression) == []


def test_laplace_qn_at_a_vanishing_prior_variance_reaches_the_prior_limit():
    """Probit at σ² = 1e-6: every f_n is within 1e-3 of 0, so log p(y) = N log Φ(0) up
    to O(Nσ²) (here 1e-6). BayesNewton's B₀ = −100·I is 160 times the probit curvature
    at 0 (−2/π) and the secant pairs, with steps of 1e-6, never repaired it: laplace_qn
    'converged' at −6.931724, 2.5e-4 nats below the limit −6.931472."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=10)
    y = np.where(X + 0.5 * rng.normal(size=10) > 0, 1.0, -1.0)
    model = bnlab.GP(bnlab.kernels.Matern52(variance=1e-6), bnlab.likelihoods.Bernoulli("probit"))
    res = bnlab.infer(model, X, y, method="laplace_qn")
    assert res.converged
    assert res.log_marginal == pytest.approx(10 * math.log(0.5), abs=1e-5)
