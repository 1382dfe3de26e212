"""Hyperparameters, settings and test inputs are checked where they enter: a
TypeError (not a number) or ValueError (bad value or shape) naming the parameter,
never a silent reinterpretation (a lengthscale −1 running as +1, NaN as ∞, an ARD
vector broadcasting) nor a crash deep inside numpy or JAX."""
import time

import numpy as np
import pytest

import bnlab
from bnlab.infer import MAX_ITERS
from reference import matern52

X = np.linspace(-2, 2, 12)[:, None]
Y_CLASS = np.where(np.sin(2 * X[:, 0]) > 0, 1.0, -1.0)
Y_REG = np.sin(2 * X[:, 0])
X2 = np.column_stack([X[:, 0], np.cos(X[:, 0])])


def _gaussian_gp():
    return bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.0, variance=1.0),
                    bnlab.likelihoods.Gaussian(0.1))


# ---- kernel and likelihood constructors ----------------------------------------------

@pytest.mark.parametrize("make,error,match", [
    (lambda: bnlab.kernels.Matern52(lengthscale=np.nan), ValueError, r"Matern52 lengthscale must be finite, got nan"),
    (lambda: bnlab.kernels.Matern52(lengthscale=np.inf), ValueError, r"Matern52 lengthscale must be finite"),
    (lambda: bnlab.kernels.RBF(lengthscale=[1.0, -2.0]), ValueError, r"RBF lengthscale must be positive"),
    (lambda: bnlab.kernels.RBF(lengthscale=[1.0, np.nan]), ValueError, r"RBF lengthscale must be finite"),
    (lambda: bnlab.kernels.Matern32(lengthscale=[]), ValueError, r"Matern32 lengthscale .*shape \(0,\)"),
    (lambda: bnlab.kernels.Matern32(lengthscale=[[1.0]]), ValueError, r"Matern32 lengthscale .*shape \(1, 1\)"),
    (lambda: bnlab.kernels.Matern12(variance=np.nan), ValueError, r"Matern12 variance must be finite"),
    (lambda: bnlab.kernels.Matern12(variance=np.inf), ValueError, r"Matern12 variance must be finite"),
    (lambda: bnlab.kernels.Matern12(variance=[1.0, 2.0]), ValueError, r"Matern12 variance .*shape \(2,\)"),
    (lambda: bnlab.kernels.Matern52(variance="1.0"), TypeError, r"Matern52 variance must be a positive number, got '1.0'"),
    (lambda: bnlab.kernels.Matern52(lengthscale=None), TypeError, r"Matern52 lengthscale .*got None"),
    (lambda: bnlab.kernels.Periodic(period=np.inf), ValueError, r"Periodic period must be finite"),
    (lambda: bnlab.kernels.Periodic(period="2"), TypeError, r"Periodic period"),
    (lambda: bnlab.likelihoods.Gaussian(noise=np.inf), ValueError, r"Gaussian noise must be finite"),
    (lambda: bnlab.likelihoods.Gaussian(noise="0.1"), TypeError, r"Gaussian noise .*got '0.1'"),
    (lambda: bnlab.likelihoods.StudentT(df=np.inf), ValueError, r"StudentT df must be finite"),
    (lambda: bnlab.likelihoods.StudentT(scale=-1.0), ValueError, r"StudentT scale must be positive"),
    (lambda: bnlab.likelihoods.Laplace(scale=np.nan), ValueError, r"Laplace scale must be finite"),
    (lambda: bnlab.likelihoods.Product(noise=np.inf), ValueError, r"Product noise must be finite"),
])
def test_constructors_reject_bad_hyperparameters(make, error, match):
    with pytest.raises(error, match=match):
        make()


# ---- data --------------------------------------------------------------------------------

def test_validate_data_checks_what_infer_takes():
    """``bnlab.validate_data``: X as (N, d), y as (N,), before anything is built; bad rows
    and mismatched lengths named."""
    model = _gaussian_gp()
    Xv, yv = bnlab.validate_data(model, X[:, 0], Y_REG)
    assert Xv.shape == (12, 1) and yv.shape == (12,)
    bad = Y_REG.copy()
    bad[[2, 5]] = np.nan
    with pytest.raises(ValueError, match=r"rows \[2, 5\]"):
        bnlab.validate_data(model, X, bad)
    with pytest.raises(ValueError, match="X has 12 rows but y has 11 entries"):
        bnlab.validate_data(model, X, Y_REG[:11])


# ---- infer(params=...) ---------------------------------------------------------------

def _with(kernel=None, likelihood=None, model=None):
    model = model or _gaussian_gp()
    params = model.init_params()
    params["kernel"][0].update(kernel or {})
    params["likelihood"].update(likelihood or {})
    return params


