"""Independent reference implementations used by the tests (plain numpy/scipy,
written from the textbooks, sharing no code with bnlab's engine)."""
from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, logsumexp
from scipy.stats import norm


def matern52(X1, X2, lengthscale, variance):
    r = np.sqrt(5.0) * np.abs(X1[:, None, 0] - X2[None, :, 0]) / lengthscale
    return variance * (1 + r + r**2 / 3) * np.exp(-r)


def textbook_ep_probit(K, y, iters=200, tol=1e-12):
    """Sequential EP for probit GP classification, Rasmussen & Williams Alg. 3.5, with
    the log marginal likelihood of eq. 3.65. Returns (tau_site, nu_site, log_Z)."""
    n = len(y)
    tau, nu = np.zeros(n), np.zeros(n)
    Sigma, mu = K.copy(), np.zeros(n)
    for _ in range(iters):
        tau_old = tau.copy()
        for i in range(n):
            tau_c = 1 / Sigma[i, i] - tau[i]
            nu_c = mu[i] / Sigma[i, i] - nu[i]
            m_c, v_c = nu_c / tau_c, 1 / tau_c
            z = y[i] * m_c / np.sqrt(1 + v_c)
            ratio = np.exp(norm.logpdf(z) - log_ndtr(z))
            mu_hat = m_c + y[i] * v_c * ratio / np.sqrt(1 + v_c)
            var_hat = v_c - v_c**2 * ratio / (1 + v_c) * (z + ratio)
            d_tau = 1 / var_hat - tau_c - tau[i]
            tau[i] += d_tau
            nu[i] = mu_hat / var_hat - nu_c
            if d_tau != 0:
                s = Sigma[:, i].copy()
                Sigma -= np.outer(s, s) / (1 / d_tau + Sigma[i, i])
            mu = Sigma @ nu
        sW = np.sqrt(tau)
        L = np.linalg.cholesky(np.eye(n) + sW[:, None] * K * sW[None, :])
        V = np.linalg.solve(L, sW[:, None] * K)
        Sigma = K - V.T @ V
        mu = Sigma @ nu
        if np.max(np.abs(tau - tau_old)) < tol:
            break
    # eq. 3.65 with σ̃² = 1/τ̃, μ̃ = ν̃/τ̃
    tau_c = 1 / np.diag(Sigma) - tau
    nu_c = mu / np.diag(Sigma) - nu
    m_c, v_c = nu_c / tau_c, 1 / tau_c
    s2, mt = 1 / tau, nu / tau
    A = K + np.diag(s2)
    sign, logdet = np.linalg.slogdet(A)
    log_Z = (-0.5 * logdet - 0.5 * mt @ np.linalg.solve(A, mt)
             + np.sum(log_ndtr(y * m_c / np.sqrt(1 + v_c)))
             + 0.5 * np.sum(np.log(v_c + s2)) + np.sum((m_c - mt) ** 2 / (2 * (v_c + s2))))
    return tau, nu, log_Z


def posterior_from_sites(K, site_prec, site_nat1):
    """Dense q(f) = N(m, C) with C = (K⁻¹ + diag λ)⁻¹, m = C ν (direct inverses)."""
    C = np.linalg.inv(np.linalg.inv(K) + np.diag(site_prec))
    return C @ site_nat1, C


def importance_log_Z(log_lik, K, proposal_mean, proposal_cov, num=10**6, seed=0, batch=10**5):
    """log ∫ p(y|f) N(f|0, K) df by importance sampling from N(proposal_mean, 1.5·cov),
    with the delta-method standard error of the estimate."""
    rng = np.random.default_rng(seed)
    n = len(proposal_mean)
    Q = 1.5 * proposal_cov
    LQ, LK = np.linalg.cholesky(Q), np.linalg.cholesky(K)
    logdet_Q, logdet_K = 2 * np.log(np.diag(LQ)).sum(), 2 * np.log(np.diag(LK)).sum()
    logw = []
    for _ in range(num // batch):
        eps = rng.standard_normal((batch, n))
        f = proposal_mean + eps @ LQ.T
        log_q = -0.5 * np.sum(eps**2, 1) - 0.5 * logdet_Q - 0.5 * n * np.log(2 * np.pi)
        a = np.linalg.solve(LK, f.T)
        log_p = -0.5 * np.sum(a**2, 0) - 0.5 * logdet_K - 0.5 * n * np.log(2 * np.pi)
        logw.append(log_lik(f) + log_p - log_q)
    logw = np.concatenate(logw)
    log_Z = logsumexp(logw) - np.log(len(logw))
    w = np.exp(logw - logw.max())
    se = np.std(w) / np.mean(w) / np.sqrt(len(w))
    return log_Z, se


def gaussian_elbo(K, m, C, expected_log_lik):
    """Σ E_q[log p] − KL(N(m, C) ‖ N(0, K)) with the dense KL formula."""
    n = len(m)
    Kinv = np.linalg.inv(K)
    kl = 0.5 * (np.trace(Kinv @ C) + m @ Kinv @ m - n
                + np.linalg.slogdet(K)[1] - np.linalg.slogdet(C)[1])
    return expected_log_lik - kl


def sine_with_outliers(seed, n=16):
    """A sorted 1-D regression set: sin(x) with small noise and three points moved by
    ±3 — the outliers that make EP's cavities lose positive-definiteness."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-3, 3, n))[:, None]
    y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(n)
    y[rng.choice(n, 3, replace=False)] += rng.choice([-3.0, 3.0], 3)
    return X, y


def probit_importance_log_z(K, y, proposal, num=10**6, seed=0):
    """log p(y) of probit GP classification by importance sampling from ``proposal`` (a
    frozen scipy distribution over f), log w = log N(f | 0, K) + Σ log Φ(yᵢ fᵢ) −
    log q(f), in batches of 10⁵; returns (log Ẑ, its delta-method standard error)."""
    from scipy.stats import multivariate_normal
    prior = multivariate_normal(np.zeros(len(y)), K, allow_singular=True)
    rng = np.random.default_rng(seed)
    logw = []
    for _ in range(num // 10**5):
        f = proposal.rvs(10**5, random_state=rng)
        logw.append(prior.logpdf(f) + log_ndtr(y * f).sum(1) - proposal.logpdf(f))
    logw = np.concatenate(logw)
    w = np.exp(logw - logw.max())
    return logsumexp(logw) - np.log(logw.size), w.std() / (np.sqrt(w.size) * w.mean())
