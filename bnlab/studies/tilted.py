"""Power EP's local picture at one data point: the approximate marginal q(fᵢ), the
cavity q\\ᵢ(fᵢ) ∝ q(fᵢ) / tᵢ(fᵢ)^α and the tilted distribution
p̃ᵢ(fᵢ) ∝ q\\ᵢ(fᵢ) p(yᵢ | fᵢ)^α (Minka 2004; Bui, Yan & Turner 2017 §3;
Wilkinson et al. 2023 eqs. 20–22). At a Power-EP fixed point of a full GP, q matches
the tilted distribution's mean and variance (q\\ᵢ tᵢ^α = q), whatever α; what α
changes is how much of the likelihood the tilted distribution carries, hence how far
its shape (an outlier's second mode, a skew) is from the Gaussian that summarises it.

The densities are evaluated on a grid of the first latent (one-latent likelihoods),
the tilted one normalised numerically (trapezoid rule on a grid spanning ±8 standard
deviations of q and of the cavity), as a picture and a check, not inside the engine.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..methods.targets import cavity

__all__ = ["tilted_marginal"]


def tilted_marginal(likelihood, lik_params, y_i, marginals, sites, i: int, alpha: float,
                    num: int = 801) -> dict:
    """Grid ``f`` and the densities ``q``, ``cavity`` and ``tilted`` at data point ``i``
    (``marginals`` and ``sites`` of an engine state), with the tilted distribution's
    mean and variance and whether the cavity is a proper Gaussian (``cavity_ok``; if
    not, there is no tilted distribution and ``tilted`` is None)."""
    if marginals.mean.shape[1] != 1:
        raise ValueError("the per-point picture is drawn for one-latent likelihoods")
    mean, cov = marginals.mean[i], marginals.cov[i]
    extra = float(marginals.cond_var[i][0, 0])          # K_ii − Q_ii of a sparse GP
    _, Vc, mc, ok = cavity(mean, cov, sites.nat1[i], sites.prec[i], float(alpha))
    m, v = float(mean[0]), float(cov[0, 0]) + extra
    out = {"q_mean": m, "q_var": v, "cavity_ok": bool(ok), "alpha": float(alpha)}
    if not ok:
        f = np.linspace(m - 8 * np.sqrt(v), m + 8 * np.sqrt(v), num)
        return {**out, "f": f, "q": _normal(f, m, v), "cavity": None, "tilted": None}
    mc_, vc = float(mc[0]), float(Vc[0, 0]) + extra
    lo = min(m - 8 * np.sqrt(v), mc_ - 8 * np.sqrt(vc))
    hi = max(m + 8 * np.sqrt(v), mc_ + 8 * np.sqrt(vc))
    f = np.linspace(lo, hi, num)
    log_lik = np.asarray(jax.vmap(lambda fn: likelihood.log_prob(lik_params, y_i, fn[None]))(
        jnp.asarray(f)))
    log_t = _log_normal(f, mc_, vc) + alpha * log_lik
    t = np.exp(log_t - log_t.max())
    t /= np.trapezoid(t, f)
    t_mean = np.trapezoid(f * t, f)
    return {**out, "f": f, "q": _normal(f, m, v), "cavity": _normal(f, mc_, vc), "tilted": t,
            "tilted_mean": float(t_mean),
            "tilted_var": float(np.trapezoid((f - t_mean) ** 2 * t, f))}


def _log_normal(f, m, v):
    return -0.5 * ((f - m) ** 2 / v + np.log(2 * np.pi * v))


def _normal(f, m, v):
    return np.exp(_log_normal(f, m, v))
