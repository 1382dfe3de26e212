"""Binary classification checks against independent references: scikit-learn's
Laplace GPC, textbook EP (R&W Alg. 3.5), importance sampling, and dense formulas."""
import numpy as np
import pytest
from scipy.special import log_ndtr
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import ConstantKernel, Matern

import bnlab
from bnlab.methods.registry import REGISTRY
from reference import (gaussian_elbo, importance_log_Z, matern52, posterior_from_sites,
                       textbook_ep_probit)


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-4, 4, n))[:, None]
    f = 1.5 * np.sin(X[:, 0])
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-3 * f)), 1.0, -1.0)
    return X, y


def _model(link, lengthscale, variance):
    return bnlab.GP(kernel=bnlab.kernels.Matern52(lengthscale, variance),
                    likelihood=bnlab.likelihoods.Bernoulli(link))


@pytest.mark.parametrize("lengthscale,variance", [(1.0, 1.0), (0.5, 4.0), (3.0, 20.0)])
def test_laplace_logit_matches_sklearn(lengthscale, variance):
    X, y = _data(40, 1)
    gpc = GaussianProcessClassifier(ConstantKernel(variance) * Matern(lengthscale, nu=2.5),
                                    optimizer=None).fit(X, (y > 0).astype(int))
    theta = np.log([variance, lengthscale])
    expected = gpc.base_estimator_.log_marginal_likelihood(theta)
    res = bnlab.infer(_model("logit", lengthscale, variance), X, y, method="laplace",
                      damping=1.0, tol=1e-12, max_iters=200)
    assert res.converged
    assert abs(res.log_marginal - expected) < 1e-6


@pytest.mark.parametrize("damping", [1.0, 0.5])
def test_ep_probit_reaches_textbook_fixed_point(damping):
    X, y = _data(30, 2)
    K = matern52(X, X, 1.2, 2.0)
    tau, nu, log_Z = textbook_ep_probit(K, y)
    res = bnlab.infer(_model("probit", 1.2, 2.0), X, y, method="ep", damping=damping,
                      tol=1e-12, max_iters=500)
    assert res.converged
    np.testing.assert_allclose(np.asarray(res.sites.prec[:, 0, 0]), tau, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(res.sites.nat1[:, 0]), nu, rtol=1e-6, atol=1e-8)
    assert abs(res.log_marginal - log_Z) < 1e-6


def test_power_ep_tends_to_vi_as_alpha_vanishes():
    X, y = _data(30, 3)
    model = _model("probit", 1.0, 1.5)
    vi = bnlab.infer(model, X, y, method="vi", tol=1e-11, max_iters=500)
    pep = bnlab.infer(model, X, y, method="pep", alpha=1e-6, tol=1e-11, max_iters=500)
    assert abs(pep.log_marginal - vi.log_marginal) < 1e-5
    np.testing.assert_allclose(pep.mean, vi.mean, atol=1e-5)
    np.testing.assert_allclose(pep.cov, vi.cov, atol=1e-5)
    # and α orders the energies monotonically between the two limits on this problem
    mid = bnlab.infer(model, X, y, method="pep", alpha=0.5, tol=1e-11, max_iters=500)
    ep = bnlab.infer(model, X, y, method="ep", tol=1e-11, max_iters=500)
    assert vi.log_marginal < mid.log_marginal < ep.log_marginal


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_ep_evidence_close_to_importance_sampling_and_elbo_below(seed):
    """EP's own approximation error grows with the signal variance (measured with this
    test's data: |EP − log Z| ≈ 0.005–0.01 at σ² = 1, 0.015–0.028 at σ² = 2, 0.024–0.045
    at σ² = 3); the implementation itself is pinned to textbook EP at 1e-6 above."""
    X, y = _data(15, seed)
    lengthscale, variance = 1.0, 1.0
    K = matern52(X, X, lengthscale, variance)
    model = _model("probit", lengthscale, variance)
    ep = bnlab.infer(model, X, y, method="ep", tol=1e-10, max_iters=500)
    vi = bnlab.infer(model, X, y, method="vi", tol=1e-10, max_iters=500)
    m, C = posterior_from_sites(K, np.asarray(ep.sites.prec[:, 0, 0]), np.asarray(ep.sites.nat1[:, 0]))
    log_Z, se = importance_log_Z(lambda f: log_ndtr(y * f).sum(1), K, m, C)
    assert se < 0.005
    assert abs(ep.log_marginal - log_Z) < 0.02
    assert vi.log_marginal < log_Z + 3 * se


