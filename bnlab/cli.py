"""The ``bnlab`` command line.

    bnlab surface --data FILE.csv --likelihood probit --methods ep,vi,ep_like --mcmc \\
                  --out surface.nc
    bnlab reproduce li2023 --dataset breast_cancer [--folds 5 --seeds 10 --workers 2]
    bnlab cache verify|clear
    bnlab warmup [--only lab,readme]

Grid axes are given as NAME=LO:HI:NUM in natural-log space (default: the Li et al.
2023 Fig. 2 grid, log ℓ ∈ [−1, 5] and log σ ∈ [−1, 5], i.e. log σ² ∈ [−2, 10], 21 × 21).

Every numeric option is checked by argparse (an error naming the option; AIS temperatures,
chains and grid sizes bounded as the lab bounds them), ``--data`` is read up to
``--max-bytes``, the surface's work and memory are estimated before it runs
(``bnlab.studies.work_limits``, ``--max-work``), and the paths are checked before any
work: the output's directory must exist and take a file, the output, the input and the
store must be distinct, and the output is written to a temporary file beside it that
replaces it only once complete, so a failed or interrupted run (Ctrl-C: one line, the
store kept for a rerun to resume) leaves no partial file and no lost input.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from .studies.work_limits import MAX_AXIS_POINTS, MAX_CHAINS, MAX_TEMPS
from .studies.ais_start import STARTS

#: the most bytes ``--data`` reads by default: the lab's upload limit
#: (``bnlab.ui.problem.MAX_UPLOAD_BYTES``)
MAX_DATA_BYTES = 8 * 2**20
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


def _int_between(lo, hi, why):
    return _checked(int, lambda v: lo <= v <= hi, f"an integer from {lo} to {hi} ({why})")


def _positive_number(text):
    return _checked(float, lambda v: v > 0, "a positive number")(text)


FRACTION = _checked(float, lambda v: 0 <= v < 1, "a fraction in [0, 1)")
DAMPING = _checked(float, lambda v: 0 < v <= 1, "in (0, 1]")
SEED = _checked(int, lambda v: 0 <= v < 2**32, "an integer in [0, 2**32)")
TOLERANCE = _checked(float, lambda v: 0 < v < float("inf"), "a positive number")
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
    if not (abs(lo) <= LOG_RANGE and abs(hi) <= LOG_RANGE) or not 1 <= num <= MAX_AXIS_POINTS:
        raise argparse.ArgumentTypeError(
            f"bad --grid {spec!r}; LO and HI must be natural logs within ±{LOG_RANGE:g} (so "
            f"that e^LO and e^HI are positive finite values) and NUM from 1 to "
            f"{MAX_AXIS_POINTS} (the lab's largest grid)")
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


def _same_or_inside(a: Path, b: Path) -> bool:
    """Whether path ``a`` is ``b`` (any spelling, links included) or lies inside it."""
    a, b = a.resolve(), b.resolve()
    if a == b or b in a.parents:
        return True
    return a.exists() and b.exists() and os.path.samefile(a, b)


def _check_paths(args):
    """The paths' errors, before any work: the output's missing directory, a directory
    as the file, the input itself (which would be replaced by netCDF); a store that is
    the input or the output, holds them, or has no directory to be made in."""
    out, data = Path(args.out), Path(args.data)
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: the directory {out.parent} does not exist")
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give a file name")
    if _same_or_inside(out, data):
        raise ValueError(f"--out {out} is the input --data file; choose another output path")
    if args.store is None:
        return
    store = Path(args.store)
    for name, path in (("--out", out), ("--data", data)):
        if _same_or_inside(path, store) or _same_or_inside(store, path):
            raise ValueError(f"--store {store} and {name} {path} are the same path or one "
                             f"holds the other; give the store a path of its own")
    if not store.parent.is_dir():
        raise ValueError(f"--store {store}: the directory {store.parent} does not exist")


def _read_data(path, max_bytes) -> bytes:
    """The bytes of ``--data``, reading at most ``max_bytes`` + 1 (an endless device such
    as /dev/zero, or a file larger than the limit, stops there with an error)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"could not read the CSV file {str(path)!r}: "
                         f"{exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise ValueError(f"--data {path} is larger than {max_bytes} bytes (--max-bytes; the "
                         f"lab's upload limit by default); pass a larger --max-bytes to read it")
    return raw


def _temporary_prefix(out: Path, pid: int) -> str:
    return f".{out.name}.{pid}."


def _remove_stale_temporaries(out: Path):
    """Remove the temporary files that killed runs left beside ``out``: each is named
    after its run's process (``_temporary_prefix``), and one whose process is gone is
    left over (a running one's is kept)."""
    for tmp in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):
        pid = tmp.name[len(out.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):     # no such process; no such process id
        return False
    except OSError:            # someone else's process: alive
        return True
    return True


@contextlib.contextmanager
def _atomic_output(out):
    """A temporary file beside ``out`` (same directory, so ``os.replace`` is an atomic
    rename), made on entry so that an unwritable place fails before any work, and
    moved onto ``out`` only when the body completes; removed otherwise (an exception,
    Ctrl-C). A kill -9 leaves it behind: the next run into that directory removes it."""
    out = Path(out)
    _remove_stale_temporaries(out)
    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=_temporary_prefix(out, os.getpid()),
                                   suffix=".tmp")
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
    data = datasets.from_csv_bytes(_read_data(args.data, args.max_bytes), target=args.target,
                                   test_fraction=args.test_fraction, seed=args.seed)
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
                             client=client, store=args.store, max_work=args.max_work,
                             mcmc_options={"num_temps": args.temps, "num_chains": args.chains,
                                           "seed": args.seed, "tolerance": args.mcmc_tolerance,
                                           "start": args.mcmc_start})
    finally:
        bar.close()
        if client is not None:
            client.close()
    surf.to_netcdf(out)
    _print_maxima(surf)


