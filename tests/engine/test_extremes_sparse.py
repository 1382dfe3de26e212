"""A sparse GP whose inducing points lie far from every input (x ≈ 1e6 against inputs
within a few lengthscales of 0): K_uf = 0, the site variables W_n u are deterministic
(posterior variance 0) and q(f_n) is the prior N(0, σ²). Under a probit likelihood each
site's evidence is then exactly Φ's mean under the prior, ½, and EP, exact for a
single factor, must give N log ½."""
import math

import numpy as np
import pytest

import bnlab


@pytest.mark.parametrize("method", ["ep", "laplace"])
def test_inducing_points_far_from_the_data_give_the_prior_evidence(method):
    """The PEP energy's ½(log|C_nn| + log|P\\\\n|) was −∞ + ∞ at C_nn = 0: NaN and
    'diverged' (the issue's sweep: exact −20.79); it is now ½log|(1 − α)I + α(I − C_nnΛ̄_n)|,
    the same determinant without the infinities."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=30)
    y = np.where(X + 0.5 * rng.normal(size=30) > 0, 1.0, -1.0)
    Z = 1e6 + np.linspace(0.0, 1.0, 5)[:, None]
    model = bnlab.SparseGP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"),
                           inducing=Z)
    res = bnlab.infer(model, X, y, method=method)
    assert res.converged and not res.diverged
    assert res.log_marginal == pytest.approx(30 * math.log(0.5), rel=1e-12)
