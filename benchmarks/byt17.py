"""BYT17 §4.1 sweep over the number of pseudo-points: test SMSE of collapsed Power EP
at α ∈ {0 (VFE), 0.5, 0.8, 1 (FITC/EP)} on synthetic 5-D ARD-SE GP draws (N = 1000,
500/500 split), hyperparameters and Z fitted by L-BFGS on the PEP energy
(``bnlab.papers.bui2017``). The paper (Fig. 3) averages 30 draws per M and finds α ∈ [0.5, 0.8]
best *on average*; this prints, per M, the mean SMSE per α and the fraction of draws in
which α = 0.5 beats both VFE and EP.

    python benchmarks/byt17.py [--draws 10] [--inducing 5 10 25 50 100] [--max-evals 1000]
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bnlab.papers.bui2017 import experiment  # noqa: E402

ALPHAS = (0.0, 0.5, 0.8, 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--inducing", type=int, nargs="+", default=[5, 10, 25, 50, 100])
    ap.add_argument("--max-evals", type=int, default=1000)
    args = ap.parse_args()
    print(f"BYT17 §4.1: {args.draws} draws per M, N = 1000 (500 train), L-BFGS ≤ "
          f"{args.max_evals} evaluations; test SMSE")
    print(f"{'M':>4} " + " ".join(f"{'α=' + str(a):>9}" for a in ALPHAS)
          + "   α=0.5 beats both   best mean α   seconds", flush=True)
    all_rows = []
    for M in args.inducing:
        t = time.perf_counter()
        smse = experiment(range(args.draws), n=1000, num_inducing=M, max_evals=args.max_evals,
                          alphas=ALPHAS)
        all_rows.append(smse)
        mean = smse.mean(0)
        half, vfe, ep = smse[:, 1], smse[:, 0], smse[:, 3]
        wins = np.mean((half < vfe) & (half < ep))
        print(f"{M:>4} " + " ".join(f"{m:>9.4f}" for m in mean)
              + f"   {wins:>16.2f}   {ALPHAS[int(np.argmin(mean))]:>11}   {time.perf_counter() - t:7.0f}",
              flush=True)
    smse = np.concatenate(all_rows)
    half, vfe, ep = smse[:, 1], smse[:, 0], smse[:, 3]
    print(f"all M: α = 0.5 beats VFE in {np.mean(half < vfe):.2f}, EP in {np.mean(half < ep):.2f}, "
          f"both in {np.mean((half < vfe) & (half < ep)):.2f} of {len(smse)} runs")


if __name__ == "__main__":
    main()
