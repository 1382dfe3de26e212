"""Laplace at large Poisson counts: the mode of Ψ(f) = log p(y|f) − ½fᵀK⁻¹f, reached by
Newton steps that a backtracking line search on Ψ keeps ascending
(``bnlab.engine.line_search``), against the closed form for one site (Lambert W, in
mpmath) and scipy's trust-region Newton on Ψ for several. Without the
search, a count of 1e3 under N(0, 1) was still at f ≈ 300 after 200 iterations (energy
−3e114, 'not converged'), and from 1e4 on the first step overflowed ('diverged');
a count of 100 took 95 iterations."""
import math

import mpmath
import numpy as np
import pytest
from scipy import optimize, special

import bnlab


def _one_site_laplace(count, variance):
    """Laplace's log p(y) for one count under N(0, σ²): the mode solves y − eᶠ − f/σ² = 0,
    i.e. f̂ = yσ² − u with u = W(σ² e^{yσ²}) (then e^f̂ = u/σ²), and
    log q(y) = y f̂ − e^f̂ − log y! − f̂²/(2σ²) − ½ log(1 + σ² e^f̂), in mpmath with 60
    digits beyond those that cancel (u's rounding enters y f̂ as y·δu)."""
    with mpmath.workdps(60 + 2 * int(math.log10(count * max(variance, 1.0)))):
        y, v = mpmath.mpf(count), mpmath.mpf(variance)
        u = mpmath.lambertw(v * mpmath.exp(y * v)).real
        f, rate = y * v - u, u / v
        value = (y * f - rate - mpmath.loggamma(y + 1) - f * f / (2 * v)
                 - mpmath.log1p(v * rate) / 2)
        return float(value)


@pytest.mark.parametrize("variance", [1e-2, 1.0, 30.0])
@pytest.mark.parametrize("count", [100, 1e3, 1e4, 1e6, 1e12, 1e20])
@pytest.mark.parametrize("method", ["laplace", "laplace_gn", "laplace_riemann"])
def test_laplace_at_large_counts_is_the_closed_form(method, count, variance):
    """Every Laplace form whose J is the exact gradient has Ψ's mode as its fixed point
    and the exact Hessian there (Gauss–Newton's eᶠ is Poisson's), so its energy is the
    Lambert-W closed form, to 1e-8 relative (the convergence test's tol). From about
    1e16 on the log density's terms y f and log y! used to cancel to rounding noise (at
    1e20, to noise of size 1e5)."""
    model = bnlab.GP(bnlab.kernels.Matern52(variance=variance), bnlab.likelihoods.Poisson())
    res = bnlab.infer(model, np.zeros(1), np.array([count]), method=method)
    assert res.converged and not res.diverged
    assert res.log_marginal == pytest.approx(_one_site_laplace(count, variance), rel=1e-8)


def test_newton_at_a_count_of_100_converges_quadratically():
    """From f = 0 the first damped step lands at f ≈ 33 (Ψ ≈ −2e14); the old iteration
    came down from there one unit of f per step and took 95 iterations; shortened to
    the line search's Armijo point, Newton converges in a few more than its damping
    needs (13)."""
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Poisson())
    res = bnlab.infer(model, np.zeros(1), np.array([100.0]), method="laplace")
    assert res.converged and res.n_iters <= 25


def _matern52(X, lengthscale, variance):
    r = math.sqrt(5) * np.abs(X[:, None] - X[None, :]) / lengthscale
    return variance * (1 + r + r * r / 3) * np.exp(-r)


def _laplace_by_scipy(X, y, lengthscale, variance):
    """Ψ's mode by scipy's trust-region Newton (exact gradient and Hessian of Ψ in
    numpy), then log q(y) = Ψ(f̂) − ½ log|I + W½KW½| (R&W eq. 3.32)."""
    K = _matern52(X, lengthscale, variance)
    Kinv = np.linalg.inv(K)
    log_fact = special.gammaln(y + 1)

    def neg_psi(f):
        return -(y @ f - np.exp(f).sum() - log_fact.sum() - 0.5 * f @ Kinv @ f)

    res = optimize.minimize(neg_psi, np.log(y), method="trust-exact",
                            jac=lambda f: -(y - np.exp(f) - Kinv @ f),
                            hess=lambda f: np.diag(np.exp(f)) + Kinv,
                            options={"gtol": 1e-10})
    gradient = y - np.exp(res.x) - Kinv @ res.x      # converged, or stopped at round-off
    assert np.abs(gradient).max() <= 1e-9 * y.max()
    s = np.exp(0.5 * res.x)
    _, logdet = np.linalg.slogdet(np.eye(len(y)) + s[:, None] * K * s[None, :])
    return -res.fun - 0.5 * logdet


@pytest.mark.parametrize("scale", [1e3, 1e5])
def test_laplace_at_large_counts_matches_scipy_on_psi(scale):
    """Eight correlated sites with counts around ``scale`` (rates along a smooth curve):
    the engine's Laplace energy equals Ψ maximised by scipy, to 1e-8 relative."""
    rng = np.random.default_rng(4)
    X = np.sort(rng.uniform(0, 3, 8))
    y = rng.poisson(scale * np.exp(np.sin(2 * X))).astype(float)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.0, variance=4.0),
                     bnlab.likelihoods.Poisson())
    res = bnlab.infer(model, X, y, method="laplace")
    assert res.converged and not res.diverged
    assert res.log_marginal == pytest.approx(_laplace_by_scipy(X, y, 1.0, 4.0), rel=1e-8)


@pytest.mark.parametrize("count", [1e21, 1e150])
def test_counts_beyond_float64s_resolution_are_refused(count):
    """At a count of 1e150 the posterior of f has width 1e-75 around 345, where float64's
    spacing is 6e-14: log p(y|f) jumps by 1e123 between neighbouring floats, and
    Laplace converged at −1.5e124 where the closed form is −6.0e4. Refused, naming y."""
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Poisson())
    with pytest.raises(ValueError, match=r"Poisson counts above 1e\+20 \(rows \[1\]"):
        bnlab.infer(model, np.zeros(2), np.array([3.0, count]), method="laplace")
