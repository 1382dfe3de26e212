"""BYT17 §4.1 (synthetic regression): data drawn from a 5-D ARD squared-exponential
GP, hyperparameters and pseudo-inputs fitted by maximising the PEP energy with
L-BFGS; "an intermediate value of α … seems to be best for prediction on average,
outperforming both EP and VFE". We compare test SMSE of α = 0.5 against α → 0 (VFE,
the exact limit) and α = 1 (FITC/EP) on independent draws and report the fraction of
draws in which α = 0.5 beats both."""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import bnlab
from bnlab import sparse_bounds as sb

ALPHAS = (0.0, 0.5, 1.0)
DIM = 5


def draw_dataset(seed, n):
    """n points from a GP with ARD SE kernel (BYT17 App. I.1), split 50:50."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, DIM))
    ls = rng.uniform(0.8, 2.5, DIM)
    K = np.exp(-0.5 * (((X[:, None] - X[None]) / ls) ** 2).sum(-1))
    f = np.linalg.cholesky(K + 1e-8 * np.eye(n)) @ rng.standard_normal(n)
    y = f + np.sqrt(0.05) * rng.standard_normal(n)
    half = n // 2
    return X[:half], y[:half], X[half:], y[half:]


def _unpack(z, Z_shape):
    return {"kernel": [{"lengthscale": jnp.exp(z[:DIM]), "variance": jnp.exp(z[DIM])}],
            "likelihood": {"noise": jnp.exp(z[DIM + 1])},
            "inducing": z[DIM + 2:].reshape(Z_shape)}


@partial(jax.jit, static_argnums=(0, 5))
def _negative_energy(model, z, alpha, X, y, Z_shape):
    """−(PEP energy) and its gradient in (log θ, Z); one compilation per data shape."""
    return jax.value_and_grad(
        lambda z_: -sb.collapsed_bound(model, _unpack(z_, Z_shape), X, y, "pep", alpha=alpha))(z)


def fit_and_score(model, X, y, Xs, ys, alpha, max_evals):
    """Maximise the PEP energy over log-hyperparameters and Z (from k-means); return
    the test SMSE."""
    Z0 = np.asarray(model.init_params(X)["inducing"])
    z0 = np.concatenate([np.zeros(DIM), [0.0, np.log(0.1)], Z0.ravel()])
    fun = lambda z: [np.asarray(v, float) for v in _negative_energy(model, z, alpha, X, y, Z0.shape)]
    res = minimize(fun, z0, jac=True, method="L-BFGS-B", options={"maxfun": max_evals})
    mean, _ = sb.predict(model, _unpack(res.x, Z0.shape), X, y, Xs, "pep", alpha=alpha)
    return float(np.mean((np.asarray(mean) - ys) ** 2) / np.var(ys))


def experiment(seeds, n, num_inducing, max_evals):
    """SMSE per seed (rows) and α (columns, ALPHAS)."""
    model = bnlab.SparseGP(bnlab.kernels.RBF(np.ones(DIM), 1.0), bnlab.likelihoods.Gaussian(0.1),
                           num_inducing=num_inducing)
    return np.array([[fit_and_score(model, *draw_dataset(s, n), a, max_evals) for a in ALPHAS]
                     for s in seeds])


def fraction_half_wins(smse):
    return float(np.mean((smse[:, 1] < smse[:, 0]) & (smse[:, 1] < smse[:, 2])))


def test_intermediate_alpha_predicts_best_small():
    """Small, fast version: α = 0.5 must beat VFE in SMSE in most draws (BYT17 §4.2
    reports 67 % on UCI data); the fraction beating both VFE and EP is printed."""
    smse = experiment(range(3), n=300, num_inducing=8, max_evals=200)
    print("SMSE (α = 0, 0.5, 1):\n", smse, "\nα = 0.5 best in", fraction_half_wins(smse))
    assert np.all(np.isfinite(smse)) and np.all(smse < 1.0)
    assert np.mean(smse[:, 1] < smse[:, 0]) > 0.5


@pytest.mark.slow
def test_intermediate_alpha_predicts_best_paper_size():
    """BYT17 sizes: N = 1000 (500 train), M = 10. The paper's headline (α = 0.5 beats
    both VFE and EP on average) is printed; what is asserted is what reproduces here
    (see benchmarks/README.md, "Sparse GP: Power-EP regression")."""
    smse = experiment(range(10), n=1000, num_inducing=10, max_evals=1000)
    print("SMSE (α = 0, 0.5, 1):\n", smse, "\nα = 0.5 best in", fraction_half_wins(smse))
    assert np.mean(smse[:, 1] < smse[:, 0]) > 0.5
