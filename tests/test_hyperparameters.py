"""One naming of a model's hyperparameters (``bnlab.hyperparameters``): the names a
surface's grid accepts are those learning takes, those ``assign`` sets, and a name
that would mean two things is refused."""
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab import hyperparameters
from bnlab.studies.learning import learnable
from bnlab.studies.surfaces import grid_axes


def test_two_latents_name_each_kernel_and_both_at_once():
    model = bnlab.GP([bnlab.kernels.Matern52(0.5, 2.0), bnlab.kernels.Periodic()],
                     bnlab.likelihoods.Heteroscedastic())
    params = model.init_params()
    assert hyperparameters.names(params) == [
        "lengthscale", "variance", "period", "lengthscale_0", "variance_0",
        "lengthscale_1", "variance_1", "period_1"]
    assert hyperparameters.separate_names(params) == [
        "lengthscale_0", "variance_0", "lengthscale_1", "variance_1", "period_1"]
    assert learnable(model, params)[0] == hyperparameters.separate_names(params)
    both = hyperparameters.assign(params, {"lengthscale": 3.0, "variance_1": 4.0})
    assert [float(kp["lengthscale"]) for kp in both["kernel"]] == [3.0, 3.0]
    assert [float(kp["variance"]) for kp in both["kernel"]] == [2.0, 4.0]
    assert float(hyperparameters.value(both, "variance_1")) == 4.0


def test_one_latent_names_its_kernel_and_likelihood_and_ard_becomes_isotropic():
    model = bnlab.GP(bnlab.kernels.RBF(np.array([0.5, 2.0])), bnlab.likelihoods.StudentT())
    params = model.init_params()
    assert hyperparameters.names(params) == ["lengthscale", "variance", "df", "scale"]
    assert hyperparameters.separate_names(params) == hyperparameters.names(params)
    assert learnable(model, params)[0] == ["lengthscale", "variance", "scale"]   # ν fixed
    new = hyperparameters.assign(params, {"lengthscale": 0.7, "alpha": 0.5})
    np.testing.assert_array_equal(new["kernel"][0]["lengthscale"], [0.7, 0.7])
    assert set(new) == {"kernel", "likelihood"}


class _Clash(bnlab.likelihoods.Likelihood):
    """A likelihood whose hyperparameter is named as a kernel's."""

    def init_params(self):
        return {"variance": jnp.asarray(1.0)}


def test_a_likelihood_hyperparameter_named_as_a_kernel_s_is_refused():
    model = bnlab.GP(bnlab.kernels.RBF(), _Clash())
    with pytest.raises(ValueError, match="'variance' has the name of a kernel's"):
        grid_axes(model, {"variance": [1.0], "lengthscale": [1.0]})
    with pytest.raises(ValueError, match="'variance' has the name of a kernel's"):
        learnable(model, model.init_params())
