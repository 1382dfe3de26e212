"""Extreme but finite inputs get exact finite answers: inputs far apart on the
lengthscale's scale (ℓ = 1e-300, x ≈ 1e160) have a Matérn correlation of exactly 0, so
the prior covariance is σ² I, where probit's evidence is exactly 2⁻ⁿ (each y_n has
probability Φ(0)) and EP, exact for independent sites, must give it. Targets are exact
up to |y| = 1e150 (Gaussian regression against R&W eq. 2.30) and refused beyond, where
their squares, and log p(y) itself, leave float64."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import bnlab

N = 10


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=N)
    return X, np.where(X + 0.5 * rng.normal(size=N) > 0, 1.0, -1.0)


def _probit(kernel=None):
    return bnlab.GP(kernel or bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))


def test_surface_cells_at_a_vanishing_lengthscale_are_exact(data):
    X, y = data
    surf = bnlab.surface(_probit(), X, y, methods=["ep", "laplace"],
                         grid={"lengthscale": np.array([1e-300, 1.0]),
                               "variance": np.array([1.0, 3.0])})
    assert np.isfinite(surf.log_marginal.values).all()
    assert not surf.diverged.values.any()
    ep = surf.log_marginal.sel(scheme="ep").values
    np.testing.assert_allclose(ep[0], N * math.log(0.5), rtol=1e-10)


@pytest.mark.parametrize("kernel, columns", [
    (bnlab.kernels.Matern32, "every column"),
    (bnlab.kernels.Matern52, "every column"), (bnlab.kernels.Matern52, "one column of two")])
def test_inputs_scaled_by_1e160_give_the_exact_evidence(data, kernel, columns):
    X, y = data
    X = X[:, None] * 1e160 if columns == "every column" else np.c_[X * 1e160, X]
    res = bnlab.infer(_probit(kernel()), X, y, method="ep")
    assert res.converged and not res.diverged
    assert res.log_marginal == pytest.approx(N * math.log(0.5), rel=1e-10)


def _matern52_exact(d, lengthscale):
    """Matérn-5/2 correlation at distance d, in scalar arithmetic: the log of its
    polynomial from log r (r² may overflow), and 0 once r itself overflows."""
    r = math.sqrt(5) * (d / lengthscale) if d / lengthscale < 1e300 else math.inf
    if r == 0:
        return 1.0
    if math.isinf(r):
        return 0.0
    log_poly = np.logaddexp.reduce([0.0, math.log(r), 2 * math.log(r) - math.log(3)])
    return math.exp(log_poly - r)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_x=st.floats(-150, 150), log_ell=st.floats(-150, 150), offset=st.floats(0.1, 3))
@example(log_x=150, log_ell=-150, offset=1.0)
@example(log_x=80, log_ell=-80, offset=2.5)
def test_matern_correlations_are_exact_at_every_scale(log_x, log_ell, offset):
    x_scale, ell = 10.0**log_x, 10.0**log_ell
    X = np.array([[0.0], [offset * x_scale]])
    K = np.asarray(bnlab.kernels.Matern52(lengthscale=ell)(
        {"lengthscale": ell, "variance": 1.0}, X, X))
    d = float(X[1, 0] - X[0, 0])
    assert np.isfinite(K).all()
    assert K[0, 0] == K[1, 1] == 1.0
    assert K[0, 1] == pytest.approx(_matern52_exact(d, ell), rel=1e-9, abs=1e-300)


def _gaussian_log_evidence(X, y, noise):
    """GP regression's exact log p(y) (R&W eq. 2.30), in numpy."""
    K = np.asarray(bnlab.kernels.Matern52()({"lengthscale": 1.0, "variance": 1.0},
                                            X[:, None], X[:, None])) + noise * np.eye(len(X))
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * len(X) * math.log(2 * math.pi)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_scale=st.floats(-150, 200))
@example(log_scale=160.0)
def test_gaussian_targets_at_every_scale_are_exact_or_refused_naming_y(data, log_scale):
    X, y = data
    y = (y + 0.3 * X) * 10.0**log_scale
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=0.1))
    if np.max(np.abs(y)) > 1e150:
        with pytest.raises(ValueError, match=r"^y reaches .* rescale y"):
            bnlab.infer(model, X, y, method="ep")
        return
    res = bnlab.infer(model, X, y, method="ep")
    assert res.converged and np.isfinite(res.log_marginal)
    assert res.log_marginal == pytest.approx(_gaussian_log_evidence(X, y, 0.1), rel=1e-9)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 15))
    return X, np.sin(2 * X) + 0.1 * rng.standard_normal(15)