def _print_maxima(surf):
    """Each method's largest log p(y|θ)/n over the cells where it has a finite value and
    did not diverge (a diverged cell holds its last valid iterate's energy, not an
    answer), or a line saying there is none."""
    per_n = surf.log_marginal_per_n
    for m in surf["scheme"].values:
        v = per_n.loc[{"scheme": m}]
        values = np.where(np.isfinite(v.values) & ~surf.diverged.loc[{"scheme": m}].values,
                          v.values, -np.inf)
        if not np.isfinite(values).any():
            print(f"{m:>8}: no finite value where it did not diverge")
            continue
        i, j = np.unravel_index(int(np.argmax(values)), v.shape)
        dims = v.dims
        print(f"{m:>8}: max log p(y|θ)/n = {float(v.values[i, j]):.4f} at "
              f"{dims[0]}={float(v[dims[0]][i]):.4g}, {dims[1]}={float(v[dims[1]][j]):.4g}")
    if "mcmc_gap" in surf:
        print(_mcmc_line(surf))


def _mcmc_line(surf) -> str:
    """BDMC's verdict over the grid: the gap between reverse and forward AIS (nats) and
    the cells whose interval is not narrower than the tolerance."""
    gap = surf["mcmc_gap"].values
    ok = np.isfinite(gap)
    resolved = surf["converged"].sel(scheme="mcmc").values
    if not ok.any():
        return "    mcmc: no bounds (cancelled)"
    return (f"    mcmc: bounds in mcmc_lower/mcmc_upper; gap upper − lower median "
            f"{np.median(gap[ok]):.3f}, largest {gap[ok].max():.3f} nats; "
            f"{int(ok.sum() - resolved[ok].sum())} of {int(ok.sum())} cells not resolved "
            f"(interval wider than {surf.attrs['mcmc_tolerance']:g} nats)")


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


def _cache(args):
    """``bnlab cache verify``: every entry checked against its checksum (exit 1 if any is
    damaged); ``bnlab cache clear``: every entry removed."""
    from ._runtime import disk_cache
    where = disk_cache.cache_dir()
    if args.action == "clear":
        print(f"removed {disk_cache.clear()} cache entries from {where}")
        return 0
    report = disk_cache.verify()
    for path, why in report["damaged"]:
        print(f"damaged: {path} ({why})")
    print(f"{len(report['ok'])} entries verified, {len(report['damaged'])} damaged, in {where}"
          + (" (rerunning recomputes them; bnlab cache clear removes them)"
             if report["damaged"] else ""))
    return 1 if report["damaged"] else 0


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
    s.add_argument("--temps", type=_int_between(1, MAX_TEMPS, "the lab's longest schedule"),
                   default=1000, help="AIS temperatures")
    s.add_argument("--chains", type=_int_between(2, MAX_CHAINS, "as many as the lab's"),
                   default=16, help="AIS chains per grid point")
    s.add_argument("--max-work", type=_positive_number, default=None,
                   help="the most work allowed, in n³ units (default: about an hour on a "
                        "2-core CPU; bnlab.studies.work_limits)")
    s.add_argument("--max-bytes", type=_int_at_least(1), default=MAX_DATA_BYTES,
                   help=f"the most bytes read from --data (default {MAX_DATA_BYTES}, the lab's "
                        f"upload limit)")
    s.add_argument("--mcmc-tolerance", type=TOLERANCE, default=0.05,
                   help="nats: a cell's MCMC interval [lower − 2se, upper + 2se] narrower "
                   "than this is resolved")
    s.add_argument("--mcmc-start", choices=STARTS, default="ep", help="AIS anneals from EP's "
                   "posterior (Laplace's where EP does not converge), Laplace's or the prior")
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
    c = sub.add_parser("cache", help="check or empty the disk cache of MCMC results and "
                       "stored programs ($BNLAB_CACHE_DIR, default ~/.cache/bnlab)")
    c.add_argument("action", choices=("verify", "clear"))
    c.set_defaults(run=_cache)
    w = sub.add_parser("warmup", help="compile the common programs into the persistent "
                       "compilation cache (run once after installing)")
    w.add_argument("--only", type=_warmup_jobs, default=None, metavar="JOB,...",
                   help="comma-separated jobs among " + ", ".join(_warmup_job_names()))
    w.set_defaults(run=_warmup)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    from . import configure
    configure()            # float64, one OpenBLAS thread, the persistent compilation cache
    if args.command == "surface" and args.grid is None:
        args.grid = dict(_grid_axis(spec) for spec in DEFAULT_GRID)
    try:
        return args.run(args) or 0
    except ValueError as exc:
        print(f"bnlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        resume = (f"; rerun the same command to resume from --store {args.store}"
                  if getattr(args, "store", None) else "")
        print(f"bnlab: interrupted, nothing written{resume}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
