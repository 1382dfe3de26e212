"""Collapsed sparse-GP regression objectives (BYT17 §3.6–3.7, BT25 eqs. 4, 6, 8, 14)
against dense numpy formulas, their limits and the bound ordering of BT25."""
import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

import bnlab
from bnlab.sparse import bounds as sb


def dense_terms(X, Z, ls, var):
    k = lambda A, B: var * np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1) / ls**2)
    Kuu = k(Z, Z) + 1e-8 * var * np.eye(len(Z))
    Q = k(X, Z) @ np.linalg.solve(Kuu, k(Z, X))
    return k(X, X), Q


def log_normal(y, S):
    L = np.linalg.cholesky(S)
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi)


def blkdiag(D, size):
    idx = np.arange(len(D)) // size
    return D * (idx[:, None] == idx[None, :])


_MODELS = {}


def problem(seed, N=48, M=6, dim=2):
    """Random data, Z and hyperparameters; every number travels in params, so one
    model object (one compilation) serves all seeds with the same M."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, dim))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.standard_normal(N)
    Z = X[rng.choice(N, M, replace=False)]
    ls, var, noise = rng.uniform(0.5, 1.5), rng.uniform(0.5, 2.0), rng.uniform(0.02, 0.3)
    model = _MODELS.setdefault(M, bnlab.SparseGP(bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian(),
                                                 num_inducing=M))
    params = {"kernel": [{"lengthscale": ls, "variance": var}], "likelihood": {"noise": noise},
              "inducing": Z}
    K, Q = dense_terms(X, Z, ls, var)
    return model, params, X, y, K, Q, noise


@pytest.fixture(scope="module")
def prob():
    return problem(0)


def test_vfe_diag_block_match_dense_formulas(prob):
    model, p, X, y, K, Q, s2 = prob
    N = len(y)
    D = K - Q
    base = log_normal(y, Q + s2 * np.eye(N))
    assert sb.collapsed_bound(model, p, X, y, "svgp") == pytest.approx(
        base - np.trace(D) / (2 * s2), abs=1e-9)
    assert sb.collapsed_bound(model, p, X, y, "diag") == pytest.approx(
        base - 0.5 * np.log1p(np.diag(D) / s2).sum(), abs=1e-9)
    for size in (5, 12):        # 48 = 9·5 + 3: a shorter last block
        ref = base - 0.5 * np.linalg.slogdet(np.eye(N) + blkdiag(D, size) / s2)[1]
        assert sb.collapsed_bound(model, p, X, y, "block", block_size=size) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.1])
@pytest.mark.parametrize("size", [1, 8])
def test_block_pep_matches_dense_formula(prob, alpha, size):
    """BYT17 §3.7 with the corrected sign: −Σ_b (1−α)/(2α) log|I + αD_bb/σ²|; α = 1 is
    FITC (size 1) / PITC."""
    model, p, X, y, K, Q, s2 = prob
    N = len(y)
    Db = blkdiag(K - Q, size)
    ref = (log_normal(y, Q + alpha * Db + s2 * np.eye(N))
           - (1 - alpha) / (2 * alpha) * np.linalg.slogdet(np.eye(N) + alpha * Db / s2)[1])
    got = sb.collapsed_bound(model, p, X, y, "pep", alpha=alpha, block_size=size)
    assert got == pytest.approx(ref, abs=1e-9)


def test_small_alpha_limits(prob):
    """α → 0: PEP (any blocking) → Titsias (BYT17 Remarks 3 and 6); T-PEP → the
    spherical bound with m* = (1 + tr D/(Nσ²))⁻¹ (BT25 §3.2, Remark 2)."""
    model, p, X, y, K, Q, s2 = prob
    N = len(y)
    vfe = float(sb.collapsed_bound(model, p, X, y, "svgp"))   # pytest ≥ 9.2: no jax.Array
    for alpha in (0.0, 1e-7):
        for size in (1, 8):
            assert sb.collapsed_bound(model, p, X, y, "pep", alpha=alpha, block_size=size) == \
                pytest.approx(vfe, abs=1e-5)
    spherical = log_normal(y, Q + s2 * np.eye(N)) - N / 2 * np.log1p(np.trace(K - Q) / (N * s2))
    assert sb.collapsed_bound(model, p, X, y, "tpep", alpha=0.0) == pytest.approx(spherical, abs=1e-6)
    assert sb.collapsed_bound(model, p, X, y, "tpep", alpha=1e-6) == pytest.approx(spherical, abs=1e-4)


def test_tpep_consistency(prob):
    """BT25 eq. 14: m = 1 is BYT17's PEP; α = 1 is log N(y; 0, Q + m diag(D) + σ²I);
    the maximising m beats any other m."""
    model, p, X, y, K, Q, s2 = prob
    N = len(y)
    for a in (0.3, 0.7):
        assert sb.collapsed_bound(model, p, X, y, "tpep", alpha=a, scale=1.0) == pytest.approx(
            float(sb.collapsed_bound(model, p, X, y, "pep", alpha=a)), abs=1e-9)
    d = np.diag(K - Q)
    assert sb.collapsed_bound(model, p, X, y, "tpep", alpha=1.0, scale=0.4) == pytest.approx(
        log_normal(y, Q + 0.4 * np.diag(d) + s2 * np.eye(N)), abs=1e-9)
    best = sb.collapsed_bound(model, p, X, y, "tpep", alpha=0.5)
    for m in (0.05, 0.2, 0.5, 1.0, 2.0):
        assert best >= sb.collapsed_bound(model, p, X, y, "tpep", alpha=0.5, scale=m) - 1e-8


@pytest.mark.parametrize("seed", range(4))
def test_bound_ordering_below_exact(seed):
    """BT25: SVGP ≤ spherical (T-SGPR, mI) ≤ diagonal ≤ block ≤ coarser nested block ≤
    log p(y) (exact, from scikit-learn)."""
    model, p, X, y, K, Q, s2 = problem(seed, N=40)
    ls, var = float(p["kernel"][0]["lengthscale"]), float(p["kernel"][0]["variance"])
    exact = GaussianProcessRegressor(ConstantKernel(var) * SkRBF(ls), alpha=s2,
                                     optimizer=None).fit(X, y).log_marginal_likelihood_value_
    chain = [sb.collapsed_bound(model, p, X, y, "svgp"),
             sb.collapsed_bound(model, p, X, y, "tpep", alpha=0.0),
             sb.collapsed_bound(model, p, X, y, "diag"),
             sb.collapsed_bound(model, p, X, y, "block", block_size=5),
             sb.collapsed_bound(model, p, X, y, "block", block_size=20),
             exact]
    assert np.all(np.diff(np.array(chain, float)) > 0), chain


def test_inducing_at_data_every_bound_is_exact():
    """BYT17 §2.1 / notes R4: M = N, Z = X makes D = 0 (T-PEP's optimal m is then 1)."""
    model, p, X, y, K, Q, s2 = problem(1, N=30, M=30)
    p = {**p, "inducing": X}
    ls, var = float(p["kernel"][0]["lengthscale"]), float(p["kernel"][0]["variance"])
    exact = GaussianProcessRegressor(ConstantKernel(var) * SkRBF(ls), alpha=s2,
                                     optimizer=None).fit(X, y).log_marginal_likelihood_value_
    for kind, kw in [("svgp", {}), ("diag", {}), ("block", {"block_size": 6}),
                     ("pep", {"alpha": 0.5}), ("tpep", {"alpha": 0.5})]:
        assert sb.collapsed_bound(model, p, X, y, kind, **kw) == pytest.approx(exact, abs=1e-5), kind


def test_prediction_and_q_u_match_dense_formulas(prob):
    """q(u) ∝ p(u) N(y; K_fu K_uu⁻¹u, Λ), Λ = αD + σ²I for PEP (BYT17 §3.6)."""
    model, p, X, y, K, Q, s2 = prob
    Z = np.asarray(p["inducing"])
    ls, var = float(p["kernel"][0]["lengthscale"]), float(p["kernel"][0]["variance"])
    k = lambda A, B: var * np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1) / ls**2)
    Kuu = k(Z, Z) + 1e-8 * var * np.eye(len(Z))
    Kuf = k(Z, X)
    Lam = 0.5 * np.diag(K - Q) + s2
    W = np.linalg.solve(Kuu, Kuf)
    S = np.linalg.inv(np.linalg.inv(Kuu) + (W / Lam) @ W.T)
    m = S @ (W @ (y / Lam))
    mu, Su = sb.optimal_q_u(model, p, X, y, "pep", alpha=0.5)
    np.testing.assert_allclose(mu, m, atol=1e-7)
    np.testing.assert_allclose(Su, S, atol=1e-7)
    Xs = np.random.default_rng(5).uniform(-3, 3, (7, 2))
    A = np.linalg.solve(Kuu, k(Z, Xs)).T
    mean, vs = sb.predict(model, p, X, y, Xs, "pep", alpha=0.5)
    np.testing.assert_allclose(mean, A @ m, atol=1e-7)
    np.testing.assert_allclose(vs, var - np.einsum("ij,ji->i", A, k(Z, Xs)) +
                               np.einsum("ij,jk,ik->i", A, S, A), atol=1e-7)


