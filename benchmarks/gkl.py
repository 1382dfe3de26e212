"""G-KL benchmarks (Challis & Barber 2013, §4 / App. D and §6.2).

1. Cost of one bound-and-gradient evaluation per covariance structure at
   D = 250, 500, 1000 (logistic regression, N = D, Σ = I, K = B = 10), as a ratio to
   the full-Cholesky time measured in the same process: the constrained structures
   must show their lower complexity (banded O(NDB), chevron O(NDK), FA O(NDK),
   subspace O(NK²), mean-field O(ND) against full O(ND²)).
2. ``--table3``: the synthetic logistic-regression experiment of §6.2 at D = 250
   (Table 3): bound / N and test log predictive / N per structure for N = 125 and
   N = 1250, K = 13 and 25, over ``--seeds`` generated data sets.

Run: ``python benchmarks/gkl.py [--table3] [--seeds 1]``. Results are recorded in
benchmarks/README.md (section "G-KL").
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnlab
from bnlab.gkl import fit, kl_bound, make_prior, make_structure
from bnlab.papers.challis2013 import CB_TABLE3, synthetic_logistic, test_log_predictive

bnlab.configure()      # float64 before this script's own JAX arrays

STRUCTURES = [("full", {}), ("optimal", {}), ("banded", {"band": 10}),
              ("chevron", {"rank": 10}), ("factor_analysis", {"rank": 10}),
              ("subspace", {"rank": 10}), ("mean_field", {})]


def _label(name, kw):
    k = kw.get("band", kw.get("rank"))
    return name if k is None else f"{name}({k})"


def time_bound_and_gradient(D, repeats=15):
    """Seconds per jitted value-and-gradient of B_KL, per structure: the minimum over
    ``repeats`` calls (the machine is shared; the minimum is the least disturbed)."""
    problem = synthetic_logistic(D, D, 1, seed=0)
    lik = bnlab.likelihoods.Bernoulli("logit")
    rule = bnlab.cubature.make_rule("gauss_hermite", 20, 1)
    prior = make_prior(jnp.zeros(D), jnp.eye(D), jnp.asarray(problem.X))
    y = jnp.asarray(problem.y)
    times = {}
    for name, kw in STRUCTURES:
        structure = make_structure(name, **kw)
        aux = structure.setup(prior)
        vparams = {"mean": 0.01 * jnp.ones(D), "cov": structure.init(prior, aux)}
        f = jax.jit(jax.value_and_grad(
            lambda v, aux=aux, s=structure: kl_bound(v, prior, s, aux, lik, {}, y, rule)))
        jax.block_until_ready(f(vparams))                         # compile
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(f(vparams))
            samples.append(time.perf_counter() - t0)
        times[_label(name, kw)] = float(np.min(samples))
    return times


def speed_table(dims=(250, 500, 1000)):
    results = {D: time_bound_and_gradient(D) for D in dims}
    labels = list(results[dims[0]])
    print("bound-and-gradient time relative to full Cholesky (N = D, K = B = 10)")
    print(f"{'structure':<20}" + "".join(f"{'D=' + str(D):>12}" for D in dims))
    for lab in labels:
        print(f"{lab:<20}" + "".join(f"{results[D][lab] / results[D]['full']:>12.4f}"
                                     for D in dims))
    print(f"{'full (seconds)':<20}" + "".join(f"{results[D]['full']:>12.4f}" for D in dims))


def table3(seeds=1, D=250, N_test=2500):
    lik = bnlab.likelihoods.Bernoulli("logit")
    print(f"[CB] §6.2 synthetic logistic regression, D = {D}, {seeds} data set(s): "
          f"bound/N (paper) | test lpd/N | iterations | seconds")
    for (N, K), paper in CB_TABLE3.items():
        rows = {}
        for seed in range(seeds):
            p = synthetic_logistic(D, N, N_test, seed)
            for name in ("full", "banded", "chevron", "factor_analysis", "subspace", "mean_field"):
                kw = {"band": K} if name == "banded" else (
                    {"rank": K} if name in ("chevron", "factor_analysis", "subspace") else {})
                t0 = time.perf_counter()
                r = fit(0.0, np.eye(D), p.X, lik, p.y, name, max_iters=3000, tol=1e-10, **kw)
                lpd = test_log_predictive(r.mean, r.covariance(), p.X_test, p.y_test)
                rows.setdefault(name, []).append(
                    (r.bound / N, lpd, r.n_iters, time.perf_counter() - t0))
        print(f"N = {N}, K = {K}")
        for name, vals in rows.items():
            b, lpd, it, sec = np.mean(np.array(vals), axis=0)
            ref = paper.get(name)
            ref = f"({ref:+.2f})" if ref is not None else "(  -  )"
            print(f"  {name:<16} {b:+.4f} {ref}  {lpd:+.4f}  {it:6.0f}  {sec:7.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table3", action="store_true")
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    speed_table()
    if args.table3:
        table3(args.seeds)
