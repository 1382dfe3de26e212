"""SparseGP through the site engine: the Power-EP pseudo-point limits of Bui et al.
(2017) against plain-numpy formulas, scikit-learn's exact GP and the full-GP EP."""
import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

import bnlab
from bnlab.inducing import kmeans, random_subset

LS, VAR, NOISE = 0.7, 1.3, 0.09


def rbf(A, B):
    return VAR * np.exp(-0.5 * (A[:, None, 0] - B[None, :, 0]) ** 2 / LS**2)


def log_normal(y, S):
    L = np.linalg.cholesky(S)
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 6, (50, 1))
    y = np.sin(X[:, 0]) + 0.3 * rng.standard_normal(50)
    Z = np.linspace(0.3, 5.7, 7)[:, None]
    Kuu = rbf(Z, Z) + 1e-8 * VAR * np.eye(len(Z))
    Q = rbf(X, Z) @ np.linalg.solve(Kuu, rbf(Z, X))
    d = VAR - np.diag(Q)
    model = bnlab.SparseGP(bnlab.kernels.RBF(LS, VAR), bnlab.likelihoods.Gaussian(NOISE), inducing=Z)
    return model, X, y, Z, Q, d


def pep_closed_form(y, Q, d, alpha):
    """BYT17 §3.6: log N(y; 0, Q + α diag(D) + σ²I) − (1−α)/(2α) Σ log(1 + αd/σ²)."""
    return (log_normal(y, Q + np.diag(alpha * d) + NOISE * np.eye(len(y)))
            - (1 - alpha) / (2 * alpha) * np.log1p(alpha * d / NOISE).sum())


def test_pep_alpha_one_is_fitc(regression):
    model, X, y, Z, Q, d = regression
    fitc = log_normal(y, Q + np.diag(d) + NOISE * np.eye(len(y)))
    res = bnlab.infer(model, X, y, method="pep", alpha=1.0, damping=1.0, max_iters=20)
    assert res.converged
    assert res.log_marginal == pytest.approx(fitc, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.25, 0.5])
def test_pep_any_alpha_is_closed_form(regression, alpha):
    model, X, y, Z, Q, d = regression
    res = bnlab.infer(model, X, y, method="pep", alpha=alpha, damping=0.5, max_iters=200)
    assert res.converged
    assert res.log_marginal == pytest.approx(pep_closed_form(y, Q, d, alpha), abs=1e-8)


def test_small_alpha_and_vi_are_titsias(regression):
    model, X, y, Z, Q, d = regression
    titsias = log_normal(y, Q + NOISE * np.eye(len(y))) - d.sum() / (2 * NOISE)
    pep = bnlab.infer(model, X, y, method="pep", alpha=1e-6, damping=1.0, max_iters=20)
    vi = bnlab.infer(model, X, y, method="vi", damping=1.0, max_iters=20)
    assert pep.log_marginal == pytest.approx(titsias, rel=1e-6)
    assert vi.log_marginal == pytest.approx(titsias, abs=1e-9)


def test_laplace_is_dtc_evidence(regression):
    """Sparse Laplace uses point estimates f_n = W_n u: for Gaussian noise its energy is
    the DTC evidence log N(y; 0, Q + σ²I) (BYT17 eq. 2 with α → 0)."""
    model, X, y, Z, Q, d = regression
    res = bnlab.infer(model, X, y, method="laplace", damping=1.0, max_iters=20)
    assert res.log_marginal == pytest.approx(log_normal(y, Q + NOISE * np.eye(len(y))), abs=1e-9)


def test_fitc_prediction(regression):
    """α = 1 predictive = FITC eq. (1) of BYT17 with K̄ = Q + diag(D) + σ²I."""
    model, X, y, Z, Q, d = regression
    Xs = np.linspace(-1, 7, 9)[:, None]
    Kuu = rbf(Z, Z) + 1e-8 * VAR * np.eye(len(Z))
    Qsf = rbf(Xs, Z) @ np.linalg.solve(Kuu, rbf(Z, X))
    Kbar = Q + np.diag(d) + NOISE * np.eye(len(y))
    mean_ref = Qsf @ np.linalg.solve(Kbar, y)
    var_ref = VAR - np.einsum("ij,ji->i", Qsf, np.linalg.solve(Kbar, Qsf.T))
    res = bnlab.infer(model, X, y, method="pep", alpha=1.0, damping=1.0, max_iters=20)
    mean, var = res.predict(Xs)
    np.testing.assert_allclose(mean, mean_ref, atol=1e-8)
    np.testing.assert_allclose(var, var_ref, atol=1e-8)


