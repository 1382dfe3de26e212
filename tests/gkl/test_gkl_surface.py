"""``gkl_bound_at_optimum``: the pure, vmap-able optimum for hyperparameter surfaces
agrees with ``bnlab.infer(method="gkl")`` point by point, and its gradient is the
derivative of the optimum (checked by central finite differences of the optimum)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.gkl.gp import gkl_bound_at_optimum

pytestmark = pytest.mark.slow     # the fast check is tests/studies/test_surface.py (gkl surface = infer)


def test_vmapped_optimum_and_its_gradient():
    ds = bnlab.datasets.load("classification_1d", n=30)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.0, variance=1.0),
                     bnlab.likelihoods.Bernoulli("probit"))
    p0 = model.init_params()
    f = lambda p: gkl_bound_at_optimum(p, ds.X, ds.y, model=model, covariance="banded",
                                       band=3, tol=1e-12)
    lengthscales = jnp.array([0.7, 1.5])
    grid = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (2,) + jnp.shape(x)), p0)
    grid["kernel"][0]["lengthscale"] = lengthscales
    values = jax.vmap(f)(grid)

    def at(**kernel):
        p = jax.tree_util.tree_map(lambda x: x, p0)
        p["kernel"][0].update({k: jnp.asarray(v, float) for k, v in kernel.items()})
        return p

    # the data are shuffled for infer: the default ordering sorts them back
    perm = np.random.default_rng(0).permutation(len(ds.y))
    for ell, v in zip(lengthscales, values):
        r = bnlab.infer(model, ds.X[perm], ds.y[perm], method="gkl", covariance="banded",
                        band=3, params=at(lengthscale=ell), tol=1e-12, max_iters=500)
        assert float(v) == pytest.approx(r.log_marginal, abs=1e-7)

    grad = jax.grad(f)(p0)["kernel"][0]
    h = 1e-5
    for name in ("lengthscale", "variance"):
        x0 = float(p0["kernel"][0][name])
        fd = (f(at(**{name: x0 + h})) - f(at(**{name: x0 - h}))) / (2 * h)
        assert float(grad[name]) == pytest.approx(float(fd), rel=1e-5, abs=1e-6)
