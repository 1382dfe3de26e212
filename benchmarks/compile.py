"""Where a first run's seconds go, per model and method: tracing to jaxprs, lowering to
MLIR, XLA's compilation (first process, empty cache), and loading the same programs
from the persistent cache (second process), with the most expensive program of each.

    python benchmarks/compile.py [--methods laplace,vi,ep,ep_like,gkl] [--n 281]
                                 [--no-surface] [--models gp,sparse,markov]

Each row is one call in a process that has already run the rows above it (programs
they share, e.g. the data's staging, are counted once, in the first row). ``infer`` is
one inference at the default hyperparameters; ``surface`` a 7 × 7 grid of the method
alone. Data: ``bnlab.datasets.synthetic_probit`` (probit likelihood, d = 10); the
Markov GP on its first input. Both processes get one BLAS thread and a private cache.
``BNLAB_EXPORT_CACHE=0`` in the environment times them without stored exported
programs and executables (``bnlab._runtime.exported``: the second process traces and
lowers again, and takes XLA's binaries from JAX's persistent cache).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = """
import json, sys
import numpy as np
from bnlab._runtime.compile_log import CompileLog
import bnlab
from bnlab.datasets import synthetic_probit
jobs, n = json.loads(sys.argv[1]), int(sys.argv[2])
X, y = synthetic_probit(n=n)
lik = bnlab.likelihoods.Bernoulli("probit")
MODELS = {"gp": lambda: (bnlab.GP(bnlab.kernels.Matern52(), lik), X),
          "sparse": lambda: (bnlab.SparseGP(bnlab.kernels.Matern52(), lik, inducing=X[:20]), X),
          "markov": lambda: (bnlab.MarkovGP(bnlab.kernels.Matern52(), lik), X[:, :1])}
GRID = {"lengthscale": np.exp(np.linspace(-1, 5, 7)), "variance": np.exp(np.linspace(-2, 10, 7))}
for model_name, method, work in jobs:
    model, inputs = MODELS[model_name]()
    with CompileLog() as log:
        if work == "infer":
            bnlab.infer(model, inputs, y, method=method)
        else:
            bnlab.surface(model, inputs, y, methods=[method], grid=GRID)
    top = max(log.programs, key=lambda p: p.seconds, default=None)
    print(json.dumps({"job": [model_name, method, work], "trace": log.trace_seconds,
                      "lower": log.lower_seconds, "compile": log.compile_seconds,
                      "load": log.load_seconds, "compiled": len(log.compiled),
                      "loaded": len(log.loaded),
                      "top": [top.name, top.seconds] if top else None}), flush=True)
"""


def run_worker(jobs, n, env):
    out = subprocess.run([sys.executable, "-c", WORKER, json.dumps(jobs), str(n)], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default="laplace,vi,ep,ep_like,gkl")
    ap.add_argument("--models", default="gp,sparse,markov")
    ap.add_argument("--n", type=int, default=281)
    ap.add_argument("--no-surface", action="store_true")
    args = ap.parse_args()
    methods = args.methods.split(",")
    jobs = [["gp", m, "infer"] for m in methods]
    if not args.no_surface:
        jobs += [["gp", m, "surface"] for m in methods if m != "gkl"]
    jobs += [[model, "vi", "infer"] for model in args.models.split(",") if model != "gp"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.pop("BNLAB_XLA_CACHE", None)
    with tempfile.TemporaryDirectory() as cache:
        env["BNLAB_CACHE_DIR"] = cache
        first = run_worker(jobs, args.n, env)
        second = run_worker(jobs, args.n, env)
    print(f"n = {args.n}, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; seconds")
    print(f"{'':<24}{'first process':^31}{'second process':^34}")
    print(f"{'model':<7}{'method':<9}{'work':<8}{'trace':>7}{'lower':>7}{'compile':>8}"
          f"{'programs':>9}{'trace':>7}{'lower':>7}{'load':>7}{'compiled':>9}"
          f"  costliest program (s)")
    for a, b in zip(first, second):
        model, method, work = a["job"]
        top = f"{a['top'][0]} {a['top'][1]:.2f}" if a["top"] else "-"
        print(f"{model:<7}{method:<9}{work:<8}{a['trace']:7.2f}{a['lower']:7.2f}"
              f"{a['compile']:8.2f}{a['compiled']:9d}{b['trace']:7.2f}{b['lower']:7.2f}"
              f"{b['load']:7.2f}{b['compiled']:9d}  {top}")
    total = {k: sum(r[k] for r in first) for k in ("trace", "lower", "compile")}
    print(f"total first process: trace {total['trace']:.1f} s, lower {total['lower']:.1f} s, "
          f"XLA compile {total['compile']:.1f} s; second process: load "
          f"{sum(r['load'] for r in second):.1f} s, trace "
          f"{sum(r['trace'] for r in second):.1f} s, lower {sum(r['lower'] for r in second):.1f} s")


if __name__ == "__main__":
    main()
