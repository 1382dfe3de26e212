"""The MCMC reference's sandwich on the Surfaces tour's default grid: how many cells
bidirectional Monte Carlo resolves, and what the reverse pass costs.

    python benchmarks/mcmc.py [--temps 1000] [--chains 16] [--tolerance 0.05]
                              [--start ep prior] [--forward]

Problem: the Surfaces tour's (``bnlab.ui.tours.SURFACE``): classification_1d at the
lab's preset size, probit, Matérn-5/2; grid 7 × 7, σ² ∈ [0.3, 30] (rows) × ℓ ∈ [0.3, 5]
(columns), log-spaced. Prints, per schedule: the wall time of the MCMC layer
(``bnlab.surface(methods=["mcmc"])``, cache off, first call including compilation,
then a second timed call), the cells whose interval [lower − 2 se, upper + 2 se] is
wider than the tolerance, the gap's median and largest value, and the cells where
MCMC's bounds lie below VI's ELBO (the exact log p(y) never does). ``--forward``
also times forward AIS alone (the old reference; compiled first, then timed between
two bidirectional runs) for the ratio. ``--start``: where the annealing starts
(``bnlab.studies.ais_start``), each start's rows printed one after the other.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import bnlab  # noqa: E402
from bnlab.ui.problem import build_problem  # noqa: E402
from bnlab.ui.settings import LabSettings  # noqa: E402

GRID = {"variance": np.geomspace(0.3, 30.0, 7), "lengthscale": np.geomspace(0.3, 5.0, 7)}


def tour_problem():
    settings = LabSettings(dataset="classification_1d", likelihood="probit", kernel="matern52",
                           rho=0.5)
    return build_problem(settings)


def timed_surface(problem, methods, **mcmc):
    t = time.perf_counter()
    ds = bnlab.surface(problem.model, problem.X, problem.y, methods=methods, grid=GRID,
                       params=problem.params, mcmc_options=dict(mcmc, use_cache=False))
    return time.perf_counter() - t, ds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--temps", type=int, nargs="+", default=[1000])
    ap.add_argument("--chains", type=int, default=16)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--start", nargs="+", default=["ep", "prior"],
                    choices=["ep", "laplace", "prior"])
    ap.add_argument("--forward", action="store_true", help="also time forward AIS alone")
    args = ap.parse_args()
    problem = tour_problem()
    n = problem.X.shape[0]
    vi = bnlab.surface(problem.model, problem.X, problem.y, methods=["vi"], grid=GRID,
                       params=problem.params)
    elbo = vi.log_marginal.sel(scheme="vi").values
    vi_ok = vi.converged.sel(scheme="vi").values
    print(f"Surfaces tour: n = {n}, grid 7 × 7, {args.chains} chains, tolerance {args.tolerance}")
    for start, T in [(s, T) for s in args.start for T in args.temps]:
        opts = dict(num_temps=T, num_chains=args.chains, tolerance=args.tolerance, start=start)
        first, _ = timed_surface(problem, ["mcmc"], **opts)
        took, ds = timed_surface(problem, ["mcmc"], seed=1, **opts)
        lo, hi = ds.mcmc_lower.values, ds.mcmc_upper.values
        lo_se, hi_se = ds.mcmc_lower_se.values, ds.mcmc_upper_se.values
        unresolved = int((~ds.converged.sel(scheme="mcmc").values).sum())
        gap = hi - lo
        upper_below = int((vi_ok & (hi < elbo)).sum())
        upper_far_below = int((vi_ok & (hi + 3 * hi_se < elbo)).sum())
        lower_below = int((vi_ok & (lo < elbo)).sum())
        print(f"{start} start, T = {T:>5}: bidirectional {took:6.1f} s (first call {first:6.1f} s); "
              f"unresolved {unresolved} of 49; gap median {np.median(gap):.3f}, "
              f"largest {gap.max():.3f} nats; se median lower {np.median(lo_se):.3f} "
              f"upper {np.median(hi_se):.3f}; R̂ worst {np.nanmax(ds.mcmc_rhat.values):.3f}")
        print(f"          cells with upper < VI's ELBO: {upper_below} (by more than 3 se: "
              f"{upper_far_below}); lower < ELBO: {lower_below}")
        if args.forward:            # compiled first: the timed calls are alike
            timed_surface(problem, ["mcmc"], direction="forward", **opts)
            fwd, _ = timed_surface(problem, ["mcmc"], seed=1, direction="forward", **opts)
            again, _ = timed_surface(problem, ["mcmc"], seed=2, **opts)
            print(f"          forward AIS alone {fwd:6.1f} s, bidirectional again "
                  f"{again:6.1f} s: bidirectional / forward = {min(took, again) / fwd:.2f}")


if __name__ == "__main__":
    main()
