"""The ``bnlab`` command line.

    bnlab surface --data FILE.csv --likelihood probit --methods ep,vi,ep_like --mcmc \\
                  --out surface.nc
    bnlab reproduce li2023 --dataset breast_cancer [--folds 5 --seeds 10 --methods LA,EP \\
                           --workers 2]
    bnlab warmup [--only lab,readme]

Grid axes are given as NAME=LO:HI:NUM in natural-log space (default: the Li et al.
2023 Fig. 2 grid, log ℓ ∈ [−1, 5] and log σ ∈ [−1, 5], i.e. log σ² ∈ [−2, 10], 21 × 21).

Every numeric option is checked by argparse (an error naming the option), and the output
is checked before any work: its directory must exist and take a file, it must not be the
input, and it is written to a temporary file beside it that replaces it only once
complete, so a failed or interrupted run leaves no partial file and no lost input.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

LIKELIHOODS = ("probit", "logit", "gaussian", "poisson", "student_t", "laplace")
DEFAULT_GRID = ("lengthscale=-1:5:21", "variance=-2:10:21")


def _likelihood(name):
    from . import likelihoods as L
    return {"probit": lambda: L.Bernoulli("probit"), "logit": lambda: L.Bernoulli("logit"),
            "gaussian": L.Gaussian, "poisson": L.Poisson, "student_t": L.StudentT,
            "laplace": L.Laplace}[name]()


def _checked(parse, ok, rule):
    """An argparse ``type``: ``parse`` the text, then require ``ok`` (NaN fails every
    comparison, so a finite range also refuses NaN and ±inf)."""
    def convert(text):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {rule}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value
    return convert


def _int_at_least(lo):
    return _checked(int, lambda v: v >= lo, f"an integer ≥ {lo}")


FRACTION = _checked(float, lambda v: 0 <= v < 1, "a fraction in [0, 1)")
DAMPING = _checked(float, lambda v: 0 < v <= 1, "in (0, 1]")
SEED = _checked(int, lambda v: 0 <= v < 2**32, "an integer in [0, 2**32)")
#: natural-log grid ends whose exp is a positive finite double
LOG_RANGE = 700.0


def _grid_axis(spec):
    """NAME=LO:HI:NUM → (NAME, NUM values e^LO … e^HI)."""
    try:
        name, rng = spec.split("=")
        lo, hi, num = rng.split(":")
        lo, hi, num = float(lo), float(hi), int(num)
        if not name.strip():
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --grid {spec!r}; expected NAME=LO:HI:NUM "
                                         f"(natural-log range), e.g. lengthscale=-1:5:21") from None
    if not (abs(lo) <= LOG_RANGE and abs(hi) <= LOG_RANGE) or num < 1:
        raise argparse.ArgumentTypeError(
            f"bad --grid {spec!r}; LO and HI must be natural logs within ±{LOG_RANGE:g} (so "
            f"that e^LO and e^HI are positive finite values) and NUM at least 1")
    return name.strip(), np.exp(np.linspace(lo, hi, num))


class _GridAxes(argparse.Action):
    """Repeated --grid NAME=LO:HI:NUM collected into {NAME: values}, each NAME once."""

    def __call__(self, parser, namespace, axis, option_string=None):
        grid = dict(getattr(namespace, self.dest) or {})
        name, values = axis
        if name in grid:
            raise argparse.ArgumentError(self, f"{name!r} given twice")
        grid[name] = values
        setattr(namespace, self.dest, grid)


def _check_paths(args):
    """The output path's errors, before any work: a missing directory, a directory as
    the file, the input itself (which would be replaced by netCDF)."""
    out, data = Path(args.out), Path(args.data)
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: the directory {out.parent} does not exist")
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give a file name")
    same = out.resolve() == data.resolve() or (out.exists() and data.exists()
                                               and os.path.samefile(out, data))
    if same:
        raise ValueError(f"--out {out} is the input --data file; choose another output path")


@contextlib.contextmanager
def _atomic_output(out):
    """A temporary file beside ``out`` (same directory, so ``os.replace`` is an atomic
    rename), made on entry so that an unwritable place fails before any work, and
    moved onto ``out`` only when the body completes; removed otherwise."""
    out = Path(out)
    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot create a file in {out.parent} "
                         f"({exc.strerror or exc})") from None
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)          # mkstemp's 0600 → an ordinary file's mode
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


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
    _check_paths(args)
    with _atomic_output(args.out) as tmp:
        _compute_surface(args, tmp)
    print(f"wrote {args.out}")


def _compute_surface(args, out):
    import bnlab
    from . import datasets, kernels
    data = datasets.read_csv(args.data, target=args.target, test_fraction=args.test_fraction,
                             seed=args.seed)
    lik = _likelihood(args.likelihood)
    kernel = kernels.KERNELS[args.kernel]()
    model = bnlab.GP(kernel, lik)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.mcmc and "mcmc" not in methods:
        methods.append("mcmc")
    has_test = len(data.y_test) > 0
    grid = args.grid
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
    surf.to_netcdf(out)
    per_n = surf.log_marginal_per_n
    for m in surf["scheme"].values:
        v = per_n.loc[{"scheme": m}]
        i, j = np.unravel_index(int(np.nanargmax(v.values)), v.shape)
        dims = v.dims
        print(f"{m:>8}: max log p(y|θ)/n = {float(v.values[i, j]):.4f} at "
              f"{dims[0]}={float(v[dims[0]][i]):.4g}, {dims[1]}={float(v[dims[1]][j]):.4g}")


def _reproduce(args):
    from .papers.li2023 import format_table, li2023
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


def _warmup_job_names():
    from .warmup import JOBS
    return list(JOBS)


def _warmup_jobs(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in _warmup_job_names()]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown job(s) {', '.join(unknown) or repr(text)}; choose among "
            f"{', '.join(_warmup_job_names())}")
    return names


def _warmup(args):
    from .warmup import warmup
    for name, done in warmup(args.only).items():
        print(f"{name}: {done['compiled']} programs compiled, {done['loaded']} loaded "
              f"from the cache, {done['seconds']:.1f} s")


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
    s.add_argument("--grid", action=_GridAxes, default=None, type=_grid_axis,
                   help="NAME=LO:HI:NUM in natural log (twice); default " + " ".join(DEFAULT_GRID))
    s.add_argument("--test-fraction", type=FRACTION, default=0.0,
                   help="share of the rows held out as a test set, in [0, 1)")
    s.add_argument("--damping", type=DAMPING, default=0.5, help="site damping ρ in (0, 1]")
    s.add_argument("--max-iters", type=_int_at_least(1), default=200)
    s.add_argument("--no-backtracking", action="store_true",
                   help="fixed-step VI (no halving of ρ when the ELBO falls)")
    s.add_argument("--no-acceleration", action="store_true",
                   help="the plain damped site iteration (no Anderson mixing)")
    s.add_argument("--temps", type=_int_at_least(1), default=1000, help="AIS temperatures")
    s.add_argument("--chains", type=_int_at_least(2), default=16,
                   help="AIS chains per grid point")
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--out", required=True, help="output netCDF file")
    s.add_argument("--store", default=None, metavar="PATH",
                   help="Zarr store of finished blocks: a rerun resumes from it")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler (e.g. tcp://host:8786): grid blocks run on its workers")
    s.set_defaults(run=_surface)
    r = sub.add_parser("reproduce", help="reproduce a paper's table")
    r.add_argument("paper", choices=("li2023",))
    r.add_argument("--dataset", default="breast_cancer")
    r.add_argument("--folds", type=_int_at_least(2), default=5)
    r.add_argument("--seeds", type=_int_at_least(1), default=10)
    r.add_argument("--methods", default="LA,EP,VI,Ours,EP_at_Ours",
                   help="comma-separated rows of the table")
    r.add_argument("--workers", type=_int_at_least(1), default=None,
                   help="train/test splits fitted at the same time (default: one per core)")
    r.set_defaults(run=_reproduce)
    w = sub.add_parser("warmup", help="compile the common programs into the persistent "
                       "compilation cache (run once after installing)")
    w.add_argument("--only", type=_warmup_jobs, default=None, metavar="JOB,...",
                   help="comma-separated jobs among " + ", ".join(_warmup_job_names()))
    w.set_defaults(run=_warmup)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "surface" and args.grid is None:
        args.grid = dict(_grid_axis(spec) for spec in DEFAULT_GRID)
    try:
        args.run(args)
    except ValueError as exc:
        print(f"bnlab: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
