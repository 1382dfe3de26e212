"""A method added with ``bnlab.methods.register`` and a likelihood added to
``bnlab.likelihoods.LIKELIHOODS`` reach the lab with no UI edit: the sidebar, Compare
and Surfaces built after them offer them, their records decide which controls apply
(α; noise / scale, degrees of freedom, cubature order), and they run in the lab's
``Runner`` with the lab's settings."""
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.methods import Method, register, unregister
from bnlab.methods.power_ep import pep_local
from bnlab.ui.compare import CompareView
from bnlab.ui.compare_model import converge
from bnlab.ui.controls import Controls, Status
from bnlab.ui.problem import build_problem
from bnlab.ui.settings import LabSettings
from bnlab.ui.surfaces import SurfacesView

TOY = "toy_power_ep"
TOY_LIKELIHOOD = "toy_normal"
TOY_PRECISION = "toy_precision"


@pytest.fixture
def toy_method():
    """Power EP written as a new record (no shared energy pass, no Anderson mixing),
    registered for one test and removed after it."""
    method = register(Method(name=TOY, energy="pep", make_local=pep_local,
                             psd_guaranteed=False, uses_alpha=True,
                             description="Power EP, registered by a test"))
    yield method
    unregister(TOY)


def test_a_registered_method_is_offered_by_the_lab_built_after_it(toy_method):
    settings = LabSettings(method=TOY, alpha=0.3)
    assert TOY in settings.param.method.objects
    # its record says it takes α: the α control is shown and used
    assert "alpha" not in settings.reasons() and settings.effective_alpha() == 0.3
    # its record says it is not mixed and does not ascend the ELBO
    assert "accelerate" in settings.reasons() and "backtrack" in settings.reasons()
    controls = Controls(settings, Status())
    assert controls.widgets["method"].options[f"{TOY} — Power EP, registered by a test"] == TOY
    assert controls.rows["alpha"].visible

    compare = CompareView(LabSettings(method="vi"), method_a=TOY)
    assert TOY in compare.param.method_b.objects
    assert compare.widgets["alpha_a"].visible and not compare.widgets["alpha_b"].visible

    surfaces = SurfacesView(LabSettings())
    assert TOY in surfaces.methods.options
    assert "alpha" not in surfaces.param.axis0.objects
    surfaces.methods.value = [TOY]
    assert "alpha" in surfaces.param.axis0.objects


def test_an_unregistered_method_leaves_the_lab_built_after(toy_method):
    unregister(TOY)
    try:
        assert TOY not in LabSettings().param.method.objects
        assert TOY not in CompareView(LabSettings()).param.method_a.objects
        with pytest.raises(ValueError):
            LabSettings(method=TOY)
    finally:
        register(toy_method)


def test_a_registered_method_runs_in_the_lab_at_the_lab_s_alpha(toy_method):
    """Its converged energy in the lab's Runner equals Power EP's at the same α through
    ``bnlab.infer`` (the same fixed point), and is not EP's: the lab's α reached it."""
    settings = LabSettings(method=TOY, alpha=0.3)          # probit classification
    problem = build_problem(settings)
    run = converge(problem, TOY, settings)
    assert run.stop_reason() == "converged"
    peer = bnlab.infer(problem.model, problem.X, problem.y, method="pep", alpha=0.3,
                       params=problem.params, tol=1e-10, max_iters=1000)
    ep = bnlab.infer(problem.model, problem.X, problem.y, method="ep",
                     params=problem.params, tol=1e-10, max_iters=1000)
    assert peer.stop_reason == ep.stop_reason == "converged"
    assert abs(run.energy[-1] - float(peer.log_marginal)) < 1e-6
    assert abs(run.energy[-1] - float(ep.log_marginal)) > 1e-3       # 5e-3 here


def test_the_whole_lab_offers_a_registered_method_and_its_live_page_runs_it(toy_method):
    """``bnlab.ui.Lab()`` built after ``register``: chosen in the sidebar, at the
    sidebar's α, the Live page's run converges to Power EP's energy through ``infer``."""
    import panel as pn

    import bnlab.ui
    pn.extension()
    lab = bnlab.ui.Lab()
    try:
        assert TOY in lab.compare.param.method_a.objects and TOY in lab.surfaces.methods.options
        lab.controls.widgets["method"].value = TOY
        lab.settings.alpha = 0.3
        assert lab.controls.rows["alpha"].visible
        run = lab.live.runner
        assert (run.method, run.alpha) == (TOY, 0.3)
        lab.live.step(200)
        assert run.stop_reason() == "converged"
        p = lab.live.problem
        peer = bnlab.infer(p.model, p.X, p.y, method="pep", alpha=0.3, params=p.params,
                           tol=1e-10, max_iters=1000)
        assert abs(run.energy[-1] - float(peer.log_marginal)) < 1e-6
    finally:
        lab.close()