def test_elbo_matches_dense_formula():
    """The VFE from sites equals Σ E_q log p − KL(q‖p) computed densely."""
    X, y = _data(20, 6)
    K = matern52(X, X, 0.8, 2.0)
    res = bnlab.infer(_model("probit", 0.8, 2.0), X, y, method="vi", max_iters=7, damping=0.3)
    m, C = posterior_from_sites(K, np.asarray(res.sites.prec[:, 0, 0]), np.asarray(res.sites.nat1[:, 0]))
    x, w = np.polynomial.hermite.hermgauss(60)
    f = m[:, None] + np.sqrt(2 * np.diag(C))[:, None] * x[None, :]
    ell = np.sum(log_ndtr(y[:, None] * f) @ w / np.sqrt(np.pi))
    assert abs(res.log_marginal - gaussian_elbo(K, m, C, ell)) < 1e-8


def test_laplace_energy_is_the_textbook_formula_before_convergence():
    """R&W eq. 3.32 with W = site precision at an arbitrary (unconverged) iterate."""
    X, y = _data(20, 7)
    K = matern52(X, X, 1.0, 1.0)
    res = bnlab.infer(_model("logit", 1.0, 1.0), X, y, method="laplace", max_iters=2, damping=0.4)
    lam, nu = np.asarray(res.sites.prec[:, 0, 0]), np.asarray(res.sites.nat1[:, 0])
    m, _ = posterior_from_sites(K, lam, nu)
    loglik = -np.logaddexp(0, -y * m).sum()
    expected = (loglik - 0.5 * m @ np.linalg.solve(K, m)
                - 0.5 * np.linalg.slogdet(np.eye(len(y)) + K @ np.diag(lam))[1])
    assert abs(res.log_marginal - expected) < 1e-8


def test_pl2_gauss_newton_equals_pl_for_discrete_likelihoods():
    X, y = _data(20, 8)
    model = _model("probit", 1.0, 1.0)
    pl = bnlab.infer(model, X, y, method="pl", max_iters=15, tol=1e-12)
    pl2_gn = bnlab.infer(model, X, y, method="pl2_gn", max_iters=15, tol=1e-12)
    np.testing.assert_allclose(np.asarray(pl2_gn.sites.prec), np.asarray(pl.sites.prec), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(pl2_gn.sites.nat1), np.asarray(pl.sites.nat1), rtol=1e-10)


