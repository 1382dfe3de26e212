"""Batched surfaces (``batching="vmap"``) on the default device against the scan path on
the CPU, and against their floor, per method and size; the values checked to agree.

    python benchmarks/batched.py [--sizes 281:21 1000:21 5000:11] [--methods laplace ep]
                                 [--cpu-max-n 281] [--layouts cold warm] [--first-only]

Data: ``bnlab.datasets.synthetic_probit`` (d = 10), a Matérn-5/2 probit GP, a side × side
grid over log ℓ ∈ [−1, 5], log σ² ∈ [−2, 10] (the issue-46 surfaces); each size is
``n:side``. Per method:

- **vmap cold**: ``batching="vmap", warm_start=False`` on the default device (every point
  from the initial sites, the points as one batch, split where memory asks): the first
  call (compiling) and the second (warm; ``--first-only``: the first alone, for sizes
  where a second run does not fit the time);
- **vmap warm** (``--layouts`` with ``warm``): ``warm_start=True``, the rows side by side
  (``studies.surfaces.batched``), its second call;
- **cpu scan**: ``batching="scan"`` with warm starts on the CPU device (its default and
  fastest form), one thread per core, its second call; for n above ``--cpu-max-n`` it is
  not timed, and the values are checked instead at a ``--check`` × ``--check`` subgrid
  (scan, cold, against the vmap cold surface's values there: cold points are
  independent, so the same values);
- **floor**: the largest iteration count on the grid × one batched float64 Cholesky of
  the grid's n × n matrices on the default device (timed here, in batches of as many
  as fit in ``batched.free_bytes``): what a vmapped Newton-like loop cannot go under;
- **check**: the largest |Δ log p(y|θ)/n| between the vmap and scan values where both
  converged, and the points whose converged / diverged flags differ: "ok" where that is
  below ``--agree`` and none differ, else "DIFFERS" and the exit status is 1.
"""
import argparse
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnlab
from bnlab.datasets import synthetic_probit
from bnlab.studies.surfaces.batched import free_bytes

bnlab.configure()      # float64 before this script's own JAX arrays

METHODS = ["laplace", "vi", "ep", "ep_like"]
MODEL = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))


def grid(side):
    return {"lengthscale": np.exp(np.linspace(-1, 5, side)),
            "variance": np.exp(np.linspace(-2, 10, side))}


def timed(run):
    t = time.perf_counter()
    out = run()
    return out, time.perf_counter() - t


