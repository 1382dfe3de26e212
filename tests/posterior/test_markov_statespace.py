"""State-space forms of the Matérn kernels (bnlab.posterior.statespace) against closed forms:
the SDE must reproduce the kernel, P∞ must solve the Lyapunov equation, and the
closed-form transition matrix must equal scipy's matrix exponential."""
import numpy as np
import pytest
from scipy.linalg import expm, solve_continuous_lyapunov

import bnlab
from bnlab.posterior import statespace

KERNELS = [bnlab.kernels.Matern12(0.7, 1.3), bnlab.kernels.Matern32(0.7, 1.3),
           bnlab.kernels.Matern52(0.7, 1.3)]
DT = np.array([0.0, 1e-3, 0.1, 0.7, 3.0, 40.0])


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_sde_reproduces_kernel(kernel):
    params = kernel.init_params()
    sde = statespace.kernel_sde(kernel, params)
    F, L, Qc, H, Pinf = (np.asarray(a) for a in sde[:5])
    np.testing.assert_allclose(Pinf, solve_continuous_lyapunov(F, -L @ Qc @ L.T),
                               rtol=1e-10, atol=1e-12)
    A = np.asarray(statespace.transition_matrix(sde, DT))
    np.testing.assert_allclose(A, np.stack([expm(F * d) for d in DT]), rtol=1e-10, atol=1e-14)
    k_sde = np.array([(H @ a @ Pinf @ H.T)[0, 0] for a in A])
    k_true = np.asarray(kernel(params, DT[:, None], np.zeros((1, 1))))[:, 0]
    np.testing.assert_allclose(k_sde, k_true, rtol=1e-12, atol=1e-15)


def test_process_noise_matches_integral():
    """Q = P∞ − AP∞Aᵀ equals ∫₀^Δ Φ(Δ−τ) L Q_c Lᵀ Φ(Δ−τ)ᵀ dτ (eq. 70), by quadrature."""
    kernel = KERNELS[2]
    sde = statespace.kernel_sde(kernel, kernel.init_params())
    F, L, Qc = (np.asarray(a) for a in sde[:3])
    delta = 0.4
    tau = np.linspace(0, delta, 2001)
    vals = np.stack([expm(F * (delta - t)) @ L @ Qc @ L.T @ expm(F * (delta - t)).T for t in tau])
    integral = np.trapezoid(vals, tau, axis=0)
    _, Q = statespace.transitions([sde], np.array([delta]))
    np.testing.assert_allclose(np.asarray(Q[0]), integral, rtol=1e-5, atol=1e-9)


def test_stacked_latents_are_block_diagonal():
    k1, k2 = KERNELS[1], KERNELS[2]
    sdes = [statespace.kernel_sde(k1, k1.init_params()), statespace.kernel_sde(k2, k2.init_params())]
    A, Q = statespace.transitions(sdes, DT)
    assert A.shape == (len(DT), 5, 5)
    np.testing.assert_array_equal(np.asarray(A[:, :2, 2:]), 0.0)
    np.testing.assert_allclose(np.asarray(A[:, 2:, 2:]),
                               np.asarray(statespace.transition_matrix(sdes[1], DT)))
    _, _, _, H, _ = statespace.stack(sdes)
    np.testing.assert_array_equal(np.asarray(H), [[1, 0, 0, 0, 0], [0, 0, 1, 0, 0]])
    np.testing.assert_allclose(np.asarray(A[0]), np.eye(5))
    np.testing.assert_allclose(np.asarray(Q[0]), 0.0, atol=1e-15)


@pytest.mark.parametrize("kernel", [bnlab.kernels.RBF(), bnlab.kernels.Periodic()],
                         ids=lambda k: k.name)
def test_non_markovian_kernel_is_rejected(kernel):
    with pytest.raises(ValueError, match="no finite state-space form"):
        statespace.kernel_sde(kernel, kernel.init_params())