@pytest.mark.parametrize("y_n", [-1.0, 1.0])
def test_pl_and_pl2_site_targets_match_closed_form_probit_slr(y_n):
    """For probit, y = ±1, the SLR of ν(f) = 2Φ(f) − 1 under N(m, C) has a closed form:
    μ = 2Φ(z) − 1 with z = m/√(1+C), Q = 2Cφ(z)/√(1+C), S = 1 − μ² (ν² + Var[y|f] = 1),
    Ω = S − Q²/C. PL's (J, H) are A Ω⁻¹(y − μ) and −A²/Ω with A = Q/C. A Bernoulli
    likelihood is not of eq. 33's Gaussian form, so PL2 holds Ω fixed and drops log Z
    (``pl2_target``): its (J, H) are the derivatives in m of −½(y − μ(m))²/Ω with Ω
    taken at the current m — J is PL's — here by central differences of the closed
    form (scipy), independent of the likelihood's closed form
    (``Bernoulli.slr_moments``) and autodiff. m = 0 is where |z| has its kink."""
    import jax.numpy as jnp
    from scipy.stats import norm

    from bnlab import cubature
    from bnlab.methods.base import LocalInput
    from bnlab.methods.linearisation import pl2_local, pl_local

    lik, rule = bnlab.likelihoods.Bernoulli("probit"), cubature.make_rule("gauss_hermite", 20, 1)

    def slr(m, C):
        z = m / np.sqrt(1 + C)
        mu = 2 * norm.cdf(z) - 1
        Q = 2 * C * norm.pdf(z) / np.sqrt(1 + C)
        return mu, Q, 1 - mu**2 - Q**2 / C

    def target(m, C, om):
        return -0.5 * (y_n - slr(m, C)[0]) ** 2 / om

    for m, C in [(0.3, 0.2), (-1.1, 0.7), (1.8, 1.5), (0.0, 0.05)]:
        inp = LocalInput({}, jnp.asarray(y_n), jnp.array([m]), jnp.array([[C]]),
                         jnp.zeros((1, 1)), jnp.zeros(1), jnp.zeros((1, 1)), 1.0, 0.5, ())
        mu, Q, om = slr(m, C)
        pl, _ = pl_local(lik, rule)(inp)
        np.testing.assert_allclose(float(pl.J[0]), Q / C * (y_n - mu) / om, rtol=1e-12)
        np.testing.assert_allclose(float(pl.H[0, 0]), -(Q / C) ** 2 / om, rtol=1e-12)
        h = 1e-4
        up, mid, down = target(m + h, C, om), target(m, C, om), target(m - h, C, om)
        pl2, _ = pl2_local(lik, rule)(inp)
        np.testing.assert_allclose(float(pl2.J[0]), (up - down) / (2 * h), rtol=1e-6)
        np.testing.assert_allclose(float(pl2.J[0]), float(pl.J[0]), rtol=1e-12)
        np.testing.assert_allclose(float(pl2.H[0, 0]), (up - 2 * mid + down) / h**2,
                                   rtol=1e-4, atol=1e-6)


