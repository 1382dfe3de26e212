"""Convergence diagnostics of MCMC chains: rank-normalised split-R̂ and bulk effective
sample size, as ArviZ (``arviz.rhat``, ``arviz.ess(method="bulk")``) and Stan define
them (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-normalization, folding,
and localization: an improved R̂ for assessing convergence of MCMC", §3–4 and App. A),
written in numpy so that the lab does not need ArviZ.

For draws θ (M chains × N draws):
- *split*: each chain cut into its two halves (the middle draw dropped when N is
  odd), 2M chains of N/2 draws, so that a trend within a chain shows as disagreement
  between chains;
- *rank normalisation*: z = Φ⁻¹((r − 3/8) / (S + 1/4)), r the rank of a draw among
  all S draws (ties averaged), which makes R̂ and ESS insensitive to heavy tails;
- *R̂* (Gelman et al., BDA3 eq. 11.4): with W the mean within-chain variance and
  B/N the variance of the chain means, var⁺ = (N − 1)/N · W + B/N, R̂ = √(var⁺ / W);
  the reported R̂ is the larger of the bulk one (on z) and the tail one (on the
  rank-normalised folded draws |θ − median θ|);
- *ESS* (BDA3 eqs. 11.7–11.8 with Geyer's initial monotone sequence): from the
  autocorrelations ρ̂_t = 1 − (W − mean over chains of the lag-t autocovariance) / var⁺,
  τ̂ = −1 + 2 Σ_{t ≤ 2k+1} ρ̂_t summed over pairs (ρ̂_{2t} + ρ̂_{2t+1}) while positive
  and made monotone, ESS = M·N / τ̂; *bulk* ESS is this on the split, rank-normalised
  draws.
"""
from __future__ import annotations

import numpy as np

__all__ = ["split_chains", "rank_normalise", "rhat", "ess", "bulk_ess", "summary"]


def _check(draws) -> np.ndarray:
    a = np.asarray(draws, float)
    if a.ndim != 2:
        raise ValueError(f"draws must be (chains, draws), got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 4:
        raise ValueError(f"need at least 4 draws per chain, got shape {a.shape}")
    return a


def split_chains(draws) -> np.ndarray:
    """(M, N) → (2M, ⌊N/2⌋): each chain's first and second halves."""
    a = _check(draws)
    half = a.shape[1] // 2
    return np.concatenate([a[:, :half], a[:, -half:]], axis=0)


def rank_normalise(draws) -> np.ndarray:
    """Φ⁻¹((r − 3/8) / (S + 1/4)) of the pooled ranks r (average ranks for ties).
    SciPy is imported here: scipy.stats brings scipy.optimize, and scipy.special alone
    is a third of a second, which ``import bnlab`` (and a lab server's first visitor)
    leaves out."""
    from scipy.special import ndtri
    from scipy.stats import rankdata
    a = np.asarray(draws, float)
    r = rankdata(a, method="average").reshape(a.shape)
    return ndtri((r - 0.375) / (a.size + 0.25))


def _classic_rhat(a) -> float:
    n = a.shape[1]
    W = a.var(axis=1, ddof=1).mean()
    B = n * a.mean(axis=1).var(ddof=1)
    if W == 0:
        return np.nan
    return float(np.sqrt(((n - 1) / n * W + B / n) / W))


def rhat(draws) -> float:
    """Rank-normalised split-R̂: the larger of bulk and tail (folded) R̂; NaN for
    constant draws. Near 1 (ArviZ's rule of thumb: below 1.01) when the chains agree."""
    s = split_chains(draws)
    if np.ptp(s) == 0:
        return np.nan
    bulk = _classic_rhat(rank_normalise(s))
    tail = _classic_rhat(rank_normalise(np.abs(s - np.median(s))))
    return float(max(bulk, tail))


def _autocov(a) -> np.ndarray:
    """Per-chain autocovariances at lags 0 … N−1 (divided by N, as ArviZ's), by FFT."""
    n = a.shape[1]
    centred = a - a.mean(axis=1, keepdims=True)
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    spec = np.fft.rfft(centred, size, axis=1)
    return np.fft.irfft(spec * np.conj(spec), size, axis=1)[:, :n] / n


def ess(draws) -> float:
    """Effective sample size of the draws (M, N) as given (no split, no ranks), by
    Geyer's initial monotone sequence (module docstring)."""
    a = _check(draws)
    m, n = a.shape
    acov = _autocov(a)
    mean_var = acov[:, 0].mean() * n / (n - 1)          # W
    var_plus = mean_var * (n - 1) / n + (a.mean(axis=1).var(ddof=1) if m > 1 else 0.0)
    if var_plus == 0:
        return np.nan
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    # Geyer's initial positive sequence: pairs (ρ_{2k}, ρ_{2k+1}) while their sum > 0
    kept = np.zeros(n)
    kept[:2] = rho[:2]
    t = 1
    even, odd = rho[0], rho[1]
    while t < n - 3 and even + odd > 0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0:
            kept[t + 1], kept[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:                                        # ArviZ's and Stan's refinement
        kept[max_t + 1] = even
    # ... made monotone: each pair's sum no larger than the pair before
    t = 1
    while t <= max_t - 2:
        if kept[t + 1] + kept[t + 2] > kept[t - 1] + kept[t]:
            kept[t + 1] = kept[t + 2] = (kept[t - 1] + kept[t]) / 2
        t += 2
    tau = -1.0 + 2.0 * kept[:max_t + 1].sum() + kept[max_t + 1:max_t + 2].sum()
    tau = max(tau, 1.0 / np.log10(m * n))
    return float(m * n / tau)


def bulk_ess(draws) -> float:
    """Bulk ESS: ``ess`` of the split, rank-normalised draws."""
    s = split_chains(draws)
    if np.ptp(s) == 0:
        return np.nan
    return ess(rank_normalise(s))


def summary(trace) -> tuple[float, float]:
    """(worst R̂, smallest bulk ESS) over the quantities of ``trace`` (draws, chains,
    quantities): the numbers that say whether every traced quantity mixed."""
    t = np.asarray(trace, float)
    if t.ndim != 3:
        raise ValueError(f"trace must be (draws, chains, quantities), got shape {t.shape}")
    per = [(rhat(t[:, :, q].T), bulk_ess(t[:, :, q].T)) for q in range(t.shape[2])]
    r = [p[0] for p in per if np.isfinite(p[0])]
    e = [p[1] for p in per if np.isfinite(p[1])]
    return (max(r) if r else np.nan), (min(e) if e else np.nan)
