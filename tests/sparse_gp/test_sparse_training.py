"""Uncollapsed sparse objectives and minibatch training: collapsed = uncollapsed at the
optimal q(u) (BT25 App. A), unbiased minibatch estimates, and training that reaches
the full-batch optimum / the site engine's VI fixed point."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import bnlab
from bnlab.sparse import bounds as sb
from bnlab.sparse import training as st


@pytest.fixture(scope="module")
def reg():
    rng = np.random.default_rng(0)
    N = 200
    X = rng.uniform(-3, 3, (N, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.standard_normal(N)
    model = bnlab.SparseGP(bnlab.kernels.RBF(0.8, 1.0), bnlab.likelihoods.Gaussian(0.05),
                           num_inducing=8, posterior="block", block_size=10)
    return model, model.init_params(X), X, y


@pytest.mark.parametrize("kind, alpha", [("svgp", 0.0), ("diag", 0.0), ("block", 0.0),
                                         ("tpep", 0.5), ("tpep", 0.0)])
def test_uncollapsed_at_optimal_q_is_collapsed(reg, kind, alpha):
    model, p, X, y = reg
    q = st.optimal_qu_whitened(model, p, X, y, kind=kind, alpha=alpha, scale=0.7)
    unc = st.uncollapsed_objective(model, p, q, X, y, kind=kind, alpha=alpha)
    col = sb.collapsed_bound(model, p, X, y, kind, alpha=alpha, block_size=None if kind == "block" else 1,
                             scale=0.7 if kind == "tpep" else None)
    assert float(unc) == pytest.approx(float(col), abs=1e-8)
    # …and it is the maximiser over q: zero gradient in the mean
    g = jax.grad(lambda m: st.uncollapsed_objective(model, p, q._replace(mean=m), X, y,
                                                    kind=kind, alpha=alpha))(q.mean)
    assert np.max(np.abs(g)) < 1e-8


@pytest.mark.parametrize("kind", ["svgp", "diag", "tpep", "block"])
def test_minibatch_estimate_is_unbiased(reg, kind):
    """Averaging the N/|b|-scaled estimate over a partition into batches gives the
    full objective exactly; so does its expectation over uniform random batches."""
    model, p, X, y = reg
    q = st.optimal_qu_whitened(model, p, X, y)
    q = q._replace(mean=q.mean + 0.3, log_scale=np.log(0.6))
    full = float(st.uncollapsed_objective(model, p, q, X, y, kind=kind, alpha=0.5))
    est = lambda idx: float(st.minibatch_objective(model, p, q, X[idx], y[idx], len(y),
                                                   kind=kind, alpha=0.5))
    parts = [est(np.arange(i, i + 20)) for i in range(0, len(y), 20)]
    assert np.mean(parts) == pytest.approx(full, abs=1e-8)
    rng = np.random.default_rng(1)
    if kind == "block":   # batches of whole blocks
        draws = [est((rng.choice(20, 2, replace=False)[:, None] * 10 + np.arange(10)).ravel())
                 for _ in range(150)]
    else:
        draws = [est(rng.choice(len(y), 20, replace=False)) for _ in range(150)]
    assert abs(np.mean(draws) - full) < 4 * np.std(draws) / np.sqrt(len(draws))


def test_minibatch_training_approaches_full_batch_optimum():
    rng = np.random.default_rng(2)
    N = 1000
    X = rng.uniform(-3, 3, (N, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(N)
    model = bnlab.SparseGP(bnlab.kernels.RBF(0.8, 1.0), bnlab.likelihoods.Gaussian(0.05),
                           num_inducing=12)
    p0 = model.init_params(X)

    def unpack(z):
        return {**p0, "kernel": [{"lengthscale": jnp.exp(z[0]), "variance": jnp.exp(z[1])}],
                "likelihood": {"noise": jnp.exp(z[2])}}

    neg = jax.jit(jax.value_and_grad(lambda z: -sb.collapsed_bound(model, unpack(z), X, y, "svgp")))
    best = minimize(lambda z: [np.asarray(v) for v in neg(z)], np.log([0.8, 1.0, 0.05]),
                    jac=True, method="L-BFGS-B")
    res = st.fit_minibatch(model, X, y, p0, kind="svgp", batch_size=100, num_steps=2000,
                           learning_rate=0.02, learn=("kernel", "likelihood"))
    start = float(sb.collapsed_bound(model, p0, X, y, "svgp"))
    reached = float(sb.collapsed_bound(model, res.params, X, y, "svgp"))
    assert -best.fun - reached < 0.01 * (-best.fun - start)
    assert float(res.params["likelihood"]["noise"]) == pytest.approx(np.exp(best.x[2]), rel=0.05)


def test_full_batch_natural_gradient_reaches_engine_vi_probit():
    """Natural-gradient SVGP on probit with fixed hyperparameters (Hensman et al. 2015)
    reaches the same ELBO as the site engine's VI on the same SparseGP."""
    ds = bnlab.datasets.load("classification_1d", n=60)
    model = bnlab.SparseGP(bnlab.kernels.Matern52(1.0, 1.5), bnlab.likelihoods.Bernoulli("probit"),
                           num_inducing=10)
    p = model.init_params(ds.X)
    vi = bnlab.infer(model, ds.X, ds.y, method="vi", params=p, damping=1.0, max_iters=200, tol=1e-10)
    res = st.fit_minibatch(model, ds.X, ds.y, p, kind="svgp", batch_size=60, num_steps=60,
                           ng_step=1.0, learn=())
    elbo = float(st.uncollapsed_objective(model, p, res.q, ds.X, ds.y, kind="svgp"))
    assert elbo == pytest.approx(vi.log_marginal, abs=1e-7)
    mean, var = res.predict(ds.X_test)
    ref_mean, ref_var = vi.predict(ds.X_test)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(var, ref_var, atol=1e-6)


def test_bad_arguments_raise(reg):
    model, p, X, y = reg
    probit = bnlab.SparseGP(model.kernel, bnlab.likelihoods.Bernoulli(), num_inducing=5)
    with pytest.raises(ValueError, match="Gaussian"):
        st.fit_minibatch(probit, X, np.sign(y), kind="diag")
    with pytest.raises(ValueError, match="kind"):
        st.fit_minibatch(model, X, y, kind="pep")
    with pytest.raises(ValueError, match="multiples"):
        st.fit_minibatch(model, X, y, kind="block", batch_size=25)
    with pytest.raises(ValueError, match="learn"):
        st.fit_minibatch(model, X, y, kind="svgp", learn=("noise",))
    with pytest.raises(ValueError, match="SparseGP"):
        st.fit_minibatch(bnlab.GP(model.kernel, model.likelihood), X, y)