@pytest.mark.parametrize("noise", [1e-2, 1e-6, 1e-8, 1e-10, 1e-12])
@pytest.mark.parametrize("method, alpha", [("laplace", 1.0), ("vi", 1.0), ("ep", 1.0),
                                           ("pep", 0.5), ("ep_like", 1.0)])
def test_tiny_gaussian_noise_gives_the_exact_evidence(regression, noise, method, alpha):
    """Every method is exact for a Gaussian likelihood. At noise σ_n² the site
    precisions are 1/σ_n², up to 1e12 here, against a prior of variance 1, while
    log p(y) stays near −1e4: K + σ_n²I is positive definite and R&W eq. 2.30 is exact
    to about 1e-11 in float64. The site algebra must not subtract numbers of the site
    precisions' size (the posterior mean from Kν̄, ν̄ − Λ̄m, C⁻¹m − ν̄); it did, and the
    energies were off by 1e-6 relative at σ_n² = 1e-6 and by +6·10⁵ at 1e-10."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=noise))
    res = bnlab.infer(model, X, y, method=method, alpha=alpha)
    assert not res.diverged
    assert res.log_marginal == pytest.approx(_gaussian_log_evidence(X, y, noise), rel=1e-7)
    if noise >= 1e-10:
        assert res.converged


@pytest.mark.parametrize("variance", [1e12, 1e20, 1e300])
def test_a_huge_prior_variance_gives_finite_ep_energies(data, variance):
    """Probit EP at prior variance σ² ≥ 1e12 started from sites of precision 0.01: each
    site's precision then exceeds its share of the posterior precision by 1e-18 or
    less, and the cavity precision C⁻¹ − Λ̄ computed as that difference was exactly 0,
    a cavity that is not PD and a NaN energy at the first iterate (the surface's cells
    at σ² = 1e300 were NaN). The W½ form hands over [B⁻¹]_nn = C_nn P\\n, so the cavity
    precision needs no subtraction. Independent of σ² here: the energy is finite."""
    X, y = data
    model = bnlab.GP(bnlab.kernels.Matern52(variance=variance),
                     bnlab.likelihoods.Bernoulli("probit"))
    res = bnlab.infer(model, X, y, method="ep")
    assert np.isfinite(res.log_marginal)
    assert np.isfinite(np.asarray(res.trace.energy)).all()


@pytest.mark.parametrize("batching", ["scan", "vmap"])
def test_surface_cells_at_a_huge_variance_are_exact(batching):
    """A surface's EP cell at σ² = 1e300 reaches the orthant-probability limit (within
    EP's 0.1 nats of it, ``test_ep_at_a_huge_prior_variance_reaches_its_limit``) run
    cold, as ``bnlab.infer`` does (NaN before the W½ cavity; stopped as converged at a
    wrong value before sites were judged at the prior's scale); warm started from
    σ² = 1, its sites have 300 orders of magnitude to come down: it converges to the
    same value, or says it did not."""
    X, y = _separable()
    limit = _orthant_log_probability(X, y)
    for warm in (False, True):
        surf = bnlab.surface(_probit(), X, y, methods=["ep"], batching=batching,
                             warm_start=warm, grid={"lengthscale": np.array([1.0]),
                                                    "variance": np.array([1.0, 1e300])})
        cell = surf.sel(scheme="ep", variance=1e300, lengthscale=1.0)
        assert bool(cell.converged) or warm
        if bool(cell.converged):
            assert float(cell.log_marginal) == pytest.approx(limit, abs=0.1)


def _poisson_log_evidence(y, variance):
    """log ∫ N(f | 0, σ²) Poisson(y | eᶠ) df for one count, by adaptive quadrature
    around the integrand's mode (log-space integrand shifted by its maximum)."""
    from scipy import integrate, optimize, special
    log_f = lambda f: (-0.5 * f * f / variance - 0.5 * math.log(2 * math.pi * variance)
                       + y * f - math.exp(f) - special.gammaln(y + 1))
    mode = optimize.minimize_scalar(lambda f: -log_f(f), bounds=(-50, 50),
                                    method="bounded", options={"xatol": 1e-12}).x
    peak = log_f(mode)
    sd = 1.0 / math.sqrt(1.0 / variance + math.exp(mode))     # the integrand's width
    value, _ = integrate.quad(lambda f: math.exp(log_f(f) - peak), mode - 30 * sd,
                              mode + 30 * sd, points=[mode], epsabs=0, epsrel=1e-12, limit=200)
    return peak + math.log(value)


@pytest.mark.parametrize("count", [10, 1e4, 1e6])
def test_poisson_ep_at_large_counts_is_exact(count):
    """One site under N(0, 1): EP's moment matching is exact for a single likelihood
    factor, so its log p(y) is the integral's, here to 1e-8 relative. A Gauss–Hermite
    rule on the cavity cannot resolve a tilted distribution of width 1/√y around
    log y: at a count of 10 it was 0.6 % off; at 1e4 every site's tilted system was
    singular, every site kept its initial value and the zero change read as
    convergence after one iteration (−2.6·10⁵ where VI gives −1.5·10³). The rule is
    now centred on the tilted density's mode (``Poisson._tilted``)."""
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Poisson())
    res = bnlab.infer(model, np.zeros(1), np.array([count]), method="ep")
    assert res.converged
    assert res.log_marginal == pytest.approx(_poisson_log_evidence(count, 1.0), rel=1e-8)