def test_probit_slr_moments_closed_form_against_quadrature():
    """``Bernoulli.slr_moments`` (probit, closed form) against adaptive quadrature of
    μ = E[2Φ(f) − 1], Q = Cov[f, ν(f)] and S = E[(ν − μ)² + 4Φ(f)Φ(−f)] (scipy), against
    the same closed form written with scipy's tail-accurate Φ (the tail, where the
    quadrature has only absolute accuracy), and the generic cubature moments
    (``Likelihood.slr_moments``, GH-80) agreeing where a Gauss–Hermite rule can resolve
    the link (not under a wide Gaussian)."""
    import jax.numpy as jnp
    from scipy.integrate import quad
    from scipy.stats import norm

    from bnlab import cubature
    from bnlab.likelihoods import Likelihood

    lik = bnlab.likelihoods.Bernoulli("probit")

    def by_quadrature(m, C):
        sd = np.sqrt(C)
        pts = [m - 12 * sd, -8.0, 0.0, 8.0, m + 12 * sd]
        E = lambda g: quad(lambda f: g(f) * norm.pdf(f, m, sd), min(pts), max(pts),  # noqa: E731
                           points=sorted(pts)[1:-1], limit=400, epsabs=1e-13, epsrel=1e-11)[0]
        nu = lambda f: norm.cdf(f) - norm.sf(f)  # noqa: E731
        mu = E(nu)
        return (mu, E(lambda f: (f - m) * (nu(f) - mu)),
                E(lambda f: (nu(f) - mu) ** 2 + 4 * norm.cdf(f) * norm.sf(f)))

    def by_scipy_closed_form(m, C):
        z = m / np.sqrt(1 + C)
        return (norm.cdf(z) - norm.sf(z), 2 * C * norm.pdf(z) / np.sqrt(1 + C),
                4 * norm.cdf(z) * norm.sf(z))

    gh80 = cubature.make_rule("gauss_hermite", 80, 1)
    for m, C, resolved in [(0.0, 1.0, True), (0.3, 0.2, True), (-2.5, 3.0, True), (1.2, 0.01, True),
                           (6.0, 0.5, True), (-9.0, 2.0, True), (0.7, 400.0, False),
                           (-30.0, 900.0, False)]:
        mean, cov = jnp.array([m]), jnp.array([[C]])
        closed = [float(np.ravel(v)[0]) for v in lik.slr_moments({}, mean, cov, gh80)]
        np.testing.assert_allclose(closed, by_quadrature(m, C), rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(closed, by_scipy_closed_form(m, C), rtol=1e-12, atol=1e-300)
        if resolved:
            generic = [float(np.ravel(v)[0])
                       for v in Likelihood.slr_moments(lik, {}, mean, cov, gh80)]
            np.testing.assert_allclose(generic, closed, rtol=1e-8, atol=1e-14)


@pytest.mark.parametrize("base,alpha", [("laplace", 1.0), ("vi", 1.0), ("pep", 0.5)])
def test_riemannian_variants_share_their_base_methods_fixed_point(base, alpha):
    """The Riemannian correction −(ρ/2) G Λ̄⁻¹ G with G = Λ̄ + H (Lin et al. 2020) vanishes
    where the base update is stationary (G = 0), and with a log-concave likelihood
    (H ≤ 0) that is its only fixed point: Laplace-, VI- and PEP-Riemann must converge
    to the Laplace mode, the VI optimum and the PEP fixed point."""
    X, y = _data(20, 5)
    model = _model("probit", 1.0, 2.0)
    kw = dict(alpha=alpha, damping=0.5, max_iters=2000, tol=1e-12)
    ref = bnlab.infer(model, X, y, method=base, **kw)
    riem = bnlab.infer(model, X, y, method=f"{base}_riemann", **kw)
    assert ref.converged and riem.converged
    np.testing.assert_allclose(np.asarray(riem.sites.prec), np.asarray(ref.sites.prec),
                               rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(riem.sites.nat1), np.asarray(ref.sites.nat1),
                               rtol=1e-8, atol=1e-10)
    assert riem.log_marginal == pytest.approx(ref.log_marginal, abs=1e-9)


@pytest.mark.parametrize("variant", ["laplace", "laplace_gn", "laplace_qn"])
def test_laplace_variants_find_the_posterior_mode(variant):
    """Whatever H a Laplace-type method uses, its fixed point has λ = −H and
    ν = J − H m, so (K⁻¹ + Λ) m = ν gives K⁻¹ m = ∇ log p(y | m): the MAP mode. Checked
    against R&W Algorithm 3.1 (Newton in numpy, logit link)."""
    X, y = _data(25, 6)
    model = _model("logit", 1.2, 3.0)
    K = matern52(X, X, 1.2, 3.0)
    f = np.zeros(len(y))
    for _ in range(50):                                  # R&W Alg. 3.1
        p = 1 / (1 + np.exp(-f))
        sW = np.sqrt(p * (1 - p))
        B = np.eye(len(y)) + sW[:, None] * K * sW[None, :]
        b = p * (1 - p) * f + (y + 1) / 2 - p
        f = K @ (b - sW * np.linalg.solve(B, sW * (K @ b)))
    res = bnlab.infer(model, X, y, method=variant, damping=0.5, max_iters=3000, tol=1e-12)
    assert res.converged
    np.testing.assert_allclose(res.mean, f, atol=1e-9)


@pytest.mark.parametrize("variant", ["laplace_gn", "taylor"])
def test_gauss_newton_forms_reach_a_mode_in_the_probit_tail(variant):
    """At a large prior variance the probit mode reaches |f| ≈ 8.3, where 1 − Φ(f)
    rounds to 0: Var[y|f] computed as 4p(1 − p) was 0 there, the Gauss–Newton and
    Taylor residuals 0/0 and both runs stopped as diverged with a NaN energy (at 9 % of
    the surface benchmark's grid). With q = Φ(−f) they converge to the MAP mode,
    checked against L-BFGS on ½vᵀv − Σ log Φ(y_n (Lv)_n) in whitened coordinates
    (scipy, scikit-learn's Matérn matrix). Measured: 50 iterations, 7e-7 apart."""
    from scipy.optimize import minimize
    X, y = bnlab.datasets.synthetic_probit()
    point = (0.8, 8.2)
    K = np.exp(point[1]) * Matern(length_scale=np.exp(point[0]), nu=2.5)(X)
    L = np.linalg.cholesky(K + 1e-9 * np.mean(np.diag(K)) * np.eye(len(y)))

    def objective(v):
        z = y * (L @ v)
        mills = np.exp(-0.5 * z**2 - 0.5 * np.log(2 * np.pi) - log_ndtr(z))
        return 0.5 * v @ v - log_ndtr(z).sum(), v - L.T @ (y * mills)

    opt = minimize(objective, np.zeros(len(y)), jac=True, method="L-BFGS-B",
                   options=dict(maxiter=20000, gtol=1e-10, ftol=1e-15))
    mode = L @ opt.x
    assert opt.success and np.abs(mode).max() > 8.3
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=np.exp(point[0]),
                                            variance=np.exp(point[1])),
                     bnlab.likelihoods.Bernoulli("probit"))
    res = bnlab.infer(model, X, y, method=variant, max_iters=500)
    assert res.converged and not res.diverged and np.isfinite(res.log_marginal)
    np.testing.assert_allclose(res.mean, mode, atol=1e-5)


