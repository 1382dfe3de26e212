"""Bad input gets a ValueError that names the problem."""
import numpy as np
import pytest

import bnlab


@pytest.fixture
def model():
    return bnlab.GP(kernel=bnlab.kernels.Matern52(), likelihood=bnlab.likelihoods.Bernoulli())


X = np.linspace(-1, 1, 6)[:, None]
Y = np.array([1.0, -1, 1, 1, -1, 1])


@pytest.mark.parametrize("kwargs,match", [
    ({"alpha": 0.0, "method": "pep"}, "alpha"),
    ({"alpha": 1.5, "method": "pep"}, "alpha"),
    ({"alpha": np.nan, "method": "pep"}, "alpha"),
    ({"alpha": 0.5, "method": "ep"}, "α = 1"),
    ({"damping": 0.0}, "damping"),
    ({"damping": 1.2}, "damping"),
    ({"max_iters": 0}, "max_iters"),
    ({"tol": -1.0}, "tol"),
    ({"method": "pep_gn"}, "no Power-EP Gauss–Newton"),
    ({"method": "newton_foo"}, "unknown method"),
    ({"method": "heuristic", "base": "taylor"}, "heuristic: base"),
])
def test_bad_settings(model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        bnlab.infer(model, X, Y, **kwargs)


def test_nan_in_X_names_rows(model):
    Xbad = X.copy()
    Xbad[[1, 4]] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinite values in rows \[1, 4\]"):
        bnlab.infer(model, Xbad, Y)


def test_wrong_labels_name_rows_and_hint(model):
    with pytest.raises(ValueError, match=r"labels in \{-1, 1\}.*rows \[1, 4\].*2\*y - 1"):
        bnlab.infer(model, X, np.array([1.0, 0, 1, 1, 0, 1]))


def test_mismatched_lengths(model):
    with pytest.raises(ValueError, match="6 rows but y has 5"):
        bnlab.infer(model, X, Y[:5])


def test_poisson_needs_counts():
    model = bnlab.GP(bnlab.kernels.Matern32(), bnlab.likelihoods.Poisson())
    with pytest.raises(ValueError, match=r"non-negative integer counts; rows \[2, 3\]"):
        bnlab.infer(model, X, np.array([0.0, 1, -1, 2.5, 3, 0]))


def test_nan_targets_named():
    model = bnlab.GP(bnlab.kernels.Matern32(), bnlab.likelihoods.Gaussian())
    with pytest.raises(ValueError, match=r"NaN or infinite values at rows \[0\]"):
        bnlab.infer(model, X, np.array([np.nan, 1, 1, 2, 3, 0]))


def test_invalid_hyperparameters_and_kernel_count():
    with pytest.raises(ValueError, match="Matern52 lengthscale must be positive"):
        bnlab.kernels.Matern52(lengthscale=-1.0)
    with pytest.raises(ValueError, match="Gaussian noise must be positive"):
        bnlab.likelihoods.Gaussian(noise=0.0)
    with pytest.raises(ValueError, match="2 latent function"):
        bnlab.GP(kernel=[bnlab.kernels.Matern52()] * 3, likelihood=bnlab.likelihoods.Heteroscedastic())
    with pytest.raises(ValueError, match="link must be"):
        bnlab.likelihoods.Bernoulli("cloglog")


def test_empty_data(model):
    with pytest.raises(ValueError, match="non-empty"):
        bnlab.infer(model, np.zeros((0, 1)), np.zeros(0))
