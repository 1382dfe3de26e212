"""The ``bnlab`` command line.

    bnlab surface --data FILE.csv --likelihood probit --methods ep,vi,ep_like --mcmc \\
                  --out surface.nc
    bnlab reproduce li2023 --dataset breast_cancer [--folds 5 --seeds 10 --methods LA,EP \\
                           --workers 2]

Grid axes are given as NAME=LO:HI:NUM in natural-log space (default: the Li et al.
2023 Fig. 2 grid, log ℓ ∈ [−1, 5] and log σ ∈ [−1, 5], i.e. log σ² ∈ [−2, 10], 21 × 21).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

LIKELIHOODS = ("probit", "logit", "gaussian", "poisson", "student_t", "laplace")
DEFAULT_GRID = ("lengthscale=-1:5:21", "variance=-2:10:21")


def _likelihood(name):
    from . import likelihoods as L
    return {"probit": lambda: L.Bernoulli("probit"), "logit": lambda: L.Bernoulli("logit"),
            "gaussian": L.Gaussian, "poisson": L.Poisson, "student_t": L.StudentT,
            "laplace": L.Laplace}[name]()


def _grid(specs):
    grid = {}
    for spec in specs:
        try:
            name, rng = spec.split("=")
            lo, hi, num = rng.split(":")
            grid[name] = np.exp(np.linspace(float(lo), float(hi), int(num)))
        except ValueError:
            raise ValueError(f"bad --grid {spec!r}; expected NAME=LO:HI:NUM "
                             f"(natural-log range), e.g. lengthscale=-1:5:21") from None
    return grid


class _Bar:
    """A progress bar on stderr (tqdm)."""

    def __init__(self, desc):
        from tqdm import tqdm
        self.bar = tqdm(total=1000, desc=desc, file=sys.stderr, unit="‰")

    def __call__(self, fraction):
        self.bar.update(int(round(1000 * fraction)) - self.bar.n)

    def close(self):
        self.bar.close()


def _surface(args):
    import bnlab
    from . import datasets, kernels
    data = datasets.from_csv(args.data, target=args.target, test_fraction=args.test_fraction,
                             seed=args.seed)
    lik = _likelihood(args.likelihood)
    kernel = kernels.KERNELS[args.kernel]()
    model = bnlab.GP(kernel, lik)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.mcmc and "mcmc" not in methods:
        methods.append("mcmc")
    has_test = len(data.y_test) > 0
    grid = _grid(args.grid)
    client = None
    if args.scheduler:
        from distributed import Client
        try:
            client = Client(args.scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"cannot reach the Dask scheduler at {args.scheduler!r}: {exc}") from None
    bar = _Bar("surface")
    try:
        surf = bnlab.surface(model, data.X, data.y, methods=methods, grid=grid,
                             X_test=data.X_test if has_test else None,
                             y_test=data.y_test if has_test else None,
                             damping=args.damping, max_iters=args.max_iters,
                             backtracking=not args.no_backtracking,
                             acceleration=not args.no_acceleration, progress=bar,
                             client=client, store=args.store,
                             mcmc_options={"num_temps": args.temps, "num_chains": args.chains,
                                           "seed": args.seed})
    finally:
        bar.close()
        if client is not None:
            client.close()
    surf.to_netcdf(args.out)
    per_n = surf.log_marginal_per_n
    for m in surf["scheme"].values:
        v = per_n.loc[{"scheme": m}]
        i, j = np.unravel_index(int(np.nanargmax(v.values)), v.shape)
        dims = v.dims
        print(f"{m:>8}: max log p(y|θ)/n = {float(v.values[i, j]):.4f} at "
              f"{dims[0]}={float(v[dims[0]][i]):.4g}, {dims[1]}={float(v[dims[1]][j]):.4g}")
    print(f"wrote {args.out}")


def _reproduce(args):
    from .reproduce import format_table, li2023
    from tqdm import tqdm
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    bar = tqdm(total=args.folds * args.seeds * len(methods), desc="li2023", file=sys.stderr)

    def progress(done, total, message):
        bar.set_postfix_str(message)
        bar.update(done - bar.n)

    try:
        results = li2023(args.dataset, folds=args.folds, seeds=args.seeds, methods=methods,
                         workers=args.workers, progress=progress)
    finally:
        bar.close()
    print(f"Li, John & Solin (2023) Table 1 (EP_at_Ours: Table 7), {args.dataset}: test lpd over "
          f"{args.folds} folds × {args.seeds} seeds")
    print(format_table(args.dataset, results))


def build_parser():
    p = argparse.ArgumentParser(prog="bnlab", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("surface", help="approximate log marginal likelihood surfaces")
    s.add_argument("--data", required=True, help="CSV with a header; the target is the last "
                   "column unless --target is given")
    s.add_argument("--target", default=None)
    s.add_argument("--likelihood", required=True, choices=LIKELIHOODS)
    s.add_argument("--kernel", default="matern52",
                   choices=("matern12", "matern32", "matern52", "rbf", "periodic"))
    s.add_argument("--methods", default="laplace,vi,ep,ep_like")
    s.add_argument("--mcmc", action="store_true", help="add the AIS gold standard (cached)")
    s.add_argument("--grid", action="append", default=None,
                   help="NAME=LO:HI:NUM in natural log (twice); default " + " ".join(DEFAULT_GRID))
    s.add_argument("--test-fraction", type=float, default=0.0)
    s.add_argument("--damping", type=float, default=0.5)
    s.add_argument("--max-iters", type=int, default=200)
    s.add_argument("--no-backtracking", action="store_true",
                   help="fixed-step VI (no halving of ρ when the ELBO falls)")
    s.add_argument("--no-acceleration", action="store_true",
                   help="the plain damped site iteration (no Anderson mixing)")
    s.add_argument("--temps", type=int, default=1000, help="AIS temperatures")
    s.add_argument("--chains", type=int, default=16, help="AIS chains per grid point")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="output netCDF file")
    s.add_argument("--store", default=None, metavar="PATH",
                   help="Zarr store of finished blocks: a rerun resumes from it")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler (e.g. tcp://host:8786): grid blocks run on its workers")
    s.set_defaults(run=_surface)
    r = sub.add_parser("reproduce", help="reproduce a paper's table")
    r.add_argument("paper", choices=("li2023",))
    r.add_argument("--dataset", default="breast_cancer")
    r.add_argument("--folds", type=int, default=5)
    r.add_argument("--seeds", type=int, default=10)
    r.add_argument("--methods", default="LA,EP,VI,Ours,EP_at_Ours",
                   help="comma-separated rows of the table")
    r.add_argument("--workers", type=int, default=None,
                   help="train/test splits fitted at the same time (default: one per core)")
    r.set_defaults(run=_reproduce)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if getattr(args, "grid", None) is None and args.command == "surface":
        args.grid = list(DEFAULT_GRID)
    try:
        args.run(args)
    except ValueError as exc:
        print(f"bnlab: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
