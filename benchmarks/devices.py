"""Surface time per grid point on one device and on every device of this process, and
the ratio.

    python benchmarks/devices.py [--side 21] [--repeats 2] [--methods ep ...]
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python benchmarks/devices.py
    python benchmarks/devices.py --large | --cholesky | --against-cpu [--sizes 1000 5000]

Data: ``bnlab.datasets.synthetic_probit``, n = 281 (the IONOSPHERE training size), d = 10;
four methods (Laplace, VI, EP, EP-like), a side × side grid over log ℓ ∈ [−1, 5],
log σ² ∈ [−2, 10]. Both sides are compiled first, then timed ``--repeats`` times,
alternating, each keeping its fastest run. One thread sends the blocks (``workers=1``),
so "all devices" is the only source of parallelism; for comparison, one device fed by
one thread per core (a CPU's other way to use its cores). Instead of that:
``--large`` times a 5 × 5 surface at each of ``--sizes`` on all devices (meant for a
GPU); ``--cholesky`` prints what float64 costs on the first device (a Cholesky
factorisation in float64 against float32); ``--against-cpu``
computes the side × side surface on the default devices and on this machine's CPU and
prints the largest difference (a GPU check). OpenBLAS is limited to one thread.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import bnlab  # noqa: E402
from bnlab.datasets import synthetic_probit  # noqa: E402

bnlab.configure()      # float64 before this script's own JAX arrays

METHODS = ["laplace", "vi", "ep", "ep_like"]


def grid(side):
    return {"lengthscale": np.exp(np.linspace(-1, 5, side)),
            "variance": np.exp(np.linspace(-2, 10, side))}


def best_time(run, repeats):
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=21)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--large", action="store_true", help="instead: n = --sizes (GPU)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000],
                    help="the data sizes of --large and --cholesky")
    ap.add_argument("--methods", nargs="+", default=METHODS, help="the surfaces' methods")
    ap.add_argument("--cholesky", action="store_true",
                    help="instead: a float64 against a float32 Cholesky factorisation")
    ap.add_argument("--against-cpu", action="store_true",
                    help="instead: the surface on the default devices against the CPU")
    ap.add_argument("--dask", action="store_true",
                    help="instead: a LocalCluster of one worker process per core against "
                         "one thread per core in this process")
    args = ap.parse_args()
    if args.dask:
        return dask_overhead(args)
    if args.cholesky:
        return cholesky_cost(args)
    if args.against_cpu:
        return against_cpu(args)
    if args.large:
        return large(args)
    devices = jax.local_devices()
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    X, y = synthetic_probit()
    g = grid(args.side)
    points = args.side ** 2

    def run(k, workers=1):
        return bnlab.surface(model, X, y, methods=args.methods, grid=g, devices=k,
                             workers=workers)

    one = run(1)                                     # compile both
    every = run(len(devices)) if len(devices) > 1 else one
    a, b = one.log_marginal_per_n.values, every.log_marginal_per_n.values
    agree = float(np.nanmax(np.abs(a - b)))
    threads = os.cpu_count() or 1
    t = {1: np.inf, len(devices): np.inf, "threads": np.inf}
    for _ in range(args.repeats):
        for k in t:
            t[k] = min(t[k], best_time(lambda: run(1, threads) if k == "threads" else run(k), 1))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{devices[0].platform} × {len(devices)} ({devices[0].device_kind}), n = {len(y)}, "
          f"{args.side} × {args.side} grid, methods {' '.join(args.methods)}")
    print(f"  1 device:      {1e3 * t[1] / points:8.2f} ms per grid point ({t[1]:.2f} s)")
    k = len(devices)
    print(f"  {k} device(s):   {1e3 * t[k] / points:8.2f} ms per grid point ({t[k]:.2f} s)")
    print(f"  ratio 1 / all: {t[1] / t[k]:.2f}   (largest |Δ log p(y|θ)/n| between them: {agree:.1e})")
    print(f"  for comparison, 1 device from {threads} threads: {1e3 * t['threads'] / points:8.2f} ms "
          f"per grid point (ratio to 1 device, 1 thread: {t[1] / t['threads']:.2f})")


def large(args):
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    devices = jax.local_devices()
    print(f"{devices[0].platform} × {len(devices)} ({devices[0].device_kind}), methods "
          f"{' '.join(args.methods)}")
    for n in args.sizes:
        X, y = synthetic_probit(n=n)
        run = lambda: bnlab.surface(model, X, y, methods=args.methods, grid=grid(5), workers=1)
        run()
        t = best_time(run, args.repeats)
        print(f"  n = {n}: {1e3 * t / 25:.1f} ms per grid point on all devices (5 × 5 grid)")


def against_cpu(args):
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    X, y = synthetic_probit()
    surf = {name: bnlab.surface(model, X, y, methods=args.methods, grid=grid(args.side),
                                devices=devs, workers=1)
            for name, devs in (("default", None), ("cpu", jax.devices("cpu")))}
    a, b = surf["default"], surf["cpu"]
    diff = np.abs(a.log_marginal_per_n.values - b.log_marginal_per_n.values)
    print(f"{jax.local_devices()[0].device_kind} against the CPU, n = {len(y)}, "
          f"{args.side} × {args.side} grid")
    for k, m in enumerate(args.methods):
        same = (a.converged.values[k] == b.converged.values[k]).mean()
        print(f"  {m}: largest |Δ log p(y|θ)/n| {np.nanmax(diff[k]):.1e}, same converged "
              f"flag at {100 * same:.0f} % of points")


def cholesky_cost(args):
    """A float64 against a float32 Cholesky factorisation per size, first device."""
    import jax.numpy as jnp
    device = jax.local_devices()[0]
    print(f"{device.platform} ({device.device_kind}); load average {os.getloadavg()[0]:.1f}")
    for n in args.sizes:
        t = {}
        for dt in ("float64", "float32"):
            with jax.enable_x64(dt == "float64"):
                a = np.random.default_rng(0).standard_normal((n, n))
                spd = jax.device_put(jnp.asarray(a @ a.T / n + np.eye(n), dt), device)
                chol = jax.jit(jnp.linalg.cholesky)
                chol(spd).block_until_ready()
                t[dt] = best_time(lambda: chol(spd).block_until_ready(), 5)
        print(f"  Cholesky n = {n}: float64 {1e3 * t['float64']:.3f} ms, float32 "
              f"{1e3 * t['float32']:.3f} ms (float64 / float32 {t['float64'] / t['float32']:.2f})")


def dask_overhead(args):
    """Time per block on a LocalCluster (one single-threaded worker process per core)
    against the same grid in this process (one thread per core), both warm."""
    from distributed import Client, LocalCluster
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    X, y = synthetic_probit()
    g = grid(args.side)
    cores = os.cpu_count() or 1
    with LocalCluster(n_workers=cores, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        def local():
            return bnlab.surface(model, X, y, methods=METHODS, grid=g, devices=1, workers=cores)

        def remote():
            return bnlab.surface(model, X, y, methods=METHODS, grid=g, client=client)

        a, b = local(), remote()                     # compile on every process
        agree = float(np.nanmax(np.abs(a.log_marginal_per_n.values - b.log_marginal_per_n.values)))
        t = {"local": np.inf, "dask": np.inf}
        for _ in range(args.repeats):
            t["local"] = min(t["local"], best_time(local, 1))
            t["dask"] = min(t["dask"], best_time(remote, 1))
    from bnlab.studies.surfaces.blocks import plan_blocks
    blocks = 3 * len(plan_blocks((args.side, args.side), args.side, True))   # VI shares EP-like's run
    print(f"load average {os.getloadavg()[0]:.1f} on {cores} cores; n = {len(y)}, "
          f"{args.side} × {args.side} grid, {len(METHODS)} methods ({blocks} blocks)")
    print(f"  in process, {cores} threads: {t['local']:.2f} s")
    print(f"  LocalCluster, {cores} workers: {t['dask']:.2f} s  (ratio {t['dask'] / t['local']:.2f}, "
          f"{1e3 * (t['dask'] - t['local']) / blocks:+.0f} ms per block; "
          f"largest |Δ log p(y|θ)/n| {agree:.1e})")


if __name__ == "__main__":
    main()