def test_bernoulli_conditional_moments_in_the_tails():
    """E[y|f] = p − q, Var[y|f] = 4pq against scipy's ndtr and expit, out to f = ±30."""
    from scipy.special import expit, ndtr
    f = np.array([-30.0, -8.5, -1.0, 0.0, 2.0, 8.5, 30.0])
    for link, cdf in (("probit", ndtr), ("logit", expit)):
        lik = bnlab.likelihoods.Bernoulli(link)
        for fn in f:
            mean, var = lik.conditional_moments({}, np.array([fn]))
            p, q = cdf(fn), cdf(-fn)
            assert float(var[0, 0]) == pytest.approx(4 * p * q, rel=1e-12) and var[0, 0] > 0
            assert float(mean[0]) == pytest.approx(p - q, rel=1e-14)


def test_predictions_match_dense_conditioning():
    X, y = _data(25, 9)
    Xs = np.linspace(-5, 5, 7)[:, None]
    K = matern52(X, X, 1.1, 1.7)
    Ks, kss = matern52(X, Xs, 1.1, 1.7), 1.7
    res = bnlab.infer(_model("probit", 1.1, 1.7), X, y, method="ep")
    tau = np.asarray(res.sites.prec[:, 0, 0])
    m, _ = posterior_from_sites(K, tau, np.asarray(res.sites.nat1[:, 0]))
    mean, var = res.predict(Xs)
    np.testing.assert_allclose(mean, Ks.T @ np.linalg.solve(K, m), atol=1e-8)
    # K⁻¹ − K⁻¹CK⁻¹ = (K + T⁻¹)⁻¹ with C = (K⁻¹ + T)⁻¹: K itself has condition 1e8 here,
    # and the K⁻¹ form of the reference lost 1.7e-7 at x = 5 with numpy 2.4.6
    expected_var = kss - np.einsum("ij,ij->j", Ks, np.linalg.solve(K + np.diag(1 / tau), Ks))
    np.testing.assert_allclose(var, expected_var, atol=1e-8)
    ys = np.where(Xs[:, 0] > 0, 1.0, -1.0)
    lpd = res.log_predictive(Xs, ys, reduce="none")
    np.testing.assert_allclose(lpd, log_ndtr(ys * mean / np.sqrt(1 + var)), atol=1e-10)


@pytest.mark.parametrize("structure", ["full", "markov"])
def test_joint_covariance_matches_dense_inverse(structure):
    X, y = _data(25, 10)
    K = matern52(X, X, 1.1, 1.7)
    cls = bnlab.GP if structure == "full" else bnlab.MarkovGP
    model = cls(kernel=bnlab.kernels.Matern52(1.1, 1.7), likelihood=bnlab.likelihoods.Bernoulli())
    res = bnlab.infer(model, X, y, method="ep")
    _, C = posterior_from_sites(K, np.asarray(res.sites.prec[:, 0, 0]), np.asarray(res.sites.nat1[:, 0]))
    np.testing.assert_allclose(res.joint_covariance(3, 17), C[np.ix_([3, 17], [3, 17])], atol=1e-9)