class NormalBySD(bnlab.likelihoods.Likelihood):
    """y = f + ε, ε ~ N(0, s²), its hyperparameter the standard deviation s ("scale"):
    the Gaussian likelihood written anew, with cubature for every expectation."""

    name = TOY_LIKELIHOOD
    label = "Normal, noise as a standard deviation"
    log_concave = True

    def __init__(self, scale=0.1):
        self.scale = float(scale)

    def init_params(self):
        return {"scale": jnp.asarray(self.scale)}

    def log_prob(self, params, y, f):
        s = params["scale"]
        return -0.5 * (jnp.log(2 * jnp.pi * s ** 2) + (y - f[0]) ** 2 / s ** 2)

    def conditional_moments(self, params, f):
        return f[:1], jnp.reshape(params["scale"] ** 2, (1, 1))


@pytest.fixture
def toy_likelihood():
    bnlab.likelihoods.LIKELIHOODS[TOY_LIKELIHOOD] = NormalBySD
    yield NormalBySD
    del bnlab.likelihoods.LIKELIHOODS[TOY_LIKELIHOOD]


def _matern52(X, lengthscale, variance):
    r = np.abs(X[:, None, 0] - X[None, :, 0]) / lengthscale
    return variance * (1 + np.sqrt(5) * r + 5 * r ** 2 / 3) * np.exp(-np.sqrt(5) * r)


def test_an_added_likelihood_is_offered_and_runs_in_the_lab(toy_likelihood):
    """Its controls follow its ``init_params()`` (a scale, no degrees of freedom) and
    its expectations (cubature: the order applies); built from the sidebar's scale and
    run by VI in the lab's Runner, its energy is the exact log p(y) of GP regression
    with noise variance s² (VI is exact for a Gaussian likelihood, and Gauss–Hermite
    integrates its quadratic log density exactly)."""
    settings = LabSettings(dataset="regression_1d", likelihood=TOY_LIKELIHOOD, lik_scale=0.3,
                           method="vi")
    reasons = settings.reasons()
    assert "lik_scale" not in reasons and "cubature_order" not in reasons and "df" in reasons
    controls = Controls(settings, Status())
    assert controls.widgets["likelihood"].options[NormalBySD.label] == TOY_LIKELIHOOD
    assert controls.rows["lik_scale"].visible and not controls.rows["df"].visible
    surfaces = SurfacesView(settings)
    assert "scale" in surfaces.param.axis0.objects and "noise" not in surfaces.param.axis0.objects

    problem = build_problem(settings)
    assert isinstance(problem.model.likelihood, NormalBySD)
    assert float(problem.params["likelihood"]["scale"]) == 0.3
    run = converge(problem, "vi", settings)
    assert run.stop_reason() == "converged"
    X, y = np.asarray(problem.X), np.asarray(problem.y)
    kernel = problem.params["kernel"][0]
    C = _matern52(X, float(kernel["lengthscale"]), float(kernel["variance"]))
    C += 0.3 ** 2 * np.eye(len(y))
    _, logdet = np.linalg.slogdet(C)
    exact = -0.5 * (y @ np.linalg.solve(C, y) + logdet + len(y) * np.log(2 * np.pi))
    assert abs(run.energy[-1] - exact) < 1e-8


class NormalByPrecision(bnlab.likelihoods.Likelihood):
    """y = f + ε, ε ~ N(0, 1/τ), its hyperparameter a name no other likelihood has and
    the lab has no control for: the precision τ."""

    name = TOY_PRECISION
    label = "Normal, noise as a precision"
    log_concave = True

    def __init__(self, precision=25.0):
        self.precision = float(precision)

    def init_params(self):
        return {"precision": jnp.asarray(self.precision)}

    def log_prob(self, params, y, f):
        tau = params["precision"]
        return 0.5 * (jnp.log(tau / (2 * jnp.pi)) - tau * (y - f[0]) ** 2)

    def conditional_moments(self, params, f):
        return f[:1], jnp.reshape(1 / params["precision"], (1, 1))


