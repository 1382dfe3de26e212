"""A sparse GP at a noise far below its variance and a lengthscale far beyond its inputs,
where the full GP is refused (``GP.check_conditioning``): K_uu's relative jitter
(``posterior.sparse.JITTER``) bounds its condition number by about 1e8, so K_nn − Q_nn
keeps about eight digits and the sparse model needs no such check. Sparse EP (Power EP
at α = 1) is FITC's evidence and VI is Titsias' collapsed bound (its optimum for a
Gaussian likelihood), both computed in 60-digit arithmetic with the same jittered K_uu:
measured 6e-13 and 5e-15 apart (relative) at ℓ = 1, 3e-8 and 1e-6 at ℓ = 1e3, where
σ_n² = 1e-14 multiplies K_nn − Q_nn's rounding in VI's trace term."""
import mpmath
import numpy as np
import pytest

import bnlab
from bnlab.posterior.sparse import JITTER


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=20)
    return X, np.sin(2 * X) + 0.1 * rng.normal(size=20), np.linspace(-2, 2, 6)


def _matern52(a, b, lengthscale):
    r = mpmath.sqrt(5) * abs(mpmath.mpf(a) - mpmath.mpf(b)) / lengthscale
    return (1 + r + r * r / 3) * mpmath.exp(-r)


def evidences_60_digits(X, y, Z, noise, lengthscale):
    """(FITC's log N(y | 0, Q + diag(K − Q) + σ_n²I), Titsias' log N(y | 0, Q + σ_n²I)
    − tr(K − Q)/2σ_n²), Q = K_fu (K_uu + jitter I)⁻¹ K_uf, unit variance."""
    with mpmath.workdps(60):
        ell, noise, n = mpmath.mpf(lengthscale), mpmath.mpf(noise), len(X)
        Kuu = mpmath.matrix([[_matern52(a, b, ell) for b in Z] for a in Z])
        jitter = mpmath.mpf(JITTER) * sum(Kuu[i, i] for i in range(len(Z))) / len(Z)
        for i in range(len(Z)):
            Kuu[i, i] += jitter
        Kuf = mpmath.matrix([[_matern52(a, b, ell) for b in X] for a in Z])
        Q = Kuf.T * mpmath.inverse(Kuu) * Kuf
        yv = mpmath.matrix([mpmath.mpf(v) for v in y])

        def log_normal(S):
            L = mpmath.cholesky(S)
            return (-(yv.T * mpmath.lu_solve(S, yv))[0] / 2
                    - sum(mpmath.log(L[i, i]) for i in range(n))
                    - n * mpmath.log(2 * mpmath.pi) / 2)
        rest = [1 - Q[i, i] for i in range(n)]            # K_nn − Q_nn, K_nn = 1
        fitc, collapsed = Q.copy(), Q.copy()
        for i in range(n):
            fitc[i, i] += rest[i] + noise
            collapsed[i, i] += noise
        return float(log_normal(fitc)), float(log_normal(collapsed) - sum(rest) / (2 * noise))


@pytest.mark.parametrize("noise, lengthscale", [(1e-14, 1.0), (1e-14, 1e3)])
def test_sparse_ep_and_vi_at_tiny_noise_are_fitc_and_titsias_to_rounding(
        regression, noise, lengthscale):
    X, y, Z = regression
    if lengthscale > 100:
        with pytest.raises(ValueError, match="is too small for float64"):
            bnlab.infer(bnlab.GP(bnlab.kernels.Matern52(lengthscale=lengthscale),
                                 bnlab.likelihoods.Gaussian(noise=noise)), X[:, None], y,
                        method="ep")
    model = bnlab.SparseGP(bnlab.kernels.Matern52(lengthscale=lengthscale),
                           bnlab.likelihoods.Gaussian(noise=noise), inducing=Z[:, None])
    fitc, titsias = evidences_60_digits(X, y, Z, noise, lengthscale)
    ep = bnlab.infer(model, X[:, None], y, method="ep")
    vi = bnlab.infer(model, X[:, None], y, method="vi")
    assert ep.converged and vi.converged
    assert ep.log_marginal == pytest.approx(fitc, rel=1e-6)
    assert vi.log_marginal == pytest.approx(titsias, rel=1e-5)
