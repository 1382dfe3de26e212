"""GP regression at extreme noise and prior variance: (Power) EP against the closed
form log N(y | 0, K + σ_n²I) over noise 1e-300…1e300 and σ² 1e-150…1e150, or a
ValueError naming the noise where σ²/σ_n² leaves float64."""
import math

import numpy as np
import pytest

import bnlab

NOISES = [1e-300, 1e-150, 1e-50, 1e-12, 1e-2, 1e2, 1e50, 1e150, 1e300]
VARIANCES = [1e-150, 1e-50, 1e-10, 1.0, 1e10, 1e50, 1e150]


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 10))
    return X, np.sin(2 * X) + 0.1 * rng.standard_normal(10)


def gaussian_log_evidence(X, y, variance, noise, lengthscale=1.0):
    """log N(y | 0, σ²C + σ_n²I), C the Matérn-5/2 correlation, factored at the scale
    s = max(σ², σ_n²) (R&W eq. 2.30 on (σ²/s)C + (σ_n²/s)I, then −(N/2) log s), so
    that neither scale overflows; numpy, independent of the engine."""
    r = math.sqrt(5) * np.abs(X[:, None] - X[None, :]) / lengthscale
    C = (1 + r + r * r / 3) * np.exp(-r)
    s = max(variance, noise)
    L = np.linalg.cholesky((variance / s) * C + (noise / s) * np.eye(len(X)))
    a = np.linalg.solve(L, y / math.sqrt(s))
    return (-0.5 * a @ a - np.log(np.diag(L)).sum()
            - 0.5 * len(X) * (math.log(s) + math.log(2 * math.pi)))


def assert_cells_converged_to(cells, first, second, exact, rel=1e-6):
    """Every cell of a one-scheme surface over the values ``first`` × ``second``
    converged to ``exact(a, b)`` within ``rel``."""
    for i, a in enumerate(first):
        for j, b in enumerate(second):
            assert bool(cells["converged"][i, j]), (a, b)
            assert float(cells["log_marginal"][i, j]) == pytest.approx(exact(a, b), rel=rel)


@pytest.mark.parametrize("method, alpha, noises", [("ep", 1.0, NOISES),
                                                   ("pep", 0.5, NOISES[3:])])
def test_power_ep_is_exact_at_every_noise_and_variance(regression, method, alpha, noises):
    """Power EP's site for a Gaussian likelihood is the likelihood itself (precision
    1/σ_n²), whatever the cavity. Computed from log Z's derivatives, R = 1/(1 + v\\h)
    cancelled wherever σ_n² was small against the cavity's variance: at σ_n² ≤ 1e-50
    no site ever moved (energies −11.5 where log p(y) = −4.97), and with σ² ≥ 1e10 the
    sites wandered by 1e-6 relative, 'not converged' after 200 iterations (28 of these
    63 cells failed so). Beyond σ²/σ_n² = 1e300 the problem is refused, naming the
    noise. At α < 1 the cavity keeps 1 − α of the site, its variance is of the noise's
    size, and log Z reads (y − m\\)²/σ_n² with m\\ = y to float64's spacing: below
    σ_n² ≈ (1e5 ε|y|)² that rounding dominates (not yet refused; α = 0.5 is checked
    from σ_n² = 1e-12 on)."""
    X, y = regression
    wrong = []
    for noise in noises:
        for variance in VARIANCES:
            model = bnlab.GP(bnlab.kernels.Matern52(variance=variance),
                             bnlab.likelihoods.Gaussian(noise=noise))
            if variance / noise > 1e300:
                with pytest.raises(ValueError, match=r"^Gaussian noise 1e-300 against a prior"):
                    bnlab.infer(model, X, y, method=method, alpha=alpha)
                continue
            res = bnlab.infer(model, X, y, method=method, alpha=alpha)
            exact = gaussian_log_evidence(X, y, variance, noise)
            if not (res.converged and abs(res.log_marginal - exact) <= 1e-6 * abs(exact)):
                wrong.append((noise, variance, res.converged, res.log_marginal, exact))
    assert wrong == []


