"""Scaling of one inference iteration with the number of data points n.

Each section is a function that prints its own table; ``python benchmarks/scaling.py``
runs every section, ``python benchmarks/scaling.py markov`` only the named ones.

Markov GP: one jitted ``Engine.step`` (site update + Kalman filter/RTS smoother + energy)
for n = 10⁴, 10⁵, 10⁶, natural-gradient VI on a Bernoulli likelihood, sequential
(``lax.scan``) and parallel (``lax.associative_scan``) scans. Linear cost means a ratio
of ≈ 10 per 10× n. Ratios are against the previous n, measured in the same process.
"""
from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnlab
from bnlab.engine.loop import get_engine
from bnlab.engine.state import Settings

bnlab.configure()      # float64 before this script's own JAX arrays


def _time_step(engine, params, X, y, settings, repeats):
    """Median wall time of one jitted step (compiled and warmed up first)."""
    state = engine.init(params, X, y, settings)
    state, _ = engine.step(params, X, y, settings, state)
    jax.block_until_ready(state)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        state, info = engine.step(params, X, y, settings, state)
        jax.block_until_ready((state, info))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), bool(info.posterior_psd)


def _bernoulli_series(n, seed=0):
    """Unsorted 1-D inputs at unit density, labels from a noisy sine."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, n / 10.0, n)
    y = np.where(np.sin(x) + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return jnp.asarray(x[:, None]), jnp.asarray(y)


def markov_scaling(ns=(10**4, 10**5, 10**6), method="vi", repeats=3):
    print(f"Markov GP scaling: one jitted Engine.step, method={method}, "
          f"Bernoulli(probit), Matern32, 20-point Gauss-Hermite")
    print(f"{'scan':<10} {'n':>9} {'step (s)':>10} {'ratio':>7} {'per point (us)':>15}")
    settings = Settings(jnp.asarray(1.0), jnp.asarray(0.5), jnp.asarray(1e-8))
    for parallel in (False, True):
        model = bnlab.MarkovGP(bnlab.kernels.Matern32(1.0, 1.0),
                               bnlab.likelihoods.Bernoulli(), parallel=parallel)
        engine = get_engine(model, method)
        params = model.init_params()
        previous = None
        for n in ns:
            X, y = _bernoulli_series(n)
            seconds, psd = _time_step(engine, params, X, y, settings, repeats)
            ratio = f"{seconds / previous:7.2f}" if previous else f"{'-':>7}"
            name = "parallel" if parallel else "sequential"
            print(f"{name:<10} {n:>9} {seconds:>10.3f} {ratio} {1e6 * seconds / n:>15.2f}"
                  + ("" if psd else "  (non-PSD step!)"), flush=True)
            previous = seconds


def sparse_scaling(n=10**5, num_inducing=(100, 500), method="vi", repeats=3):
    """Sparse GP: one jitted Engine.step (site update + q(u) from the sites + energy),
    O(n M²), against its unit of work: one M×M Cholesky times n/M (also O(n M²)).
    A constant ratio across M means the step costs a fixed number of such units."""
    print(f"Sparse GP scaling: one jitted Engine.step, method={method}, n={n}, "
          f"Bernoulli(probit), Matern32, 20-point Gauss-Hermite, Z evenly spaced")
    print(f"{'M':>5} {'step (s)':>10} {'chol MxM (ms)':>14} {'chol x n/M (s)':>15} {'ratio':>7}")
    settings = Settings(jnp.asarray(1.0), jnp.asarray(0.5), jnp.asarray(1e-8))
    X, y = _bernoulli_series(n)
    chol = jax.jit(jnp.linalg.cholesky)
    for M in num_inducing:
        Z = np.linspace(0.0, n / 10.0, M)[:, None]
        model = bnlab.SparseGP(bnlab.kernels.Matern32(1.0, 1.0), bnlab.likelihoods.Bernoulli(),
                               inducing=Z)
        seconds, psd = _time_step(get_engine(model, method), model.init_params(), X, y,
                                  settings, repeats)
        A = np.random.default_rng(0).standard_normal((M, M))
        S = jnp.asarray(A @ A.T + M * np.eye(M))
        jax.block_until_ready(chol(S))
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            jax.block_until_ready(chol(S))
            times.append(time.perf_counter() - t0)
        unit = float(np.median(times)) * n / M
        print(f"{M:>5} {seconds:>10.3f} {1e3 * np.median(times):>14.3f} {unit:>15.3f} "
              f"{seconds / unit:>7.1f}" + ("" if psd else "  (non-PSD step!)"), flush=True)


SECTIONS = {"markov": markov_scaling, "sparse": sparse_scaling}


def main(argv):
    names = argv or list(SECTIONS)
    unknown = [a for a in names if a not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    for name in names:
        SECTIONS[name]()
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