@pytest.mark.parametrize("params,error,match", [
    (_with(kernel={"lengthscale": -1.0}), ValueError, r"params\['kernel'\]\[0\]\['lengthscale'\] must be positive, got -1.0"),
    (_with(kernel={"lengthscale": np.nan}), ValueError, r"\['lengthscale'\] must be finite"),
    (_with(kernel={"variance": np.inf}), ValueError, r"\['variance'\] must be finite"),
    (_with(kernel={"variance": 0.0}), ValueError, r"\['variance'\] must be positive"),
    (_with(kernel={"variance": "2"}), TypeError, r"\['variance'\] must be a positive number, got '2'"),
    (_with(likelihood={"noise": -0.1}), ValueError, r"params\['likelihood'\]\['noise'\] must be positive"),
    (_with(kernel={"period": 1.0}), ValueError, r"params\['kernel'\]\[0\] must have the keys .*unknown \['period'\]"),
    ({"lengthscale": -1.0}, ValueError, r"params must be a dict like model.init_params\(\).*unknown \['lengthscale'\]"),
    ({"kernel": [{"lengthscale": 1.0}], "likelihood": {"noise": 0.1}}, ValueError,
     r"params\['kernel'\]\[0\] must have the keys \['lengthscale', 'variance'\]: missing \['variance'\]"),
    ({"kernel": [{"lengthscale": 1.0, "variance": 1.0}]}, ValueError, r"missing \['likelihood'\]"),
    ({"kernel": [{"lengthscale": 1.0, "variance": 1.0}] * 2, "likelihood": {"noise": 0.1}}, ValueError,
     r"params\['kernel'\] must be a list of 1 dict"),
    ([1.0, 1.0], TypeError, r"params must be a dict like model.init_params\(\)"),
])
def test_infer_rejects_bad_params(params, error, match):
    with pytest.raises(error, match=match):
        bnlab.infer(_gaussian_gp(), X, Y_REG, method="vi", params=params)


def test_ard_lengthscale_must_match_the_input_width():
    """Two lengthscales for one input column used to broadcast silently (a different
    model); three for two columns, likewise. The right length is the exact GP."""
    lik = bnlab.likelihoods.Gaussian(0.1)
    with pytest.raises(ValueError, match=r"\['lengthscale'\] has 2 entries but the inputs have 1 column"):
        bnlab.infer(bnlab.GP(bnlab.kernels.Matern52(lengthscale=[1.0, 2.0]), lik), X, Y_REG)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale=1.0), lik)
    params = _with(kernel={"lengthscale": np.array([1.0, 2.0, 3.0])}, model=model)
    with pytest.raises(ValueError, match=r"has 3 entries but the inputs have 2 column"):
        bnlab.infer(model, X2, Y_REG, params=params)
    ell = np.array([0.7, 1.9])
    res = bnlab.infer(bnlab.GP(bnlab.kernels.Matern52(lengthscale=ell), lik), X2, Y_REG, method="vi")
    r = np.sqrt(5 * np.sum(((X2[:, None] - X2[None]) / ell) ** 2, -1))
    K = (1 + r + r**2 / 3) * np.exp(-r) + 0.1 * np.eye(len(X2))
    exact = -0.5 * (Y_REG @ np.linalg.solve(K, Y_REG) + np.linalg.slogdet(K)[1] + len(X2) * np.log(2 * np.pi))
    assert res.log_marginal == pytest.approx(exact, rel=1e-9)


def test_sparse_params_check_the_inducing_inputs():
    model = bnlab.SparseGP(bnlab.kernels.Matern52(), bnlab.likelihoods.Gaussian(0.1),
                           inducing=np.linspace(-2, 2, 4)[:, None])
    params = model.init_params()
    params["inducing"] = np.array([[0.0], [np.nan]])
    with pytest.raises(ValueError, match=r"params\['inducing'\] must be a finite \(M, 1\) array"):
        bnlab.infer(model, X, Y_REG, params=params)


def test_valid_params_run_and_match_the_exact_gaussian_evidence():
    """A positive control for the checks: jnp and numpy values, exact answer."""
    import jax.numpy as jnp
    params = {"kernel": [{"lengthscale": jnp.asarray(0.8), "variance": np.float64(1.3)}],
              "likelihood": {"noise": 0.2}}
    res = bnlab.infer(_gaussian_gp(), X, Y_REG, method="vi", params=params)
    K = matern52(X, X, 0.8, 1.3) + 0.2 * np.eye(len(X))
    exact = -0.5 * (Y_REG @ np.linalg.solve(K, Y_REG) + np.linalg.slogdet(K)[1] + len(X) * np.log(2 * np.pi))
    assert res.log_marginal == pytest.approx(exact, rel=1e-9)