@pytest.mark.parametrize("scale, variance", [(1e150, 1e-10), (1e100, 1e-150)])
def test_targets_whose_evidence_leaves_float64_are_refused(regression, scale, variance):
    """With σ² = σ_n² and y of size 1e150 (σ² = 1e-10) or 1e100 (σ² = 1e-150),
    −log p(y) ≥ ½‖y‖²/(Nσ² + σ_n²) > 1e309: no float64 holds log p(y). The message
    names y and the bound (before, EP returned −inf or NaN with only a flag)."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(variance=variance),
                     bnlab.likelihoods.Gaussian(noise=variance))
    with pytest.raises(ValueError, match=r"^y reaches .* log p\(y\) < −½‖y‖²"):
        bnlab.infer(model, X, y / np.max(np.abs(y)) * scale, method="ep")


@pytest.mark.parametrize("method", ["laplace", "vi", "laplace_gn"])
def test_energies_of_the_posterior_mean_are_exact_or_refused_at_tiny_noise(regression, method):
    """Laplace's energy and the ELBO evaluate (y − m)²/σ_n² at the posterior mean, whose
    float64 rounding (≈ ε·max|y| per point) costs N(ε·max|y|)²/σ_n² nats: at σ_n² = 1e-12
    that is 1e-19 and the energy is the closed form; at 1e-50 it is 1e19 (these methods
    reported 'converged' at −1e21 … −1e284 there), so the run is refused naming the noise,
    in ``infer`` and in ``surface``, and EP (the site in closed form) is offered."""
    X, y = regression
    for noise in (1e-12, 1e-50):
        model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=noise))
        if noise == 1e-12:
            res = bnlab.infer(model, X[:, None], y, method=method)
            assert res.converged
            assert res.log_marginal == pytest.approx(gaussian_log_evidence(X, y, 1.0, noise),
                                                     rel=1e-6)
            continue
        with pytest.raises(ValueError, match=r"noise 1e-50 is too small .* use 'ep'"):
            bnlab.infer(model, X[:, None], y, method=method)
        with pytest.raises(ValueError, match=r"noise 1e-50 is too small"):
            bnlab.surface(model, X[:, None], y, methods=["ep", method],
                          grid={"lengthscale": [0.5, 1.0], "variance": [1.0, 2.0]})



def test_gkl_at_tiny_noise_is_refused_as_the_elbo_is(regression):
    """G-KL's bound is the ELBO, maximised over (m, S) directly: the same (y − m)²/σ_n²
    term, the same rounding cost, so the same refusal (``DirectMethod.energy``). At
    σ_n² = 1e-50 it stopped at −8.6e30, 'not converged', where log p(y) = −6.01; at
    σ_n² = 0.1 its full-covariance bound is the closed form."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=0.1))
    res = bnlab.infer(model, X, y, method="gkl", covariance="full")
    assert res.converged
    assert res.log_marginal == pytest.approx(gaussian_log_evidence(X, y, 1.0, 0.1), rel=1e-7)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=1e-50))
    with pytest.raises(ValueError, match=r"noise 1e-50 is too small for the ELBO"):
        bnlab.infer(model, X, y, method="gkl", covariance="full")
    with pytest.raises(ValueError, match=r"noise 1e-50 is too small for the ELBO"):
        bnlab.surface(model, X, y, methods=["ep", "gkl"],
                      grid={"lengthscale": [0.5, 1.0], "variance": [1.0, 2.0]})


def test_a_surface_is_refused_where_any_cell_would_be(regression):
    """A surface's cells share the refusals of ``infer``: pep_qn's at σ²/σ_n² > 1e4 and
    the ELBO's at tiny noise, checked at the grid's corners (the checks are monotone in
    each hyperparameter). The base hyperparameters (σ² = 1, σ_n² = 0.1) pass both; the
    cells at σ² = 1e6 and at σ_n² = 1e-50 did not, and ran to flags only."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=0.1))
    with pytest.raises(ValueError, match=r"noise 0\.1 is too small for 'pep_qn' against a "
                                         r"prior variance of 1e\+06"):
        bnlab.surface(model, X, y, methods=["pep_qn"],
                      grid={"lengthscale": [1.0, 0.5], "variance": [1.0, 1e6]})
    with pytest.raises(ValueError, match=r"noise 1e-50 is too small for the ELBO"):
        bnlab.surface(model, X, y, methods=["vi"],
                      grid={"noise": [1e-50, 0.1], "variance": [1.0, 2.0]})


@pytest.mark.parametrize("grid, scale, refusal", [
    ({"variance": [1.0, 1e150], "noise": [1e-151, 1e-2]}, 1.0,
     r"^at the grid point variance = 1e\+150, noise = 1e-151: Gaussian noise 1e-151 against "
     r"a prior variance of 1e\+150: their ratio exceeds 1e\+300"),
    ({"variance": [1e-150, 1.0], "noise": [1e-150, 1.0]}, 1e100,
     r"^at the grid point variance = 1e-150, noise = 1e-150: y reaches 1e\+100 .* "
     r"log p\(y\) < −½‖y‖²")])
def test_a_surface_is_refused_where_any_cell_leaves_float64(regression, grid, scale, refusal):
    """``Gaussian.check_scales`` at the grid's corners, as ``infer`` applies it at one
    point: σ²/σ_n² grows with σ² and falls with σ_n², ½‖y‖²/(Nσ² + σ_n²) falls with
    both, so the corners bound every cell. With the base hyperparameters (σ² = 1,
    σ_n² = 0.1) inside, a grid reaching σ²/σ_n² = 1e301, or y of size 1e100 against
    σ² = σ_n² = 1e-150, is refused naming the grid point and the scale (before, only
    the base hyperparameters were checked and the corner ran to flagged cells)."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=0.1))
    with pytest.raises(ValueError, match=refusal):
        bnlab.surface(model, X, y / np.max(np.abs(y)) * scale, methods=["ep"], grid=grid)