@pytest.fixture
def toy_precision():
    bnlab.likelihoods.LIKELIHOODS[TOY_PRECISION] = NormalByPrecision
    yield NormalByPrecision
    del bnlab.likelihoods.LIKELIHOODS[TOY_PRECISION]


def _evidence(X, y, lengthscale, variance, noise):
    """log N(y | 0, K + noise·I): GP regression's exact log marginal likelihood."""
    C = _matern52(X, lengthscale, variance) + noise * np.eye(len(y))
    _, logdet = np.linalg.slogdet(C)
    return -0.5 * (y @ np.linalg.solve(C, y) + logdet + len(y) * np.log(2 * np.pi))


def test_a_new_likelihood_hyperparameter_is_a_surface_axis_and_is_learned(toy_precision):
    """τ, named nowhere but in the toy's definition (``bnlab.hyperparameters`` reads it
    from ``init_params()``), is offered by the lab's Surfaces page and is an axis of
    ``bnlab.surface``: the page's VI surface over (τ, lengthscale) is the exact log p(y)
    of GP regression with noise variance 1/τ (VI is exact for a Gaussian likelihood).
    Learning takes it too: the gradient in log τ is that evidence's (central
    differences)."""
    from bnlab.studies.learning import learnable, objective_gradient
    settings = LabSettings(dataset="regression_1d", likelihood=TOY_PRECISION, method="vi")
    view = SurfacesView(settings)
    assert "precision" in view.param.axis0.objects
    view.methods.value = ["vi"]
    view.param.update(axis0="precision", lo0=4.0, hi0=100.0, axis1="lengthscale", lo1=0.3,
                      hi1=3.0, points=3)
    view.compute()
    surface = view.dataset.log_marginal.sel(scheme="vi")
    problem = build_problem(settings)
    X, y = np.asarray(problem.X), np.asarray(problem.y)
    variance = float(problem.params["kernel"][0]["variance"])
    exact = [[_evidence(X, y, ls, variance, 1 / tau) for ls in surface.lengthscale.values]
             for tau in surface.precision.values]
    np.testing.assert_allclose(surface.values, exact, rtol=1e-8)

    model, params = problem.model, problem.params
    assert learnable(model, params)[0] == ["lengthscale", "variance", "precision"]
    run = bnlab.infer(model, X, y, method="vi", params=params, damping=1.0, tol=1e-12)
    _, grad = objective_gradient(model, X, y, "vi", params, run.sites, learn=["precision"])
    h, tau, ls = 1e-5, float(params["likelihood"]["precision"]), settings.lengthscale
    fd = (_evidence(X, y, ls, variance, np.exp(-h) / tau)
          - _evidence(X, y, ls, variance, np.exp(h) / tau)) / (2 * h)
    assert float(grad["precision"]) == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("name, options", [("pep", {}), ("vi", {}),
                                           ("heuristic", {"base": "pep"}),
                                           ("heuristic", {"base": "vi"}), (TOY, {})])
def test_takes_alpha_is_what_the_engine_does(toy_method, name, options):
    """The one α rule agrees with the engine: a method that takes α converges to another
    energy at α = 0.3 than at α = 1 (Power EP's energy depends on α for a non-Gaussian
    likelihood); one that does not gives the same energy whatever α it is handed."""
    from bnlab.methods import takes_alpha
    problem = build_problem(LabSettings())                   # probit classification
    energies = [float(bnlab.infer(problem.model, problem.X, problem.y, method=name, alpha=a,
                                  params=problem.params, tol=1e-10, max_iters=1000,
                                  **options).log_marginal) for a in (0.3, 1.0)]
    assert (abs(energies[0] - energies[1]) > 1e-4) == takes_alpha(name, **options), energies


def test_ep_takes_no_alpha():
    """EP is Power EP at α = 1: ``infer`` refuses another α, and the rule says it has none."""
    from bnlab.methods import takes_alpha
    problem = build_problem(LabSettings())
    with pytest.raises(ValueError, match="α = 1"):
        bnlab.infer(problem.model, problem.X, problem.y, method="ep", alpha=0.3)
    assert not takes_alpha("ep") and takes_alpha("pep")


def test_unregister_removes_only_registered_methods(toy_method):
    with pytest.raises(ValueError, match="built-in"):
        unregister("vi")
    with pytest.raises(ValueError, match="already exists"):
        register(toy_method)
