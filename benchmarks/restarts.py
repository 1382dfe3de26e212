"""Restarts with JAX's persistent compilation cache: wall time of a first and a second
process doing the same work against one fresh cache directory, and their ratio.

    python benchmarks/restarts.py [--no-browser]

- surface: ``import bnlab`` and a 7 × 7 three-method surface (Laplace, VI, EP) on
  ``synthetic_probit`` (n = 281), from the process's start;
- lab: ``panel serve apps/lab.py`` in a fresh server process, then navigation → first
  drawn posterior plot in Debian's chromium (``app_latency.page_load``'s first load).
Target: second / first ≤ 0.3.
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SURFACE = """
import time; t = time.perf_counter()
import numpy as np, bnlab
from bnlab.datasets import synthetic_probit
X, y = synthetic_probit()
model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
bnlab.surface(model, X, y, methods=["laplace", "vi", "ep"],
              grid={"lengthscale": np.exp(np.linspace(-1, 5, 7)),
                    "variance": np.exp(np.linspace(-2, 10, 7))})
print(time.perf_counter() - t)
"""


def surface_seconds(env):
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", SURFACE], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True)
    return time.perf_counter() - t, float(out.stdout.split()[-1])


def lab_seconds(env):
    old = dict(os.environ)
    os.environ.update(env)
    try:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from app_latency import page_load
        return page_load()[0]
    finally:
        os.environ.clear()
        os.environ.update(old)


def main():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, BNLAB_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        env.pop("BNLAB_XLA_CACHE", None)
        first, second = surface_seconds(env), surface_seconds(env)
        print(f"7 × 7 surface, 3 methods, n = 281 (process wall / from import): "
              f"first {first[0]:.1f} / {first[1]:.1f} s, second {second[0]:.1f} / {second[1]:.1f} s, "
              f"ratio {second[0] / first[0]:.2f} / {second[1] / first[1]:.2f}")
        if "--no-browser" not in sys.argv:
            lab = [lab_seconds(env), lab_seconds(env)]
            print(f"lab, fresh server → first plot: first {lab[0]:.1f} s, second {lab[1]:.1f} s, "
                  f"ratio {lab[1] / lab[0]:.2f}")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