def test_stepper_predicts_and_covaries_as_the_finished_result():
    """What the lab draws after each step (``Stepper.predict``, ``Stepper.joint_covariance``
    and ``likelihoods.predictive_moments``) is what a finished run reports at the same
    state; a Markov state has no joint factorisation to read during a run."""
    X, y = _data(25, 10)
    model = bnlab.GP(bnlab.kernels.Matern52(1.1, 1.7), bnlab.likelihoods.Bernoulli())
    stepper = bnlab.Stepper(model, X, y, "ep")
    res = stepper.run(max_iters=300)
    Xs = np.linspace(-3, 3, 7)[:, None]
    mean, cov = stepper.predict(res.state, Xs)
    assert mean.shape == (7, 1) and cov.shape == (7, 1, 1)
    m_res, v_res = res.predict(Xs)
    np.testing.assert_allclose(np.asarray(mean)[:, 0], m_res, atol=1e-12)
    np.testing.assert_allclose(np.asarray(cov)[:, 0, 0], v_res, atol=1e-12)
    np.testing.assert_allclose(stepper.joint_covariance(res.state, 3, 17),
                               res.joint_covariance(3, 17), atol=1e-12)
    lik = model.likelihood
    ey, vy = bnlab.likelihoods.predictive_moments(lik, res.params["likelihood"], mean, cov)
    for n in (0, 3, 6):
        e, v = lik.predictive_moments(res.params["likelihood"], mean[n], cov[n], None)
        assert float(ey[n]) == pytest.approx(float(e), abs=1e-12)
        assert float(vy[n]) == pytest.approx(float(v), abs=1e-12)
    markov = bnlab.Stepper(bnlab.MarkovGP(kernel=bnlab.kernels.Matern52(1.1, 1.7),
                                          likelihood=bnlab.likelihoods.Bernoulli()), X, y, "ep")
    with pytest.raises(ValueError, match="needs the full GP model, not a markov one"):
        markov.joint_covariance(markov.init(), 3, 17)
    with pytest.raises(ValueError, match="X_test has 2 column"):
        stepper.predict(res.state, np.ones((3, 2)))


def test_bernoulli_probit_predictive_moments_in_the_tails():
    """E[y*] = p − q, Var[y*] = 4pq with p = Φ(m/√(1 + v)) (R&W eq. 3.82) against
    scipy's ndtr, out to m/√(1 + v) = ±30, where 4p(1 − p) would round to 0."""
    from scipy.special import ndtr
    lik = bnlab.likelihoods.Bernoulli("probit")
    for m in (-60.0, -17.0, -2.0, 0.0, 4.0, 17.0, 60.0):
        z = m / np.sqrt(1.0 + 3.0)
        mean, var = lik.predictive_moments({}, np.array([m]), np.array([[3.0]]), None)
        p, q = ndtr(z), ndtr(-z)
        assert float(var) == pytest.approx(4 * p * q, rel=1e-12) and var > 0
        assert float(mean) == pytest.approx(p - q, rel=1e-14)


@pytest.mark.parametrize("method", sorted(n for n, m in REGISTRY.items()
                                             if m.reuses_energy_pass and n != "heuristic"
                                             and not n.endswith("_riemann")))
def test_energy_pass_reuse_follows_the_local_updates_own_derivatives(method):
    """The methods that take their derivatives from the previous energy pass
    (``Method.reuses_energy_pass``) follow the same iterates as when each local update
    differentiates its own target at the current marginals (logit: every expectation
    by cubature; Power EP at α = 0.5)."""
    import dataclasses

    import jax.numpy as jnp

    from bnlab.engine.loop import Engine
    from bnlab.engine.state import Settings

    X, y = _data(25, 3)
    model = _model("logit", 1.0, 3.0)
    params = model.init_params()
    X, y = jnp.asarray(X), jnp.asarray(y)
    settings = Settings(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray(0.0))
    engines = [Engine(model, method, ("gauss_hermite", 20), ()) for _ in range(2)]
    engines[1].method = dataclasses.replace(engines[1].method, reuses_energy_pass=False)
    states = [engine.init(params, X, y, settings) for engine in engines]
    for _ in range(8):
        states = [engine.step(params, X, y, settings, state)[0]
                  for engine, state in zip(engines, states)]
    reused, own = states
    assert float(jnp.max(jnp.abs(reused.sites.prec))) > 0.1
    np.testing.assert_allclose(np.asarray(reused.sites.nat1), np.asarray(own.sites.nat1),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(reused.sites.prec), np.asarray(own.sites.prec),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(reused.energy), float(own.energy), rtol=1e-12)
