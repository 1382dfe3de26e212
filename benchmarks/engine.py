"""Engine speed: jitted time per iteration of every site method on a full GP, as a
ratio to one n×n Cholesky factorisation measured in the same process (issue 2).

Run:  python benchmarks/engine.py [--sizes 200 500 1000] [--repeats 5]
Target: every site method ≤ 3× the Cholesky floor.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnlab
from bnlab.engine import Settings, get_engine
from bnlab.methods.registry import SITE_METHODS


def best_time(fn, repeats):
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def cholesky_floor(n, repeats):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n))
    A = jnp.asarray(A @ A.T + n * np.eye(n))
    chol = jax.jit(jnp.linalg.cholesky)
    return best_time(lambda: chol(A).block_until_ready(), repeats)


def step_time(method, n, repeats, likelihood):
    rng = np.random.default_rng(1)
    X = jnp.asarray(np.sort(rng.uniform(-5, 5, n))[:, None])
    lik = likelihood()
    model = bnlab.GP(kernel=bnlab.kernels.Matern52(1.0, 1.0), likelihood=lik)
    params = model.init_params()
    y = jnp.asarray(lik.sample(params, np.sin(np.asarray(X)), rng))
    options = (("base", "vi"),) if method == "heuristic" else ()
    engine = get_engine(model, method, ("gauss_hermite", 20), options)
    cfg = Settings(jnp.asarray(0.5 if "pep" in method else 1.0), jnp.asarray(0.5), jnp.asarray(1e-8))
    state = engine.init(params, X, y, cfg)
    for _ in range(3):   # move away from the initial flat sites
        state, _ = engine.step(params, X, y, cfg, state)

    def one_step():
        jax.block_until_ready(engine.step(params, X, y, cfg, state))
    return best_time(one_step, repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    lik = lambda: bnlab.likelihoods.Bernoulli("probit")
    floors = {n: cholesky_floor(n, args.repeats) for n in args.sizes}
    print("Full GP, Bernoulli-probit, Gauss–Hermite 20: time per jitted iteration / one Cholesky")
    print(f"{'method':16s}" + "".join(f"{'n=' + str(n):>10s}" for n in args.sizes))
    print(f"{'(cholesky ms)':16s}" + "".join(f"{1e3 * floors[n]:10.2f}" for n in args.sizes))
    for method in SITE_METHODS:
        ratios = [step_time(method, n, args.repeats, lik) / floors[n] for n in args.sizes]
        print(f"{method:16s}" + "".join(f"{r:10.2f}" for r in ratios), flush=True)


if __name__ == "__main__":
    main()
