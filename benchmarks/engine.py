"""Engine speed: jitted time per iteration of every site method on a full GP, as a
ratio to one n×n Cholesky factorisation measured in the same process (issue 2).

Run:  python benchmarks/engine.py [--sizes 200 500 1000] [--repeats 50] [--methods pl2 vi ...]
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


def _once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def cholesky_call(n):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n))
    A = jnp.asarray(A @ A.T + n * np.eye(n))
    chol = jax.jit(jnp.linalg.cholesky)
    return lambda: chol(A).block_until_ready()


def step_call(method, n, likelihood):
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
    return lambda: jax.block_until_ready(engine.step(params, X, y, cfg, state))


def ratio(step, chol, repeats):
    """min step time / min Cholesky time, the two measured alternately (same load)."""
    step(), chol()                                     # compile / warm up
    steps, chols = [], []
    for _ in range(repeats):
        steps.append(_once(step))
        chols.append(_once(chol))
    return min(steps) / min(chols), min(chols)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--methods", nargs="+", default=list(SITE_METHODS),
                        choices=list(SITE_METHODS), metavar="METHOD")
    args = parser.parse_args()
    lik = lambda: bnlab.likelihoods.Bernoulli("probit")  # noqa: E731
    chols = {n: cholesky_call(n) for n in args.sizes}
    print("Full GP, Bernoulli-probit, Gauss–Hermite 20: time per jitted iteration / one "
          f"Cholesky of the same size (min of {args.repeats}, measured alternately)")
    print(f"{'method':16s}" + "".join(f"{'n=' + str(n):>10s}" for n in args.sizes))
    floors = {n: [] for n in args.sizes}
    for method in args.methods:
        row = []
        for n in args.sizes:
            r, floor = ratio(step_call(method, n, lik), chols[n], args.repeats)
            row.append(r)
            floors[n].append(floor)
        print(f"{method:16s}" + "".join(f"{r:10.2f}" for r in row), flush=True)
    print(f"{'(cholesky ms)':16s}" + "".join(f"{1e3 * min(floors[n]):10.2f}" for n in args.sizes))


if __name__ == "__main__":
    main()