def test_learning_checks_its_starting_hyperparameters():
    """Learning works on log θ: a negative start would be NaN from the first step."""
    bad = _with(kernel={"lengthscale": -1.0})
    with pytest.raises(ValueError, match=r"params\['kernel'\]\[0\]\['lengthscale'\] must be positive"):
        bnlab.learning.joint(_gaussian_gp(), X, Y_REG, method="vi", params=bad, steps=2)
    with pytest.raises(ValueError, match=r"params\['kernel'\]\[0\]\['lengthscale'\] must be positive"):
        bnlab.learning.hybrid(_gaussian_gp(), X, Y_REG, params=bad, outer=2)


# ---- numeric settings ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,error,match", [
    ({"alpha": "0.5", "method": "pep"}, TypeError, r"alpha must be a real number, got '0.5'"),
    ({"alpha": None, "method": "pep"}, TypeError, r"alpha must be a real number"),
    ({"damping": "0.5"}, TypeError, r"damping must be a real number, got '0.5'"),
    ({"tol": "1e-8"}, TypeError, r"tol must be a real number"),
    ({"tol": [1e-8, 1e-6]}, TypeError, r"tol must be a real number"),
    ({"max_iters": "10"}, TypeError, r"max_iters must be a real number, got '10'"),
    ({"max_iters": 2.5}, TypeError, r"max_iters must be an integer, got 2.5"),
    ({"max_iters": True}, TypeError, r"max_iters"),
    ({"max_iters": -3}, ValueError, r"max_iters must be an integer from 1 to"),
])
def test_infer_rejects_bad_settings(kwargs, error, match):
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli())
    with pytest.raises(error, match=match):
        bnlab.infer(model, X, Y_CLASS, **kwargs)


@pytest.mark.parametrize("max_iters", [MAX_ITERS + 1, 10**7, 10**9])
def test_huge_max_iters_is_refused_at_once(max_iters):
    """10**7 preallocated a 1.2 GB trace for n = 30 and 10**9 hung: above the documented
    cap the call fails before any allocation or compilation."""
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli())
    start = time.perf_counter()
    with pytest.raises(ValueError, match=rf"max_iters must be an integer from 1 to {MAX_ITERS} .*got {max_iters}"):
        bnlab.infer(model, X, Y_CLASS, method="ep", max_iters=max_iters)
    assert time.perf_counter() - start < 1.0


def test_the_largest_max_iters_runs():
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli())
    res = bnlab.infer(model, X, Y_CLASS, method="ep", max_iters=MAX_ITERS)
    ref = bnlab.infer(model, X, Y_CLASS, method="ep", max_iters=200)
    assert res.converged and res.n_iters == ref.n_iters
    assert res.log_marginal == pytest.approx(ref.log_marginal, rel=1e-12)


# ---- surfaces ------------------------------------------------------------------------

def test_surface_grid_values_must_be_numbers():
    with pytest.raises(TypeError, match=r"grid axis 'lengthscale' must hold numbers"):
        bnlab.surface(_gaussian_gp(), X, Y_REG, methods=["vi"],
                      grid={"lengthscale": ["short", "long"], "variance": [1.0, 2.0]})


def test_surface_checks_the_hyperparameters_the_grid_does_not_set():
    """The grid sets lengthscale and variance; the noise −0.1 of ``params`` would enter
    every grid point."""
    params = _with(likelihood={"noise": -0.1})
    with pytest.raises(ValueError, match=r"params\['likelihood'\]\['noise'\] must be positive"):
        bnlab.surface(_gaussian_gp(), X, Y_REG, methods=["vi"], params=params,
                      grid={"lengthscale": [0.5, 1.0], "variance": [1.0, 2.0]})


# ---- test inputs of the wrong width ------------------------------------------------------

def _results():
    lik = bnlab.likelihoods.Bernoulli()
    yield "GP", bnlab.infer(bnlab.GP(bnlab.kernels.Matern52(), lik), X2, Y_CLASS, method="ep"), X2
    sparse = bnlab.SparseGP(bnlab.kernels.Matern52(), lik, inducing=X2[::3])
    yield "SparseGP", bnlab.infer(sparse, X2, Y_CLASS, method="vi"), X2
    yield "MarkovGP", bnlab.infer(bnlab.MarkovGP(bnlab.kernels.Matern52(), lik), X, Y_CLASS, method="ep"), X
    yield "G-KL", bnlab.infer(bnlab.GP(bnlab.kernels.Matern52(), lik), X2, Y_CLASS, method="gkl"), X2


def test_predict_and_log_predictive_check_the_input_width():
    for name, res, train in _results():
        width = train.shape[1]
        wrong = np.ones((4, width + 1))
        trained = "one-dimensional inputs" if width == 1 else f"inputs with {width} columns"
        with pytest.raises(ValueError, match=rf"X_test has {width + 1} column\(s\) but the model was trained on {trained}"):
            res.predict(wrong)
        with pytest.raises(ValueError, match=rf"X_test has {width + 1} column"):
            res.log_predictive(wrong, np.ones(4))
        mean, var = res.predict(train[:4])          # the right width still works
        assert mean.shape == (4,) and np.all(var > 0), name