@pytest.mark.parametrize("method, alpha", [("vi", 1.0), ("pep", 1.0), ("pep", 0.5)])
def test_inducing_at_data_is_exact_gp(regression, method, alpha):
    model, X, y, *_ = regression
    exact = GaussianProcessRegressor(ConstantKernel(VAR) * SkRBF(LS), alpha=NOISE,
                                     optimizer=None).fit(X, y).log_marginal_likelihood_value_
    full = bnlab.SparseGP(model.kernel, model.likelihood, inducing=X)
    res = bnlab.infer(full, X, y, method=method, alpha=alpha, damping=1.0, max_iters=20)
    assert res.log_marginal == pytest.approx(exact, abs=1e-5)


@pytest.fixture(scope="module")
def probit():
    ds = bnlab.datasets.load("classification_1d", n=50)
    kernel = bnlab.kernels.Matern52(1.0, 1.5)
    return ds.X, ds.y, kernel, bnlab.likelihoods.Bernoulli("probit")


def test_probit_inducing_at_data_reaches_full_ep(probit):
    """BYT17 §3.8 / App. I.5: α = 1, M = N, Z = X is standard EP for GPC."""
    X, y, kernel, lik = probit
    full = bnlab.infer(bnlab.GP(kernel, lik), X, y, method="ep", damping=0.5, max_iters=500, tol=1e-10)
    sparse = bnlab.infer(bnlab.SparseGP(kernel, lik, inducing=X), X, y, method="ep", damping=0.5,
                         max_iters=500, tol=1e-10)
    assert full.converged and sparse.converged
    assert sparse.log_marginal == pytest.approx(full.log_marginal, abs=1e-5)
    np.testing.assert_allclose(sparse.mean, full.mean, atol=1e-6)
    np.testing.assert_allclose(sparse.cov, full.cov, atol=1e-6)


def test_probit_small_alpha_tends_to_svgp_elbo(probit):
    """BYT17 eqs. 39–46: as α → 0 the PEP energy tends to the Hensman et al. (2015)
    ELBO (at first order in α); the energies approach it monotonically here."""
    X, y, kernel, lik = probit
    model = bnlab.SparseGP(kernel, lik, inducing=X[::5])
    vi = bnlab.infer(model, X, y, method="vi", damping=0.5, max_iters=500, tol=1e-10)
    gaps = [bnlab.infer(model, X, y, method="pep", alpha=a, damping=0.5, max_iters=500,
                        tol=1e-10).log_marginal - vi.log_marginal for a in (0.5, 0.1, 0.01, 0.001)]
    assert gaps[0] > gaps[1] > gaps[2] > gaps[3] > 0
    assert gaps[3] < 0.02
    assert 5 < gaps[2] / gaps[3] < 15          # first order in α


def test_probit_laplace_is_laplace_of_projected_model(probit):
    """Laplace on the sparse model = Laplace approximation of ∫ p(u) Π Φ(y_n w_nᵀu) du,
    computed here by Newton's method in numpy on u."""
    from scipy.special import log_ndtr
    from scipy.stats import norm
    X, y, kernel, lik = probit
    Z = X[::5]
    model = bnlab.SparseGP(kernel, lik, inducing=Z)
    p = model.init_params()
    Kuu = np.asarray(kernel(p["kernel"][0], Z, Z)) + 1e-8 * 1.5 * np.eye(len(Z))
    W = np.linalg.solve(Kuu, np.asarray(kernel(p["kernel"][0], Z, X))).T
    u = np.zeros(len(Z))
    for _ in range(50):
        z = y * (W @ u)
        r = np.exp(norm.logpdf(z) - log_ndtr(z))
        grad = W.T @ (y * r) - np.linalg.solve(Kuu, u)
        hess_lik = r * (z + r)
        H = W.T @ (hess_lik[:, None] * W) + np.linalg.inv(Kuu)
        u = u + np.linalg.solve(H, grad)
    z = y * (W @ u)
    r = np.exp(norm.logpdf(z) - log_ndtr(z))
    H = W.T @ ((r * (z + r))[:, None] * W) + np.linalg.inv(Kuu)
    ref = (log_ndtr(z).sum() - 0.5 * u @ np.linalg.solve(Kuu, u)
           - 0.5 * np.linalg.slogdet(Kuu @ H)[1])
    res = bnlab.infer(model, X, y, method="laplace", damping=1.0, max_iters=100, tol=1e-12)
    assert res.log_marginal == pytest.approx(ref, abs=1e-7)


