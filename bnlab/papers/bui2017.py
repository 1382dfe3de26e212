"""BYT17 §4.1 (Bui, Yan & Turner 2017, App. I.1): synthetic regression with the
collapsed Power-EP energy. Data are drawn from a 5-D ARD squared-exponential GP,
hyperparameters and pseudo-inputs are fitted by maximising the PEP energy with L-BFGS
from the same start for every α, and the test SMSE of the optimal q(u) is reported.
Used by tests/sparse_gp/test_sparse_pep_regression.py and benchmarks/byt17.py."""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

from ..sparse import bounds as sb
from ..kernels import RBF
from ..likelihoods import Gaussian
from ..model import SparseGP

__all__ = ["ALPHAS", "draw_dataset", "fit_and_score", "experiment", "fraction_half_wins"]

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


def experiment(seeds, n, num_inducing, max_evals, alphas=ALPHAS):
    """SMSE per seed (rows) and α (columns)."""
    model = SparseGP(RBF(np.ones(DIM), 1.0), Gaussian(0.1),
                           num_inducing=num_inducing)
    return np.array([[fit_and_score(model, *draw_dataset(s, n), a, max_evals) for a in alphas]
                     for s in seeds])


def fraction_half_wins(smse):
    """Fraction of rows where column 1 (α = 0.5) beats columns 0 (VFE) and 2 (EP)."""
    return float(np.mean((smse[:, 1] < smse[:, 0]) & (smse[:, 1] < smse[:, 2])))