def _separable():
    """Eight points in runs of one class each (three sign changes), where EP is within
    0.1 nats of the exact evidence at any prior variance."""
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(-3, 3, 8))
    return X, np.where(np.sin(2 * X) + 0.3 * rng.normal(size=8) > 0, 1.0, -1.0)


def _orthant_log_probability(X, y):
    """log P(yᵢ gᵢ > 0 for all i) for g ~ N(0, K̃), K̃ the Matérn-5/2 correlation: the
    limit of log p(y) under a probit likelihood as the prior variance σ² → ∞ (with
    f = σg, Φ(yσg) tends to the indicator of yg > 0), by Genz's algorithm."""
    from scipy.stats import multivariate_normal
    r = np.sqrt(5.0) * np.abs(X[:, None] - X[None, :])
    corr = (1 + r + r * r / 3) * np.exp(-r)
    signed = corr * np.outer(y, y)          # y∘g ~ N(0, D K̃ D), D = diag(y)
    p = multivariate_normal(np.zeros(len(y)), signed, abseps=1e-9, releps=1e-7,
                            maxpts=2_000_000, seed=0).cdf(np.zeros(len(y)))
    return math.log(p)


@pytest.mark.parametrize("variance", [1e20, 1e100, 1e300])
def test_ep_at_a_huge_prior_variance_reaches_its_limit(variance):
    """As σ² → ∞ the probit evidence tends to an orthant probability of the prior's
    correlation, and EP's energy to its value there: EP at σ² = 1e20 … 1e300 equals EP
    at σ² = 1e6 to 1e-6 and lies within 0.1 nats of Genz's orthant probability. Before
    sites started and were judged at the prior's scale, every site that matters (a
    precision near 1/σ²) lay far below the convergence test's absolute floor: EP
    stopped as converged after 3 iterations at −34.0 (σ² ≥ 1e20) where the limit is
    −10.7, and Laplace read as converged at σ² = 1e12 at −57.9 where it reaches −20.0."""
    X, y = _separable()
    moderate, huge = (bnlab.infer(_probit(bnlab.kernels.Matern52(variance=v)), X, y,
                                  method="ep") for v in (1e6, variance))
    assert huge.converged and moderate.converged
    assert huge.log_marginal == pytest.approx(moderate.log_marginal, abs=1e-6)
    assert huge.log_marginal == pytest.approx(_orthant_log_probability(X, y), abs=0.1)
