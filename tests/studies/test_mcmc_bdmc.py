"""Bidirectional Monte Carlo against independent truths: the Gaussian likelihood's
closed-form evidence, and the probit likelihood's, which is an orthant probability of
a Gaussian: with u = D f − z, D = diag(y), z ~ N(0, I),
    p(y) = ∫ N(f | 0, K) Π Φ(yᵢ fᵢ) df = P(u ≥ 0) = P(u ≤ 0),   u ~ N(0, D K D + I),
in closed form for n = 2, 3 (Sheppard's formula: 1/4 + asin ρ / 2π; 1/8 + Σ asin ρᵢⱼ / 4π)
and by scipy's multivariate normal CDF (Genz's deterministic-error algorithm) for
n ≤ 12. None of them shares code with bnlab's sampler."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

import bnlab
from bnlab.studies import ais_kernel
from reference import probit_importance_log_z
from bnlab.studies.mcmc import ais, bdmc, bdmc_grid


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(tmp_path))


def _prior_cov(model, X):
    return np.asarray(model.prior_covariance(model.init_params(), jnp.asarray(X), jnp.asarray(X)))


def _probit_log_z(K, y):
    """log P(u ≥ 0), u ~ N(0, D K D + I): Sheppard's closed forms for n ≤ 3, Genz's
    algorithm (scipy) above, to a relative 1e-5 (1e-5 nats; 1e-8 costs 50 s at n = 12
    and moves log p(y) by 1e-5)."""
    S = np.outer(y, y) * K + np.eye(len(y))
    d = np.sqrt(np.diag(S))
    R = S / np.outer(d, d)
    if len(y) == 2:
        return np.log(0.25 + np.arcsin(R[0, 1]) / (2 * np.pi))
    if len(y) == 3:
        return np.log(0.125 + (np.arcsin(R[0, 1]) + np.arcsin(R[0, 2]) + np.arcsin(R[1, 2]))
                      / (4 * np.pi))
    return np.log(multivariate_normal.cdf(np.zeros(len(y)), np.zeros(len(y)), R,
                                          maxpts=10**6, abseps=1e-8, releps=1e-5))


def _probit_problem(n, lengthscale=1.0, variance=4.0, seed=0):
    X = np.linspace(-1.5, 1.5, n)[:, None]
    y = np.where(np.random.default_rng(seed).random(n) < 0.5, -1.0, 1.0)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=lengthscale, variance=variance),
                     bnlab.likelihoods.Bernoulli("probit"))
    return model, X, y, _probit_log_z(_prior_cov(model, X), y)


def test_sheppard_and_genz_agree():
    """The two independent truths agree where both apply (n = 3), so the n ≤ 12 cases
    below rest on a checked one."""
    model, X, y, closed = _probit_problem(3)
    S = np.outer(y, y) * _prior_cov(model, X) + np.eye(3)
    genz = multivariate_normal.cdf(np.zeros(3), np.zeros(3), S, maxpts=10**6, abseps=1e-8,
                                   releps=1e-5)
    assert abs(np.log(genz) - closed) < 1e-4


#: the prior's jitter (1e-9 · mean diag K) moves log p(y) by about 1e-8
JITTER_NATS = 1e-6


@pytest.mark.parametrize("start", ["prior", "ep"])
@pytest.mark.parametrize("n, noise", [(4, 0.05), (12, 0.3), (25, 1.0)])
def test_sandwich_holds_the_gaussian_closed_form(n, noise, start):
    """Several n and σ², annealed from the prior and from EP's posterior: the lower
    bound is not above log p(y) and the upper not below it (beyond three standard
    errors and the prior's jitter), and both lie within 0.3 nats of it."""
    ds = bnlab.datasets.load("regression_1d", n=n)
    n = len(ds.y)                                   # the training share of n points
    model = bnlab.GP(bnlab.kernels.RBF(lengthscale=0.7, variance=1.3),
                     bnlab.likelihoods.Gaussian(noise=noise))
    exact = multivariate_normal(np.zeros(n), _prior_cov(model, ds.X) + noise * np.eye(n)).logpdf(ds.y)
    r = ais(model, ds.X, ds.y, num_temps=500, num_chains=32, start=start, use_cache=False)
    assert r.log_z_lower < exact + 3 * r.log_z_lower_se + JITTER_NATS, (r.log_z_lower, exact)
    assert r.log_z_upper > exact - 3 * r.log_z_upper_se - JITTER_NATS, (r.log_z_upper, exact)
    assert abs(r.log_z_lower - exact) < 0.3 and abs(r.log_z_upper - exact) < 0.3
    assert r.capped_fraction == 0 and r.posterior_samples.shape == (32, n)


def test_reverse_pass_from_exact_posterior_draws_is_an_upper_bound():
    """Where exact posterior samples exist (Gaussian likelihood), the reverse pass's
    premise holds exactly: started from them, −log mean w_rev lies above log p(y) in
    expectation; with a short schedule (20 temperatures) the bias is large and one-sided,
    and the forward pass's lies below: wrong signs or a schedule not reversed fail."""
    n, noise = 10, 0.02
    ds = bnlab.datasets.load("regression_1d", n=n)
    n = len(ds.y)
    model = bnlab.GP(bnlab.kernels.RBF(lengthscale=0.7, variance=1.3),
                     bnlab.likelihoods.Gaussian(noise=noise))
    K = _prior_cov(model, ds.X)
    exact = multivariate_normal(np.zeros(n), K + noise * np.eye(n)).logpdf(ds.y)
    cov = K - K @ np.linalg.solve(K + noise * np.eye(n), K)
    mean = K @ np.linalg.solve(K + noise * np.eye(n), ds.y)
    C = 256
    L = jnp.asarray(np.linalg.cholesky(K + 1e-10 * np.eye(n)))
    y = jnp.asarray(ds.y)

    def log_lik(f):
        return jnp.sum(-0.5 * (y - f) ** 2 / noise - 0.5 * jnp.log(2 * np.pi * noise))

    def run(key, f, T, reverse):
        return ais_kernel.anneal(key, f, jax.vmap(log_lik)(f), ais_kernel.schedule(T, reverse),
                                 T, L, log_lik, 1, 50)[2]

    run = jax.jit(run, static_argnums=3)
    post = np.random.default_rng(0).multivariate_normal(mean, cov, size=C)
    prior = np.random.default_rng(1).multivariate_normal(np.zeros(n), K, size=C)
    upper = -np.asarray(ais_kernel.log_mean_and_se(run(jax.random.PRNGKey(0), jnp.asarray(post),
                                                       20, True))[0])
    lower = np.asarray(ais_kernel.log_mean_and_se(run(jax.random.PRNGKey(1), jnp.asarray(prior),
                                                      20, False))[0])
    assert upper > exact + 0.5 and lower < exact - 0.5, (lower, exact, upper)
    upper_long = -np.asarray(ais_kernel.log_mean_and_se(run(jax.random.PRNGKey(2),
                                                            jnp.asarray(post), 2000, True))[0])
    assert exact - 0.02 < upper_long < exact + 0.15, (upper_long, exact)


@pytest.mark.parametrize("n", [2, 3, pytest.param(8, marks=pytest.mark.slow),
                               pytest.param(12, marks=pytest.mark.slow)])
def test_sandwich_holds_the_probit_orthant_probability(n):
    """Probit at n = 2, 3 (closed form) and 8, 12 (Genz): the bounds straddle the truth
    (to three standard errors) and the gap is a fraction of a nat."""
    model, X, y, truth = _probit_problem(n)
    r = ais(model, X, y, num_temps=500, num_chains=32, use_cache=False)
    assert r.log_z_lower - 3 * r.log_z_lower_se < truth < r.log_z_upper + 3 * r.log_z_upper_se, \
        (r.log_z_lower, truth, r.log_z_upper)
    assert abs(r.gap) < 0.3, r.gap


def test_a_short_schedule_is_a_wide_sandwich_around_the_truth():
    """At 10 temperatures on a hard posterior (n = 12, σ² = 25) both biases are large:
    over five seeds the median forward estimate falls well below the truth and the
    median reverse one well above (a reverse pass that were a second lower bound, or
    ran the schedule forwards, fails), and no run calls itself converged."""
    model, X, y, truth = _probit_problem(12, lengthscale=0.5, variance=25.0, seed=3)
    runs = [ais(model, X, y, num_temps=10, num_chains=32, seed=s, start="prior",
                use_cache=False) for s in range(5)]
    lower = np.median([r.log_z_lower for r in runs])
    upper = np.median([r.log_z_upper for r in runs])
    assert lower < truth - 0.3 and upper > truth + 0.3, (lower, truth, upper)
    assert not any(r.converged for r in runs)


def test_annealing_from_ep_narrows_the_sandwich_around_the_truth():
    """The same hard posterior and 10 temperatures, annealed from EP's posterior
    (``ais_start``): over five seeds every interval holds the orthant probability (Genz)
    and the median interval is at most a fifth of the prior start's."""
    model, X, y, truth = _probit_problem(12, lengthscale=0.5, variance=25.0, seed=3)
    width = {}
    for start in ("ep", "prior"):
        runs = [ais(model, X, y, num_temps=10, num_chains=32, seed=s, start=start,
                    use_cache=False) for s in range(5)]
        width[start] = np.median([r.interval[1] - r.interval[0] for r in runs])
        if start == "ep":
            assert all(r.start == "ep" for r in runs)
            assert all(r.interval[0] < truth < r.interval[1] for r in runs), \
                (truth, [r.interval for r in runs])
    assert width["ep"] < width["prior"] / 5, width


def test_bdmc_lengthens_the_schedule_until_the_gap_is_below_the_tolerance():
    """``bdmc`` refines 10 → 40 → 160 … temperatures until the interval (gap and two
    standard errors each side) is narrower than the tolerance; the converged result
    holds the truth, the last run's schedule is reported, and a budget of max_temps
    stops it unconverged."""
    model, X, y, truth = _probit_problem(3, variance=9.0)
    r = bdmc(model, X, y, tolerance=0.2, num_temps=10, max_temps=2560, num_chains=64,
             start="prior", use_cache=False)
    lo, hi = r.interval
    assert r.converged and hi - lo < 0.2 and r.num_temps >= 160
    assert lo < truth < hi
    assert r.log_z_lower - 3 * r.log_z_lower_se < truth < r.log_z_upper + 3 * r.log_z_upper_se
    stopped = bdmc(model, X, y, tolerance=1e-6, num_temps=10, max_temps=40, num_chains=64,
                   start="prior", use_cache=False)
    assert not stopped.converged and stopped.num_temps == 40
    with pytest.raises(ValueError, match="tolerance"):
        ais(model, X, y, tolerance=0.0)
    with pytest.raises(ValueError, match="direction"):
        ais(model, X, y, direction="backwards")
    with pytest.raises(ValueError, match="posterior_steps"):
        ais(model, X, y, posterior_steps=2)
    with pytest.raises(ValueError, match="max_temps"):
        bdmc(model, X, y, num_temps=100, max_temps=50)
    with pytest.raises(ValueError, match="refine"):
        bdmc_grid(model, X, y, [model.init_params()], refine=1)
    with pytest.raises(ValueError, match="max_seconds"):
        bdmc_grid(model, X, y, [model.init_params()], max_temps=2000, max_seconds=0)


def test_forward_only_runs_have_no_upper_bound_and_are_cached_apart(tmp_path):
    """The direction and the schedule are parts of the cache key (so of the random
    keys too): a forward-only run and one with other β = 1 steps are entries of their
    own; the forward-only one has no upper bound and is not converged."""
    model, X, y, _ = _probit_problem(3)
    both = ais(model, X, y, num_temps=30, num_chains=8)
    fwd = ais(model, X, y, num_temps=30, num_chains=8, direction="forward")
    longer = ais(model, X, y, num_temps=30, num_chains=8, posterior_steps=20)
    assert len(list((tmp_path / "ais").glob("*.npz"))) == 3
    assert len({fwd.log_z, both.log_z, longer.log_z}) == 3
    assert np.isnan(fwd.log_z_upper) and not fwd.converged
    assert np.isfinite(both.log_z_upper) and longer.log_z_upper != both.log_z_upper


@pytest.mark.slow
@pytest.mark.parametrize("start", ["ep", "prior"])
def test_sandwich_contains_the_truth_in_95_percent_of_seeds(start):
    """Forty seeds on two tiny probit problems (n = 2 and 3, closed-form truths), from
    either start:
    [lower − 3 se, upper + 3 se] contains log p(y) in at least 95 % of them, and the
    bounds are one-sided on average (mean lower ≤ truth ≤ mean upper, to the standard
    error of those means)."""
    for n, variance in ((2, 16.0), (3, 9.0)):
        model, X, y, truth = _probit_problem(n, variance=variance, seed=n)
        runs = [ais(model, X, y, num_temps=100, num_chains=16, seed=s, start=start,
                    use_cache=False) for s in range(40)]
        lo = np.array([r.log_z_lower for r in runs])
        hi = np.array([r.log_z_upper for r in runs])
        lo_se = np.array([r.log_z_lower_se for r in runs])
        hi_se = np.array([r.log_z_upper_se for r in runs])
        inside = (lo - 3 * lo_se <= truth) & (truth <= hi + 3 * hi_se)
        assert inside.mean() >= 0.95, (n, inside.mean(), truth, lo, hi)
        assert lo.mean() < truth + 2 * lo.std(ddof=1) / np.sqrt(40)
        assert hi.mean() > truth - 2 * hi.std(ddof=1) / np.sqrt(40)


def _t_importance_sampling_log_z(K, y, mean, cov, num=2 * 10**6, df=5, seed=0):
    """log p(y) for probit by importance sampling written here (no bnlab sampler): a
    multivariate-t proposal (``df``) with the given mean and 1.5 × the covariance,
    log w = log N(f | 0, K) + Σ log Φ(yᵢ fᵢ) − log t(f); returns (log Ẑ, se)."""
    from scipy.stats import multivariate_t
    return probit_importance_log_z(K, y, multivariate_t(mean, 1.5 * cov, df=df), num, seed)


@pytest.mark.slow
def test_sandwich_holds_an_independent_estimate_on_the_alpha_tours_problem():
    """The α tour's problem as the issue tried it (separated_1d, all 40 points, probit,
    Matérn-5/2, ℓ = 2, σ² = 100; importance sampling there gave −4.37 … −4.39): with
    the lab's reference schedule (256 chains × 1000 temperatures × 2 moves), the
    interval holds an importance-sampling estimate computed here with EP's posterior
    as the proposal's centre (any proposal is unbiased; EP only makes it efficient)."""
    ds = bnlab.datasets.load("separated_1d", test_fraction=0.0)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=2.0, variance=100.0),
                     bnlab.likelihoods.Bernoulli("probit"))
    K = _prior_cov(model, ds.X)
    ep = bnlab.infer(model, ds.X, ds.y, method="ep")
    tau = np.asarray(ep.sites.prec[:, 0, 0])
    nu = np.asarray(ep.sites.nat1[:, 0])
    cov = K - K @ np.linalg.solve(np.linalg.inv(np.diag(tau)) + K, K)
    cov = (cov + cov.T) / 2
    truth, truth_se = _t_importance_sampling_log_z(K + 1e-8 * np.eye(len(ds.y)), ds.y,
                                                   cov @ nu, cov)
    assert -4.45 < truth < -4.30 and truth_se < 0.03, (truth, truth_se)
    r = ais(model, ds.X, ds.y, num_temps=1000, num_chains=256, steps_per_temp=2,
            use_cache=False)
    lo, hi = r.interval
    assert lo - 2 * truth_se < truth < hi + 2 * truth_se, (lo, truth, hi, r.gap)
    assert r.log_z_upper > truth - 3 * np.hypot(r.log_z_upper_se, truth_se)