@pytest.mark.parametrize("warm_start, batching", [(False, "scan"), (True, "scan"),
                                                    (True, "vmap")])
def test_a_surface_just_inside_float64_is_the_closed_form(regression, warm_start, batching):
    """Just inside the refusal (σ²/σ_n² up to 1e299) every EP cell of the surface is
    converged and equals log N(y | 0, σ²C + σ_n²I) to 1e-6 relative, warm started or
    cold, scanned or batched. Warm from σ_n² = 1e-149 to 1e-2, damping 0.5 halves the
    site precision 1e149 per step towards 1/σ_n² = 100, about 490 steps, beyond the
    200 allowed: the warm run stalls at the cap (before the fix: -7.385, unconverged,
    where the closed form is -5.268) and the cell is redone cold, reporting the cold
    run's iteration count."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=0.1))
    variances, noises = [1.0, 1e150], [1e-149, 1e-2]
    surf = bnlab.surface(model, X, y, methods=["ep"], warm_start=warm_start,
                         batching=batching, grid={"variance": variances, "noise": noises})
    cells = surf.sel(scheme="ep")
    for i, variance in enumerate(variances):
        for j, noise in enumerate(noises):
            assert bool(cells["converged"][i, j])
            assert float(cells["log_marginal"][i, j]) == pytest.approx(
                gaussian_log_evidence(X, y, variance, noise), rel=1e-6)
    if warm_start:
        cold = bnlab.surface(model, X, y, methods=["ep"], warm_start=False, batching=batching,
                             grid={"variance": variances, "noise": noises}).sel(scheme="ep")
        assert int(cells["iterations"][0, 1]) == int(cold["iterations"][0, 1])


def test_gkl_full_is_the_closed_form_at_every_prior_variance(regression):
    """G-KL's full-covariance optimum for a Gaussian likelihood is log N(y | 0, σ²C +
    σ_n²I). Whitened by the prior alone, its curvature is I + σ²L_CᵀL_C/σ_n²: L-BFGS
    stopped at the 200-iteration cap from σ²/σ_n² ≈ 1e4 on, at −1.4e9 for σ² = 1e20
    (log p(y) = −231); preconditioned by the posterior it converges at every σ²."""
    X, y = regression
    wrong = []
    for noise in (0.1, 1.0):
        for variance in (1e-10, 1.0, 1e4, 1e10, 1e20, 1e50, 1e150):
            model = bnlab.GP(bnlab.kernels.Matern52(variance=variance),
                             bnlab.likelihoods.Gaussian(noise=noise))
            res = bnlab.infer(model, X, y, method="gkl", covariance="full")
            exact = gaussian_log_evidence(X, y, variance, noise)
            if not (res.converged and abs(res.log_marginal - exact) <= 1e-7 * abs(exact)
                    and res.log_marginal <= exact + 1e-9 * abs(exact)):
                wrong.append((noise, variance, res.converged, res.log_marginal, exact))
    assert wrong == []


def test_a_surface_checks_its_cells_not_its_base_point(regression):
    """The base hyperparameters (σ² = 1, σ_n² = 1e-301: a ratio float64 cannot hold,
    refused by ``infer``) lie off a grid over the noise: every cell is computed and is
    the closed form (before, the base point alone refused the whole surface), while a
    grid reaching σ_n² = 1e-301 is refused naming that grid point."""
    X, y = regression
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(noise=1e-301))
    with pytest.raises(ValueError, match=r"^Gaussian noise 1e-301 against a prior"):
        bnlab.infer(model, X, y, method="ep")
    noises, variances = [1e-2, 0.1], [1.0, 1e10]
    cells = bnlab.surface(model, X, y, methods=["ep"],
                          grid={"noise": noises, "variance": variances}).sel(scheme="ep")
    assert_cells_converged_to(cells, noises, variances,
                              lambda noise, variance: gaussian_log_evidence(X, y, variance,
                                                                            noise))
    with pytest.raises(ValueError, match=r"^at the grid point noise = 1e-301, variance = 1: "
                                         r"Gaussian noise 1e-301 against a prior"):
        bnlab.surface(model, X, y, methods=["ep"],
                      grid={"noise": [1e-301, 0.1], "variance": variances})
