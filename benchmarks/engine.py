"""Engine speed: jitted time per iteration of every site method on a full GP, as a
ratio to one n×n Cholesky factorisation measured in the same process (issue 2).

Two columns per size:
- ``step``: one call of the jitted ``Engine.step`` against one call of a jitted
  Cholesky (minimum of ``--repeats`` each, alternately), each waited for on one output.
  A call also pays the dispatch of the state's ≈ 30 arrays — at N = 200 a jitted
  *identity* on the state without its prior costs 0.42 Choleskys (``Engine.step``
  keeps the prior out of the call).
- ``loop``: an iteration inside the compiled loop of ``Engine.run``, as a user's run
  spends it: (T(k₀ + m) − T(k₀)) / m for runs of exactly k₀ and k₀ + m iterations
  (tol = 0, started from the same sites), against (T'(k₀ + m) − T'(k₀)) / m for a
  compiled loop of Choleskys. Where the method's run stops early (a rejected step
  ends it as diverged: pl2 on this problem, benchmarks/README.md) the entry, marked
  "*", times a compiled loop of exactly k₀ and k₀ + m steps with no stopping rule
  instead (``step_loop``): each repeats the rejected proposal, the same work as an
  accepted step.

Run:  python benchmarks/engine.py [--sizes 200 500 1000] [--repeats 50] [--methods pl2 vi ...]
      [--processes K]   (medians and ranges over K fresh processes)
Target: every site method ≤ 3× the Cholesky floor.
"""
from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnlab
from bnlab._runtime.compiled import clear_compiled
from bnlab.engine.loop import get_engine
from bnlab.engine.state import Settings
from bnlab.methods.registry import REGISTRY

bnlab.configure()      # float64 before this script's own JAX arrays


def _once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _spd(n):
    """A well-conditioned n×n SPD matrix (the Cholesky floor's input)."""
    A = np.random.default_rng(0).standard_normal((n, n))
    return jnp.asarray(A @ A.T + n * np.eye(n))


def cholesky_call(n):
    A = _spd(n)
    chol = jax.jit(jnp.linalg.cholesky)
    return lambda: chol(A).block_until_ready()


def cholesky_loop(n):
    """``iterations ↦ seconds`` of a compiled loop of Choleskys of one n×n matrix. Each
    factor feeds back into the matrix (+0·L₀₀, so nothing is loop-invariant)."""
    A = _spd(n)

    @jax.jit
    def loop(A, k):
        def body(_, carry):
            A, acc = carry
            L = jnp.linalg.cholesky(A)
            return A.at[0, 0].add(0.0 * L[0, 0]), acc + L[-1, -1]
        return jax.lax.fori_loop(0, k, body, (A, jnp.asarray(0.0)))[1]

    return lambda k: _once(lambda: loop(A, jnp.asarray(k)).block_until_ready())


def _problem(method, n, likelihood):
    """Engine, data and settings of the benchmark problem, and its state after three
    steps from the flat initial sites."""
    rng = np.random.default_rng(1)
    X = jnp.asarray(np.sort(rng.uniform(-5, 5, n))[:, None])
    lik = likelihood()
    model = bnlab.GP(kernel=bnlab.kernels.Matern52(1.0, 1.0), likelihood=lik)
    params = model.init_params()
    y = jnp.asarray(lik.sample(params, np.sin(np.asarray(X)), rng))
    options = (("base", "vi"),) if method == "heuristic" else ()
    engine = get_engine(model, method, ("gauss_hermite", 20), options)
    # every setting a device array: Python values would be transferred at every call
    cfg = Settings(jnp.asarray(0.5 if "pep" in method else 1.0), jnp.asarray(0.5),
                   jnp.asarray(1e-8), jnp.asarray(False), jnp.asarray(False))
    state = engine.init(params, X, y, cfg)
    for _ in range(3):   # move away from the initial flat sites
        state, _ = engine.step(params, X, y, cfg, state)
    return engine, params, X, y, cfg, state


def step_call(problem):
    """One step call, waited for on one output: the outputs of one XLA:CPU execution
    become ready together, and ``jax.block_until_ready`` on the whole output tree (≈ 25
    arrays) spends ≈ 15 µs in Python walking it (a Cholesky at n = 200: ≈ 180 µs)."""
    engine, params, X, y, cfg, state = problem
    return lambda: engine.step(params, X, y, cfg, state)[1].energy.block_until_ready()


def run_loop(problem):
    """``iterations ↦ (seconds, iterations done)`` of ``Engine.run`` with tol = 0 from
    the benchmark state's sites."""
    engine, params, X, y, cfg, state = problem
    cfg = cfg._replace(tol=jnp.asarray(0.0))

    def timed(k):
        t0 = time.perf_counter()
        out = jax.block_until_ready(engine.run(params, X, y, cfg, k, sites=state.sites))
        return time.perf_counter() - t0, int(out[2])
    return timed


def step_loop(problem):
    """``iterations ↦ (seconds, iterations)`` of a compiled loop of exactly that many
    ``Engine.step_pure`` iterations from the benchmark state, with no stopping rule:
    the loop column of a method whose run stops early. Every field of each step's
    ``StepInfo`` is consumed, as ``Engine.run`` records them in its trace, so that
    XLA keeps the same work."""
    engine, params, X, y, cfg, state = problem
    cfg = cfg._replace(tol=jnp.asarray(0.0))

    @jax.jit
    def loop(state, k):
        def body(_, carry):
            state, total = carry
            state, info = engine.step_pure(params, X, y, cfg, state)
            fields = jax.tree_util.tree_leaves(info)
            return state, total + sum(jnp.sum(f.astype(float)) for f in fields)
        return jax.lax.fori_loop(0, k, body, (state, jnp.asarray(0.0)))[1]

    def timed(k):
        return _once(lambda: loop(state, jnp.asarray(k)).block_until_ready()), k
    return timed


