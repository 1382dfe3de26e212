"""Tour steps: how long each step of a tour takes until its picture is the one its text
describes, on a warm lab (engines compiled, the MCMC reference in the disk cache).

    python benchmarks/tour_steps.py [--tour alpha]

A step's run is solved to its stop (``LiveView.solve``); the baseline printed beside it
is what the same step cost when it replayed its run at the lab's default speed
(iterations ÷ 10 per second), the animation a teacher used to wait through. The floor
is the same run alone, a fresh ``Runner`` stepped to its stop in the same process.
"""
from __future__ import annotations

import argparse
import time

from bnlab.ui.app import Lab
from bnlab.ui.compare_model import converge
from bnlab.ui.problem import build_problem
from bnlab.ui.settings import LabSettings
from bnlab.ui.tours import TOURS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tour", default="alpha", choices=sorted(TOURS))
    args = ap.parse_args()
    tour = TOURS[args.tour]
    lab = Lab()
    lab.tour.open(tour.key)                       # warm: compiles, fills the MCMC cache
    for k in range(len(tour.steps)):
        lab.tour.go(k)
    print(f"{tour.key} tour, warm lab: seconds until each step shows its picture")
    print(f"{'step':>4} {'tab':>8} {'shown (s)':>10} {'solve alone (s)':>15} {'iterations':>10} "
          f"{'replay at 10/s (s)':>19}")
    for k, step in enumerate(tour.steps):
        lab.tour.go(0 if k else 1)
        start = time.perf_counter()
        lab.tour.go(k)
        shown = time.perf_counter() - start
        engine = iterations = replay = float("nan")
        if "run" in step.actions:
            s = LabSettings(**tour.settings(k))
            t = time.perf_counter()
            converge(build_problem(s), s.method, s, max_iters=s.max_iters)
            engine = time.perf_counter() - t
            iterations = lab.live.runner.iteration
            replay = iterations / s.speed
        print(f"{k + 1:>4} {step.tab:>8} {shown:>10.2f} {engine:>15.2f} {iterations:>10} "
              f"{replay:>19.1f}")


if __name__ == "__main__":
    main()
