"""``bnlab warmup``: compile the common programs once, into the persistent cache.

JAX compiles each engine the first time a process runs it; with the persistent
compilation cache (``bnlab._runtime.xla_cache``) a later process loads it from disk in
milliseconds instead. Run once after installing, this fills the cache with what a new
user meets first, so that their first script and their first page find the programs
compiled. Each job does the real work it warms (compiled programs are keyed by shapes
and settings, so only the same work finds them):

- ``lab``: the lab's opening page (the Live page's first run and plots);
- ``lab-presets``: the Live page's opening run on each other preset data set;
- ``lab-surface``: the Surfaces page's default surface on the opening data;
- ``readme``: the README's example (EP with α = 0.5 on breast cancer, its predictions).
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

__all__ = ["JOBS", "warmup"]


class Job(NamedTuple):
    name: str
    what: str
    run: Callable[[], None]


def _opening_lab():
    from .ui.app import Lab
    lab = Lab()
    lab.start()
    return lab


def _lab():
    _opening_lab()


def _lab_presets():
    from .ui.catalog import DATASETS
    lab = _opening_lab()
    opening = lab.settings.dataset
    for name in DATASETS:
        if name not in (opening, "csv"):     # a data set change rebuilds the Live run
            lab.settings.dataset = name
            if lab.live.runner is None:
                raise RuntimeError(f"the lab built no run for the data set {name!r}: "
                                   f"{lab.status.errors}")


def _lab_surface():
    lab = _opening_lab()
    lab.surfaces.compute()
    if lab.surfaces.dataset is None:
        raise RuntimeError(f"the Surfaces page computed nothing: "
                           f"{lab.surfaces.message.object}")


def _readme():
    import bnlab
    ds = bnlab.datasets.load("breast_cancer")
    model = bnlab.GP(kernel=bnlab.kernels.Matern52(lengthscale=2.0, variance=1.0),
                     likelihood=bnlab.likelihoods.Bernoulli(link="probit"))
    res = bnlab.infer(model, ds.X, ds.y, method="pep", alpha=0.5, damping=0.5)
    res.predict(ds.X_test)
    res.log_predictive(ds.X_test, ds.y_test)


#: every job, in the order they run
JOBS = {job.name: job for job in (
    Job("lab", "the lab's opening page", _lab),
    Job("lab-presets", "the lab's Live run on each preset data set", _lab_presets),
    Job("lab-surface", "the lab's default surface (4 methods, 11 × 11)", _lab_surface),
    Job("readme", "the README's example", _readme),
)}


def warmup(names=None, *, out=None) -> dict:
    """Run the named jobs (all by default) with a progress bar on ``out`` (stderr by
    default); returns, per job, the programs compiled and loaded and its seconds.
    Raises ValueError naming an unknown job, or when the persistent cache is off (the
    work would be lost with the process)."""
    import jax
    from tqdm import tqdm

    from ._runtime.compile_log import CompileLog
    names = list(JOBS) if names is None else list(names)
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        raise ValueError(f"unknown warmup job(s) {', '.join(unknown)}; "
                         f"choose among {', '.join(JOBS)}")
    import bnlab
    bnlab.configure()                       # turns the persistent cache on
    if not jax.config.jax_compilation_cache_dir:
        raise ValueError("the persistent compilation cache is off (BNLAB_XLA_CACHE=0?): "
                           "warming up would compile programs no later process can load")
    # every program, even where a directory chosen for JAX kept JAX's thresholds
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    report = {}
    with tqdm(total=len(names), desc="bnlab warmup", unit="job", file=out) as bar:
        for name in names:
            bar.set_postfix_str(JOBS[name].what)
            start = time.perf_counter()
            with CompileLog() as log:
                JOBS[name].run()
            report[name] = {"compiled": len(log.compiled), "loaded": len(log.loaded),
                            "seconds": time.perf_counter() - start}
            bar.update()
    return report