def ratio(step, chol, repeats):
    """min step time / min Cholesky time, the two measured alternately (same load)."""
    step(), chol()                                     # compile / warm up
    steps, chols = [], []
    for _ in range(repeats):
        steps.append(_once(step))
        chols.append(_once(chol))
    return min(steps) / min(chols), min(chols)


def loop_ratio(run, chol_loop, n, repeats):
    """Per-iteration time inside the compiled loops, method / Cholesky (None: the run
    stopped early)."""
    k0, m = 2, (40 if n <= 300 else 10)
    run(k0), run(k0 + m), chol_loop(k0), chol_loop(k0 + m)        # compile / warm up
    runs = {k0: [], k0 + m: []}
    chols = {k0: [], k0 + m: []}
    for _ in range(repeats):
        for k in (k0, k0 + m):
            seconds, done = run(k)
            if done < k:
                return None
            runs[k].append(seconds)
            chols[k].append(chol_loop(k))
    per_iteration = (min(runs[k0 + m]) - min(runs[k0])) / m
    per_cholesky = (min(chols[k0 + m]) - min(chols[k0])) / m
    return per_iteration / per_cholesky


def measure(args):
    """Print the table of one process; return {method: {n: (step, loop, stopped)}}
    (``stopped``: the run stops early and the loop entry is ``step_loop``'s)."""
    lik = lambda: bnlab.likelihoods.Bernoulli("probit")  # noqa: E731
    chols = {n: cholesky_call(n) for n in args.sizes}
    chol_loops = {n: cholesky_loop(n) for n in args.sizes}
    loop_repeats = max(3, args.repeats // 7)
    print("Full GP, Bernoulli-probit, Gauss–Hermite 20: time per jitted iteration / one "
          f"Cholesky of the same size; step: one call each (min of {args.repeats}, "
          f"alternately); loop: inside compiled loops (min of {loop_repeats})")
    _print_header(args.sizes)
    floors = {n: [] for n in args.sizes}
    results = {}
    for method in args.methods:
        results[method] = {}
        for n in args.sizes:
            problem = _problem(method, n, lik)
            r, floor = ratio(step_call(problem), chols[n], args.repeats)
            in_loop = loop_ratio(run_loop(problem), chol_loops[n], n, loop_repeats)
            stopped = in_loop is None
            if stopped:
                in_loop = loop_ratio(step_loop(problem), chol_loops[n], n, loop_repeats)
            results[method][n] = (r, in_loop, stopped)
            floors[n].append(floor)
        print(f"{method:16s}" + "".join(_cells(*results[method][n]) for n in args.sizes),
              flush=True)
        # every compiled executable holds memory mappings; 20 methods × 3 sizes of them
        # pass Linux's 65 530 and XLA dies mid-table (bnlab/_runtime/compiled.py)
        clear_compiled()
        gc.collect()
    print(f"{'(cholesky ms)':16s}" + "".join(f"{1e3 * min(floors[n]):16.2f}" for n in args.sizes))
    if any(cell[2] for row in results.values() for cell in row.values()):
        print("* the run stops early (a rejected step): a compiled loop of steps instead")
    return results


def _print_header(sizes, step_width=9, loop_width=7):
    print(f"{'':16s}" + "".join(f"{'n=' + str(n):>{step_width + loop_width}s}" for n in sizes))
    print(f"{'method':16s}" + f"{'step':>{step_width}s}{'loop':>{loop_width}s}" * len(sizes))


def _cells(step, loop, stopped):
    return f"{step:9.2f}" + f"{loop:6.2f}" + ("*" if stopped else " ")


def medians_over_processes(args):
    """Run the table in ``args.processes`` fresh processes, one after the other, and
    print the median of each entry and its range. On the 2-core machine an entry at
    n = 200 moves by ±20 % from one process to the next with the same code
    (benchmarks/README.md), so a single table does not decide entries near the target."""
    tables = []
    for i in range(args.processes):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            command = [sys.executable, __file__, "--sizes", *map(str, args.sizes), "--repeats",
                       str(args.repeats), "--methods", *args.methods, "--json", out.name]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            tables.append(json.load(out))
        print(f"process {i + 1} of {args.processes} done", flush=True)
    print(f"Medians over {args.processes} processes [range]")
    _print_header(args.sizes, 18, 18)
    for method in args.methods:
        row = ""
        for n in args.sizes:
            entries = [table[method][str(n)] for table in tables]
            stopped = any(e[2] for e in entries)
            for column in (0, 1):
                values = [e[column] for e in entries]
                cell = f"{np.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"
                row += f"{cell:>17s}" + ("*" if column == 1 and stopped else " ")
        print(f"{method:16s}" + row, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--methods", nargs="+", default=list(REGISTRY),
                        choices=list(REGISTRY), metavar="METHOD")
    parser.add_argument("--processes", type=int, default=1,
                        help="run the table in this many fresh processes and print medians")
    parser.add_argument("--json", help=argparse.SUPPRESS)   # a child's results, for --processes
    args = parser.parse_args()
    if args.processes > 1:
        medians_over_processes(args)
        return
    results = measure(args)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out)


if __name__ == "__main__":
    main()
