"""The pure kernels of the MCMC reference: one elliptical slice sampling transition,
one annealing pass, and bidirectional Monte Carlo at one θ. Everything here is a pure
function of arrays, so ``bnlab.studies.mcmc`` vmaps it over grid points (and chains
inside), the batch an accelerator wants.

**Forward AIS** (Neal 2001), as in Li, John & Solin (2023, §5.1, App. B, eqs. 26–28),
from a Gaussian start q = N(m, S) made of sites s(f) (``ais_start``; the prior is
s = 0): targets π_t(f) ∝ q(f) exp(τ_t h(f)), h = log p(y | f) − s(f), τ_t = (t / T)⁴,
t = 0 … T; chains start from exact draws of q and for t = 1 … T
    log w += (τ_t − τ_{t−1}) h(f)      with f the state *before* the move,
    f ← ESS transition leaving π_t invariant.
Each Z₀·w is an unbiased estimate of Z = p(y | θ), so log Z₀ + log of the chains' mean
weight is a *stochastic lower bound*: E[log Ẑ] ≤ log Z (Jensen), and
P(log Ẑ > log Z + a) ≤ e⁻ᵃ (Markov's inequality).

**Reverse AIS** (Grosse, Ghahramani & Adams 2015, "Sandwiching the marginal likelihood
using bidirectional Monte Carlo", §3): the same schedule run from τ_T = 1 down to
τ_0 = 0, started from posterior samples, with log w_rev += (τ_{t−1} − τ_t) h(f)
before each move under π_{t−1}. Each w_rev is an unbiased estimate of Z₀ / Z, so
log Z₀ − log of their mean is a *stochastic upper bound* on log Z. ESS is reversible with
respect to its target (Murray, Adams & MacKay 2010, §2.3), so the reverse pass uses
the same transitions; the gap between the two bounds bounds both estimates' bias.

**The reverse chains' start.** The bound is exact only from exact posterior samples,
which a non-conjugate likelihood does not give. Here (as Grosse et al. 2016, "Measuring
the reliability of MCMC inference with bidirectional Monte Carlo", do for real data)
they come from MCMC: the forward pass's final states, resampled in proportion to their
weights (sampling–importance–resampling), then moved ``posterior_steps`` ESS
transitions at β = 1. States not yet at the posterior (closer to the prior) pull the
upper estimate down, so a sandwich from poorly mixed chains can look narrower than it
is: the split-R̂ and bulk ESS of those β = 1 chains (``chain_diagnostics``) say
whether they mixed.

ESS (Murray, Adams & MacKay 2010) moves in f-space on ellipses through the state and a
draw ν = R z of N(0, S), centred at m (RRᵀ = S; the prior's: m = 0, R = chol K).
Our own kernel rather than blackjax's so that the shrink loop is a masked
``while_loop`` with a cap whose hits are counted (GPML's "emergency break" after 20
shrinks accepts the last proposal, which biases; here a capped step keeps the current
state, which preserves detailed balance because the shrinkage path is reversible step
by step) and so that it vmaps over chains and grid points.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from jax.scipy.special import logsumexp

from .. import cubature
from ..posterior import full
from .ais_start import site_start

TWO_PI = 2.0 * np.pi
#: the most latent coordinates whose β = 1 traces are kept for the chain diagnostics
#: (evenly spaced over the inputs), besides the log-likelihood
TRACED_COORDINATES = 16
#: fold_in constant of the keys of the β = 1 chains and the reverse pass (the forward
#: pass uses 0 … T)
_AFTER_FORWARD = 0x7FFFFFFF


def ess_step(key, f, ll_f, chol, beta, log_lik, max_shrinks=50, centre=0.0):
    """One elliptical slice sampling transition for N(f | centre, LLᵀ) · exp(β log_lik(f)).
    Returns (new f, its log_lik, number of shrinks, capped flag)."""
    k_nu, k_u, k_theta, k_loop = jax.random.split(key, 4)
    nu = chol @ jax.random.normal(k_nu, f.shape)
    offset = f - centre
    log_u = beta * ll_f + jnp.log(jax.random.uniform(k_u))
    theta = jax.random.uniform(k_theta, minval=0.0, maxval=TWO_PI)

    def propose(theta):
        g = centre + offset * jnp.cos(theta) + nu * jnp.sin(theta)
        return g, log_lik(g)

    g, ll_g = propose(theta)

    def cond(c):
        _, _, _, _, ll_g, n = c
        return (beta * ll_g <= log_u) & (n < max_shrinks)

    def body(c):
        theta, lo, hi, _, _, n = c
        lo = jnp.where(theta < 0, theta, lo)
        hi = jnp.where(theta < 0, hi, theta)
        theta = jax.random.uniform(jax.random.fold_in(k_loop, n), minval=lo, maxval=hi)
        g, ll_g = propose(theta)
        return theta, lo, hi, g, ll_g, n + 1

    init = (theta, theta - TWO_PI, theta, g, ll_g, jnp.asarray(0))
    _, _, _, g, ll_g, n = jax.lax.while_loop(cond, body, init)
    accepted = beta * ll_g > log_u
    return (jnp.where(accepted, g, f), jnp.where(accepted, ll_g, ll_f), n, ~accepted)


def _moves(key, f, ll, beta, chol, log_lik, steps, max_shrinks, centre=0.0):
    """``steps`` ESS transitions of every chain (rows of f) under β; the states after
    each, and the shrink and cap counts."""
    step = jax.vmap(lambda k, f, l: ess_step(k, f, l, chol, beta, log_lik, max_shrinks, centre))

    def move(c, s):
        f, ll = c
        f, ll, k, cap = step(jax.random.split(jax.random.fold_in(key, s), f.shape[0]), f, ll)
        return (f, ll), (f, ll, jnp.sum(k), jnp.sum(cap))

    (f, ll), (fs, lls, k, cap) = jax.lax.scan(move, (f, ll), jnp.arange(steps))
    return f, ll, fs, lls, jnp.sum(k), jnp.sum(cap)


def anneal(key, f, ll, beta, num_temps, chol, log_lik, steps_per_temp, max_shrinks,
           centre=0.0):
    """One AIS pass of the chains ``f`` (C, n) (log-likelihoods ``ll``) through the
    inverse temperatures ``beta(t)``, t = 0 … ``num_temps``: for t = 1 … T,
    log w += (β_t − β_{t−1}) ℓ(f) at the state before the move, then ``steps_per_temp``
    ESS transitions under β_t. Increasing β is forward AIS, decreasing reverse AIS
    (module docstring). ``num_temps`` may be traced (a ``fori_loop``), so one compiled
    program serves every schedule length. The ESS ellipses are centred at ``centre``
    (``GaussianStart``). Returns (f, ll, log w, shrinks, capped)."""
    def temperature(t, carry):
        f, ll, logw, shrinks, capped = carry
        logw = logw + (beta(t) - beta(t - 1)) * ll
        f, ll, _, _, k, cap = _moves(jax.random.fold_in(key, t), f, ll, beta(t), chol,
                                     log_lik, steps_per_temp, max_shrinks, centre)
        return f, ll, logw, shrinks + k, capped + cap

    init = (f, ll, jnp.zeros(f.shape[0]), jnp.asarray(0), jnp.asarray(0))
    return jax.lax.fori_loop(1, num_temps + 1, temperature, init)


def log_mean_and_se(logw):
    """log of the mean weight and its delta-method standard error
    sd(w) / (√C · mean(w)) (the spread of the weights, not the estimator's bias)."""
    C = logw.shape[0]
    w = jnp.exp(logw - jnp.max(logw))
    return logsumexp(logw) - jnp.log(C), jnp.std(w, ddof=1) / (jnp.sqrt(C) * jnp.mean(w))


def traced_coordinates(n: int) -> np.ndarray:
    """The latent coordinates whose β = 1 traces are kept: evenly spaced, at most
    ``TRACED_COORDINATES``."""
    return np.unique(np.linspace(0, n - 1, min(n, TRACED_COORDINATES)).round().astype(int))


def schedule(num_temps, reverse=False):
    """β(t) = τ_t = (t / T)⁴, t = 0 … T (Li, John & Solin 2023, App. B), or the same
    temperatures in reverse order, β(t) = τ_{T−t}."""
    T = jnp.asarray(num_temps, dtype=float)
    if reverse:
        return lambda t: ((T - t) / T) ** 4
    return lambda t: (t / T) ** 4


def bdmc_point(model, params, sites, X, y, key, Xs, ys, T, settings):
    """Forward AIS, β = 1 chains and (if ``settings.direction`` is 'bidirectional')
    reverse AIS at one θ with ``T`` temperatures (may be traced), annealing from the
    Gaussian of ``sites`` (W, b) (``ais_start``; zeros: the prior); pure, vmapped over
    grid points by ``bnlab.studies.mcmc``. ``settings`` (static): (num_chains,
    steps_per_temp, max_shrinks, posterior_steps, direction). Returns a dict of arrays
    (see ``mcmc.ais_grid``)."""
    C, S, M, R, direction = settings
    prior = full.prepare(model, params, X)
    L = prior.chol_K
    n = L.shape[0]
    D = model.num_latents
    lik = model.likelihood

    def log_lik(f):
        F = f.reshape(y.shape[0], D)
        return jnp.sum(jax.vmap(lambda yn, fn: lik.log_prob(params["likelihood"], yn, fn))(y, F))

    q = site_start(L, *sites)

    def log_ratio(f):                       # h = ℓ − s (``ais_start``)
        return log_lik(f) - q.site_log(f)

    f0 = q.mean + (q.factor @ jax.random.normal(jax.random.fold_in(key, 0), (n, C))).T
    f, h, logw, shrinks, capped = anneal(key, f0, jax.vmap(log_ratio)(f0), schedule(T), T,
                                         q.factor, log_ratio, S, M, q.mean)
    log_z, se = log_mean_and_se(logw)
    lpd = _log_predictive(model, params, X, prior, f, logw, Xs, ys) if Xs is not None else jnp.nan

    k_resample, k_chain, k_reverse = jax.random.split(jax.random.fold_in(key, _AFTER_FORWARD), 3)
    pick = jax.random.categorical(k_resample, logw, shape=(C,))
    g, gh, fs, _, k, cap = _moves(k_chain, f[pick], h[pick], 1.0, q.factor, log_ratio, R, M,
                                  q.mean)
    lls = jax.vmap(jax.vmap(log_lik))(fs)
    trace = jnp.concatenate([lls[..., None], fs[..., traced_coordinates(n)]], axis=-1)
    shrinks, capped, moves = shrinks + k, capped + cap, (T * S + R) * C
    if direction == "bidirectional":
        _, _, logw_rev, k, cap = anneal(k_reverse, g, gh, schedule(T, reverse=True), T,
                                        q.factor, log_ratio, S, M, q.mean)
        neg_upper, se_upper = log_mean_and_se(logw_rev)
        upper, shrinks, capped, moves = q.log_z0 - neg_upper, shrinks + k, capped + cap, \
            moves + T * S * C
    else:
        logw_rev, upper, se_upper = jnp.full(C, jnp.nan), jnp.nan, jnp.nan
    return {"log_z": q.log_z0 + log_z, "log_z_se": se, "log_weights": logw, "samples": f,
            "lpd": lpd, "log_z_upper": upper, "log_z_upper_se": se_upper,
            "log_weights_reverse": logw_rev, "posterior_samples": g, "trace": trace,
            "mean_shrinks": shrinks / moves, "capped_fraction": capped / moves}


def _conditional(model, params, X, prior, Xs):
    """K⁻¹K(X, X*) and the blocks (Ns, D, D) of Cov[f* | f]."""
    D = model.num_latents
    Ks = model.prior_covariance(params, X, Xs)
    A = cho_solve((prior.chol_K, True), Ks)
    Ns = Xs.shape[0]
    kss = model.prior_variance(params, Xs)
    reduce = jnp.einsum("kna,knb->nab", Ks.reshape(-1, Ns, D), A.reshape(-1, Ns, D))
    return A, kss - reduce


def _log_predictive(model, params, X, prior, f, logw, Xs, ys):
    """Mean over test points of log Σ_c w̄_c ∫ p(y*|f*) p(f*|f_c) df*."""
    D = model.num_latents
    A, cov = _conditional(model, params, X, prior, Xs)
    means = (f @ A).reshape(f.shape[0], Xs.shape[0], D)
    rule = cubature.make_rule("gauss_hermite", 20, D)
    lik = model.likelihood
    per = jax.vmap(lambda m: jax.vmap(lambda y_, mi, Ci: lik.log_predictive(
        params["likelihood"], y_, mi, Ci, rule))(ys, m, cov))(means)          # (C, Ns)
    logw_bar = logw - logsumexp(logw)
    return jnp.mean(logsumexp(logw_bar[:, None] + per, axis=0))