def cholesky_floor(n, points, device):
    """Seconds of one float64 Cholesky of ``points`` n × n matrices on ``device``, in
    batches that fit its memory budget (input, factor and workspace: 3 n² each)."""
    batch = max(1, min(points, free_bytes(device) // (3 * 8 * n * n)))
    a = np.random.default_rng(0).standard_normal((n, n))
    spd = jax.device_put(jnp.broadcast_to(jnp.asarray(a @ a.T / n + np.eye(n)),
                                          (batch, n, n)), device)
    chol = jax.jit(jnp.linalg.cholesky)
    chol(spd).block_until_ready()
    best = min(timed(lambda: chol(spd).block_until_ready())[1] for _ in range(3))
    return best * math.ceil(points / batch)


def compare(a, b):
    """(largest |Δ log p/n| where both converged, points with different flags, points)."""
    same = (a.converged.values == b.converged.values) & (a.diverged.values == b.diverged.values)
    both = a.converged.values & b.converged.values
    diff = np.abs(a.log_marginal_per_n.values - b.log_marginal_per_n.values)[both]
    return (float(diff.max()) if diff.size else float("nan")), int((~same).sum()), same.size


def one_size(n, side, methods, args, device):
    """Yields the rows of size (n, side), one per method, as they are measured."""
    X, y = synthetic_probit(n=n)
    g = grid(side)
    cpu = jax.devices("cpu")
    points = side * side

    def surface(method, g=g, **kw):
        return bnlab.surface(MODEL, X, y, methods=[method], grid=g, max_work=math.inf, **kw)

    chol = cholesky_floor(n, points, device)
    for m in methods:
        row = {"method": m, "chol": chol}
        vmap, row["vmap_first"] = timed(lambda: surface(m, batching="vmap", warm_start=False))
        row["vmap_cold"] = row["vmap_first"] if args.first_only else \
            timed(lambda: surface(m, batching="vmap", warm_start=False))[1]
        if "warm" in args.layouts:
            if not args.first_only:
                surface(m, batching="vmap")
            vmap_warm, row["vmap_warm"] = timed(lambda: surface(m, batching="vmap"))
        if n <= args.cpu_max_n:
            if not args.first_only:
                surface(m, batching="scan", devices=cpu)
            scan, row["cpu_scan"] = timed(lambda: surface(m, batching="scan", devices=cpu))
            row["check"] = compare(vmap_warm if "warm" in args.layouts else vmap, scan)
        else:                  # not timed: the values at a subgrid of cold points
            k = np.unique(np.linspace(0, side - 1, args.check).round().astype(int))
            sub = {name: v[k] for name, v in g.items()}
            scan = surface(m, g=sub, batching="scan", devices=cpu, warm_start=False)
            row["check"] = compare(vmap.isel(lengthscale=k, variance=k), scan)
        row["iterations"] = int(vmap.iterations.values.max())
        row["floor"] = row["iterations"] * chol
        yield row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", default=os.environ.get("SIZES", "281:21").split(),
                    help="n:side pairs (env SIZES)")
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--cpu-max-n", type=int, default=281,
                    help="the largest n whose CPU scan surface is timed")
    ap.add_argument("--check", type=int, default=3, help="the subgrid's side above it")
    ap.add_argument("--layouts", nargs="+", default=["cold", "warm"], choices=["cold", "warm"])
    ap.add_argument("--agree", type=float, default=1e-6,
                    help="the largest |Δ log p(y|θ)/n| counted as agreeing")
    ap.add_argument("--first-only", action="store_true",
                    help="time each surface's first (compiling) call only")
    args = ap.parse_args()
    device = jax.devices()[0]
    print(f"default device {device.platform} ({device.device_kind}), JAX {jax.__version__}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print("seconds per surface; vmap first = with compiling; ratio = cpu scan / best vmap;"
          " / floor = vmap cold / floor")
    head = (f"{'n':>5} {'grid':>6} {'method':>8} {'vmap first':>10} {'vmap cold':>9} "
            f"{'vmap warm':>9} {'cpu scan':>9} {'ratio':>6} {'iters':>5} {'floor':>8} "
            f"{'/ floor':>7}  check: max|Δ|/n, flags differ")
    print(head)
    failed = 0
    for spec in args.sizes:
        n, side = (int(v) for v in spec.split(":"))
        for r in one_size(n, side, args.methods, args, device):
            best = min(r["vmap_cold"], r.get("vmap_warm", np.inf))
            cpu = r.get("cpu_scan", np.nan)
            diff, differ, total = r["check"]
            ok = differ == 0 and not diff > args.agree
            failed += not ok
            print(f"{n:>5} {side:>3}²{'':>2} {r['method']:>8} {r['vmap_first']:>10.3f} "
                  f"{r['vmap_cold']:>9.3f} {r.get('vmap_warm', np.nan):>9.3f} {cpu:>9.3f} "
                  f"{cpu / best:>6.2f} {r['iterations']:>5} {r['floor']:>8.4f} "
                  f"{r['vmap_cold'] / r['floor']:>7.1f}  {diff:.1e}, {differ} of {total} "
                  f"{'ok' if ok else 'DIFFERS'}"
                  + ("" if np.isfinite(cpu) else f" ({int(math.sqrt(total))}² subgrid)"),
                  flush=True)
        print(f"{'':>5} one batched Cholesky of {side * side} matrices {n} × {n}: "
              f"{1e3 * r['chol']:.3f} ms", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
