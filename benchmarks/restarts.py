"""A researcher's script run once, and again: a first process (empty compile cache), a
second process (the cache the first one filled) and a warm call (the same work again
in the second process), against scikit-learn's GaussianProcessClassifier in a new
process on the same grid; ratios printed.

    python benchmarks/restarts.py [--rounds 2] [--export-off] [--works 3-method]

- ``laplace``: Laplace-only 7 × 7 surface (logit, Newton ρ = 1, as scikit-learn),
  log ℓ ∈ [−1, 5], log σ² ∈ [−2, 10];
- ``3-method``: the same grid with Laplace, VI and EP (probit);
- ``--export-off`` adds ``laplace-plain``: the Laplace surface with
  ``BNLAB_EXPORT_CACHE=0`` (a new process traces and lowers its programs again,
  ``bnlab._runtime.exported``);
- scikit-learn: ``GaussianProcessClassifier(optimizer=None)`` fitted once and its
  ``log_marginal_likelihood`` at the 49 points, from the process's start (its
  "first call"); the second pass over the grid is its warm time.

Data: IONOSPHERE's training split (n = 281, d = 34) where a development copy is at
``BNLAB_IONOSPHERE`` (default /work/shared/data/surface-splits/ionosphere.mat), else
``bnlab.datasets.synthetic_probit`` (n = 281, d = 10). Every process gets one BLAS
thread and its own fresh cache directory per round; a first pass is timed from the
process's spawn (import and data included), a warm pass on its own; under each row,
where a process's first pass went (``bnlab._runtime.compile_log``: JAX's tracing,
lowering, XLA's compilation and loads from the persistent cache, summed over the
surface's threads). The lab's first and second server: ``lab_restarts.py``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IONOSPHERE = os.environ.get("BNLAB_IONOSPHERE",
                            "/work/shared/data/surface-splits/ionosphere.mat")

DATA = """
import os
import numpy as np
def data():
    path = %r
    if os.path.exists(path):
        from scipy.io import loadmat
        m = loadmat(path)
        return "IONOSPHERE", np.asarray(m["train_X"], float), np.asarray(m["train_Y"], float).ravel()
    from bnlab.datasets import synthetic_probit
    return "synthetic_probit", *synthetic_probit()
GRID = {"lengthscale": np.exp(np.linspace(-1, 5, 7)), "variance": np.exp(np.linspace(-2, 10, 7))}
""" % IONOSPHERE

BNLAB = DATA + """
import json, sys, time
import bnlab
from bnlab._runtime.compile_log import CompileLog
imported = time.time() - float(sys.argv[2])
name, X, y = data()
work = sys.argv[1]
if work.startswith("laplace"):
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("logit"))
    run = lambda: bnlab.surface(model, X, y, methods=["laplace"], grid=GRID, damping=1.0)
else:
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    run = lambda: bnlab.surface(model, X, y, methods=["laplace", "vi", "ep"], grid=GRID)
with CompileLog() as log:
    run()
first = time.time() - float(sys.argv[2])
t = time.perf_counter(); run(); warm = time.perf_counter() - t
print(json.dumps({"data": name, "n": len(y), "first": first, "warm": warm, "import": imported,
                  "trace": log.trace_seconds, "lower": log.lower_seconds,
                  "compile": log.compile_seconds, "load": log.load_seconds}))
"""

SKLEARN = DATA + """
import json, sys, time
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import ConstantKernel, Matern
name, X, y = data()
thetas = [np.log([v, l]) for l in GRID["lengthscale"] for v in GRID["variance"]]
gpc = GaussianProcessClassifier(ConstantKernel(1.0) * Matern(1.0, nu=2.5), optimizer=None)
gpc.fit(X, (y > 0).astype(int))
[gpc.log_marginal_likelihood(t) for t in thetas]
first = time.time() - float(sys.argv[1])
t = time.perf_counter(); [gpc.log_marginal_likelihood(t) for t in thetas]
print(json.dumps({"data": name, "n": len(y), "first": first, "warm": time.perf_counter() - t}))
"""


def process(script, args, env) -> dict:
    """The script's JSON: ``first``, seconds from spawn to the end of its first pass
    (the spawn time is its last argument), and ``warm``, its second pass."""
    out = subprocess.run([sys.executable, "-c", script, *args, repr(time.time())], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{args}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def round_once(env, works):
    """One round: scikit-learn, then each surface in a first and a second process."""
    sk = process(SKLEARN, [], env)
    rows = {"sklearn": sk, "data": (sk["data"], sk["n"])}
    for work in works:
        with tempfile.TemporaryDirectory() as cache:
            own = dict(env, BNLAB_CACHE_DIR=cache)
            if work == "laplace-plain":
                own["BNLAB_EXPORT_CACHE"] = "0"
            first = process(BNLAB, [work], own)
            second = process(BNLAB, [work], own)
        rows[work] = {"first": first["first"], "second": second["first"],
                      "warm": second["warm"], "parts": (first, second)}
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--export-off", action="store_true",
                    help="also the Laplace surface without stored exported programs")
    ap.add_argument("--works", default="laplace,3-method",
                    help="the surfaces to time, comma-separated (laplace, 3-method)")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for key in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE", "BNLAB_EXPORT_CACHE"):
        env.pop(key, None)
    chosen = args.works.split(",")
    unknown = set(chosen) - {"laplace", "3-method"}
    if unknown:
        ap.error(f"unknown work(s) {', '.join(sorted(unknown))}: laplace, 3-method")
    works = [w for w in ("laplace", "3-method") if w in chosen]
    if args.export_off:
        works.insert(1 if "laplace" in works else 0, "laplace-plain")
    for r in range(args.rounds):
        rows = round_once(env, works)
        sk = rows["sklearn"]
        name, n = rows["data"]
        print(f"round {r + 1}: {name}, n = {n}, 7 × 7 grid, load {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores; scikit-learn new process {sk['first']:.2f} s, "
              f"warm {sk['warm']:.2f} s")
        for work in works:
            w = rows[work]
            print(f"  {work:<13} first process {w['first']:6.2f} s, second {w['second']:6.2f} s, "
                  f"warm {w['warm']:5.2f} s | sklearn ÷ bnlab: first "
                  f"{sk['first'] / w['first']:.2f}, second {sk['first'] / w['second']:.2f}, "
                  f"warm {sk['warm'] / w['warm']:.2f} | second ÷ warm "
                  f"{w['second'] / w['warm']:.1f}")
            for which, part in zip(("first", "second"), w["parts"]):
                print(f"    {which:<6} process: spawn → import bnlab {part['import']:5.2f} s; "
                      f"first pass traced {part['trace']:5.2f} s, lowered {part['lower']:5.2f}, "
                      f"XLA compiled {part['compile']:5.2f}, loaded {part['load']:5.2f} "
                      f"(summed over threads)")


if __name__ == "__main__":
    main()