def test_gradients_are_finite_and_match_finite_differences(prob):
    import jax
    model, p, X, y, *_ = prob
    f = lambda lengthscale: sb.collapsed_bound(
        model, {**p, "kernel": [{**p["kernel"][0], "lengthscale": lengthscale}]}, X, y,
        "block", block_size=8)
    ls = p["kernel"][0]["lengthscale"]
    g = jax.grad(f)(ls)
    fd = float(f(ls + 1e-6) - f(ls - 1e-6)) / 2e-6
    assert np.isfinite(g) and g == pytest.approx(fd, rel=1e-5)


def test_bad_arguments_raise(prob):
    model, p, X, y, *_ = prob
    with pytest.raises(ValueError, match="kind"):
        sb.collapsed_bound(model, p, X, y, "fitc")
    with pytest.raises(ValueError, match="alpha"):
        sb.collapsed_bound(model, p, X, y, "pep")
    with pytest.raises(ValueError, match="alpha"):
        sb.collapsed_bound(model, p, X, y, "pep", alpha=1.5)
    with pytest.raises(ValueError, match="block_size"):
        sb.collapsed_bound(model, p, X, y, "block")
    probit = bnlab.SparseGP(model.kernel, bnlab.likelihoods.Bernoulli(), inducing=X[:3])
    with pytest.raises(ValueError, match="Gaussian"):
        sb.collapsed_bound(probit, probit.init_params(), X, np.sign(y), "svgp")
    with pytest.raises(ValueError, match="columns"):
        sb.collapsed_bound(model, {**p, "inducing": X[:3, :1]}, X, y, "svgp")
