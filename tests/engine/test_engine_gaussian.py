"""Gaussian likelihood: every site method must reach the exact posterior, and its
energy must equal the exact log marginal likelihood (scikit-learn's GPR)."""
import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern

import bnlab
from bnlab.methods.registry import REGISTRY

NOISE, LENGTHSCALE, VARIANCE = 0.09, 1.3, 0.8


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (25, 1))
    y = np.sin(X[:, 0]) + 0.3 * rng.standard_normal(25)
    gpr = GaussianProcessRegressor(ConstantKernel(VARIANCE) * Matern(LENGTHSCALE, nu=2.5),
                                   alpha=NOISE, optimizer=None).fit(X, y)
    mean, std = gpr.predict(X, return_std=True)
    model = bnlab.GP(kernel=bnlab.kernels.Matern52(LENGTHSCALE, VARIANCE),
                     likelihood=bnlab.likelihoods.Gaussian(noise=NOISE))
    return model, X, y, gpr.log_marginal_likelihood_value_, mean, std**2


@pytest.mark.parametrize("method", list(REGISTRY))
def test_exact_posterior_and_evidence(problem, method):
    model, X, y, log_ml, mean, var = problem
    res = bnlab.infer(model, X, y, method=method, damping=0.5, max_iters=256, tol=1e-9)
    assert res.converged or method == "pep_qn", res
    assert abs(res.log_marginal - log_ml) < 1e-6
    np.testing.assert_allclose(res.mean, mean, atol=1e-6)
    np.testing.assert_allclose(res.cov, var, atol=1e-6)
    assert res.trace.psd.all()


def test_undamped_step_gives_exact_sites(problem):
    """With ρ = 1 one step of Newton / VI / EP / PL sets m̄ = y, C̄ = σ² (notes §8.12)."""
    model, X, y, *_ = problem
    for method in ("laplace", "vi", "ep", "pl", "taylor", "laplace_gn"):
        res = bnlab.infer(model, X, y, method=method, damping=1.0, max_iters=1, tol=1e-9)
        np.testing.assert_allclose(np.asarray(res.sites.prec[:, 0, 0]), 1 / NOISE, rtol=1e-10)
        np.testing.assert_allclose(np.asarray(res.sites.nat1[:, 0]), y / NOISE, rtol=1e-10)


def test_a_registered_composition_runs_through_infer(problem):
    """Adding a method is one registry entry: a composition the registry does not ship
    (the Riemannian correction of Laplace's Gauss–Newton form) is accepted by ``infer``
    once registered and, as every site method must on a Gaussian likelihood, reaches the
    exact posterior and evidence."""
    from bnlab.methods.registry import register, riemannian
    model, X, y, log_ml, mean, var = problem
    toy = riemannian(REGISTRY["laplace_gn"])
    with pytest.raises(ValueError, match="unknown method"):
        bnlab.infer(model, X, y, method=toy.name)
    register(toy)
    try:
        res = bnlab.infer(model, X, y, method=toy.name, damping=0.5, max_iters=256, tol=1e-9)
    finally:
        REGISTRY.pop(toy.name)
    assert res.converged
    assert abs(res.log_marginal - log_ml) < 1e-6
    np.testing.assert_allclose(res.mean, mean, atol=1e-6)


def test_the_public_stepper_steps_to_the_exact_evidence(problem):
    """``bnlab.Stepper`` (what the lab drives live) stepped one iteration at a time
    reaches the exact evidence, in as many iterations as ``infer``'s compiled run."""
    model, X, y, log_ml, mean, var = problem
    stepper = bnlab.Stepper(model, X, y, method="ep", damping=0.5, tol=1e-9)
    state, iterations = stepper.init(), 0
    while iterations < 256:
        state, info = stepper.step(state)
        iterations += 1
        if bool(info.converged):
            break
    assert abs(float(state.energy) - log_ml) < 1e-6
    assert iterations == stepper.run(256).n_iters