@pytest.mark.slow
def test_two_latents_inducing_at_data_match_full_gp():
    ds = bnlab.datasets.load("heteroscedastic_1d", n=30)
    lik = bnlab.likelihoods.Heteroscedastic()
    kernel = bnlab.kernels.Matern52(1.0, 1.0)
    full = bnlab.infer(bnlab.GP(kernel, lik), ds.X, ds.y, method="vi", damping=0.5, max_iters=300)
    sparse = bnlab.infer(bnlab.SparseGP(kernel, lik, inducing=ds.X), ds.X, ds.y, method="vi",
                         damping=0.5, max_iters=300)
    assert sparse.log_marginal == pytest.approx(full.log_marginal, abs=1e-5)
    np.testing.assert_allclose(sparse.predict(ds.X_test)[0], full.predict(ds.X_test)[0], atol=1e-5)


def test_num_inducing_chooses_kmeans_centres(regression):
    """Without Z in params, prepare() uses the same k-means centres as init_params(X)."""
    from bnlab.posterior import sparse
    model, X, y, *_ = regression
    auto = bnlab.SparseGP(model.kernel, model.likelihood, num_inducing=8)
    Z = np.asarray(auto.init_params(X)["inducing"])
    np.testing.assert_allclose(sparse.prepare(auto, auto.init_params(), X).Z, Z)
    np.testing.assert_allclose(Z, kmeans(X, 8, seed=0))


def test_kmeans_beats_random_subset_on_clustered_data():
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(5, 2)) * 10
    X = (centres[:, None, :] + rng.normal(size=(5, 40, 2))).reshape(-1, 2)

    def sse(Z):
        return np.min(((X[:, None] - np.asarray(Z)[None]) ** 2).sum(-1), 1).sum()

    Zr = np.asarray(random_subset(X, 5, seed=0))
    assert len({tuple(z) for z in Zr}) == 5 and all((X == z).all(1).any() for z in Zr)
    assert sse(kmeans(X, 5, seed=0)) <= sse(Zr)
    assert sse(kmeans(X, 5, seed=0)) < 2.5 * 200   # ≈ 2 per point (unit-variance clusters)


def test_bad_configurations_raise():
    k, lik = bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian()
    X = np.zeros((10, 1))
    with pytest.raises(ValueError, match="exactly one"):
        bnlab.SparseGP(k, lik)
    with pytest.raises(ValueError, match="exactly one"):
        bnlab.SparseGP(k, lik, inducing=X, num_inducing=3)
    with pytest.raises(ValueError, match="posterior"):
        bnlab.SparseGP(k, lik, num_inducing=3, posterior="full")
    with pytest.raises(ValueError, match="block_size"):
        bnlab.SparseGP(k, lik, num_inducing=3, posterior="block")
    with pytest.raises(ValueError, match="inducing_init"):
        bnlab.SparseGP(k, lik, num_inducing=3, inducing_init="grid")
    with pytest.raises(ValueError, match="exceeds"):
        bnlab.SparseGP(k, lik, num_inducing=30).init_params(X)
    with pytest.raises(ValueError, match="columns"):
        bnlab.infer(bnlab.SparseGP(k, lik, inducing=np.zeros((3, 2))), X, np.zeros(10))
    with pytest.raises(ValueError, match=r"sparse\.bounds\.collapsed_bound"):
        bnlab.infer(bnlab.SparseGP(k, lik, num_inducing=3, posterior="diag"), X, np.zeros(10))
