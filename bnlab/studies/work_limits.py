"""The size of a surface, estimated before any of it runs, against a work limit and the
free memory: a request for hours of computing or for more memory than the machine has
is an error that says so, not a run that never returns or dies half way.

Work is counted in units of one n³ operation of dense linear algebra (a Cholesky factor
of an n × n matrix is n³/3 of them). At each grid point a site method or G-KL costs at
most its iteration cap times (n³ + ``ITERATION_OVERHEAD``) — every iteration factors
the n × n posterior once, and at small n a fixed cost per iteration (compiled-program
dispatch, cubature over the sites) dominates; AIS costs ``AIS_MOVE_COST`` ×
temperatures × chains × steps × (n² + ``AIS_MOVE_OVERHEAD``): every move of every chain
draws from its start's Gaussian (an n² product with its factor) and shrinks its ellipse
a few times, plus the runs that find its start (``START_MAX_ITERS`` iterations of EP,
then of Laplace where EP does not converge; ``ais_start``) and a few n³ set-ups. All are
upper bounds (a converged point stops long before its cap); with warm starts a site
method counts twice its cap per point, since a warm run that stalls at its cap or
diverges is redone cold (``surfaces.site_runs``, ``surfaces.batched``), and which points
will is not known before they run.

``SECONDS_PER_UNIT``, ``ITERATION_OVERHEAD``, ``AIS_MOVE_COST`` and
``AIS_MOVE_OVERHEAD`` are calibrated on a 2-core CPU in float64 (the timings behind
them: benchmarks/README.md, "Work limits"), so that ``MAX_WORK`` is about an hour on
such a machine. ``max_work=`` (``bnlab surface --max-work``) raises it.

Memory: the arrays a surface keeps for every grid point (its converged sites, one
n × D block and one n × D × D block per site-method run, for warm starts; each
method's results) and, for the points in flight, ``MATRICES_IN_FLIGHT`` n × n matrices
each (AIS: its prior factor and the chains' state per vmapped point) must fit in the
memory the system reports available (``psutil.virtual_memory().available``); there is
no override, since beyond it the run would fail or swap.

The command line bounds single settings as the lab's controls do:
``MAX_TEMPS`` AIS temperatures per grid point (the lab's longest MCMC schedule),
``MAX_CHAINS`` chains (its MCMC reference's), ``MAX_AXIS_POINTS`` values per grid axis
(its surface page's).
"""
from __future__ import annotations

import math
import os

from ..checks import real_number
from ..methods.registry import REGISTRY

__all__ = ["MAX_WORK", "check_surface_size", "check_ais_memory", "surface_work",
           "surface_memory", "ais_memory"]

#: seconds per unit of work on the calibration machine
SECONDS_PER_UNIT = 5e-11
MAX_WORK = 3600 / SECONDS_PER_UNIT
ITERATION_OVERHEAD = 4e6
AIS_MOVE_COST = 20
AIS_MOVE_OVERHEAD = 1e4
MATRICES_IN_FLIGHT = 8
#: the AIS points vmapped together (``mcmc.ais_grid``'s default chunk)
AIS_CHUNK = 7
#: the iteration cap of each run that finds AIS's start (``ais_start.start_sites``)
START_MAX_ITERS = 200
MAX_TEMPS = 16_000
MAX_CHAINS = 256
MAX_AXIS_POINTS = 41

_AIS_DEFAULTS = {"num_temps": 1000, "num_chains": 16, "steps_per_temp": 1}


def _ais_settings(mcmc_options):
    opts = dict(_AIS_DEFAULTS)
    opts.update({k: v for k, v in (mcmc_options or {}).items() if k in _AIS_DEFAULTS})
    return opts


def surface_work(n, points, methods, max_iters, mcmc_options=None,
                 warm_start=False) -> dict[str, float]:
    """{method: its work in n³ units} over ``points`` grid points; ``max_iters``:
    {method: iteration cap} for every method but 'mcmc'; ``warm_start``: the site
    methods' points may each run a warm and a cold attempt."""
    work = {}
    for m in methods:
        if m == "mcmc":
            a = _ais_settings(mcmc_options)
            moves = a["num_temps"] * a["num_chains"] * a["steps_per_temp"]
            start = 2 * START_MAX_ITERS * (n**3 + ITERATION_OVERHEAD)
            work[m] = points * (AIS_MOVE_COST * moves * (n**2 + AIS_MOVE_OVERHEAD) + 4 * n**3
                                + start)
        else:
            attempts = 2 if warm_start and m in REGISTRY else 1
            work[m] = points * attempts * max_iters[m] * (n**3 + ITERATION_OVERHEAD)
    return work


def ais_memory(latent_values, num_temps, num_chains, chunk=AIS_CHUNK) -> float:
    """Bytes AIS holds for ``chunk`` grid points vmapped together: per point its prior
    covariance and factor, its start's B = I + LᵀWL, B's factor and the start's
    covariance factor (``ais_start.site_start``), the chains' states and the temperature
    schedule."""
    return chunk * 8 * (5 * latent_values**2 + 4 * num_chains * latent_values + 2 * num_temps)


def surface_memory(n, latents, points, methods, in_flight, mcmc_options=None) -> float:
    """Bytes a surface holds at once (see the module's docstring)."""
    D = latents
    site_methods = [m for m in methods if m in REGISTRY]
    per_point = 8 * (2 + 8 * len(methods)) + 8 * len(site_methods) * n * D * (1 + D)
    memory = points * per_point + in_flight * MATRICES_IN_FLIGHT * 8 * (n * D) ** 2
    if "mcmc" in methods:
        a = _ais_settings(mcmc_options)
        memory += ais_memory(n * D, a["num_temps"], a["num_chains"])
    return memory


def available_memory() -> float:
    import psutil
    return float(psutil.virtual_memory().available)


def check_max_work(max_work) -> float:
    """``max_work`` (None: ``MAX_WORK``) as a positive number (``math.inf``: no limit)."""
    if max_work is None:
        return MAX_WORK
    value = real_number("max_work", max_work)
    if not value > 0:
        raise ValueError(f"max_work must be a positive number of n³ units, got {max_work!r}")
    return value


def check_surface_size(n, latents, points, methods, max_iters, mcmc_options=None,
                       max_work=None, in_flight=None, warm_start=False) -> float:
    """Refuse a surface above the work limit or the available memory, before any work,
    with an error stating the estimate and how to change it; returns the work estimate.
    ``in_flight``: grid points solved at once in this process (default: one per core);
    ``warm_start``: as ``surface_work``."""
    limit = check_max_work(max_work)
    work = surface_work(n, points, methods, max_iters, mcmc_options, warm_start)
    total = sum(work.values())
    if total > limit:
        parts = ", ".join(f"{m} {w:.2g}" for m, w in work.items())
        raise ValueError(
            f"this surface asks for up to {total:.3g} units of work ({points} grid points at "
            f"n = {n}: {parts}; one unit ≈ one n³ step of linear algebra, counted to each "
            f"method's iteration cap (twice with warm starts: a stalled warm run is redone "
            f"cold) and AIS's temperatures × chains), about "
            f"{_duration(total)} on a 2-core CPU; the limit is {limit:.3g} (default: "
            f"bnlab.studies.work_limits.MAX_WORK, about an hour there). Use a coarser grid, "
            f"fewer methods, a lower max_iters or fewer AIS temperatures or chains, or raise "
            f"the limit with max_work={_round_up(total)} (bnlab surface --max-work "
            f"{_round_up(total)})")
    in_flight = in_flight if in_flight is not None else (os.cpu_count() or 1)
    need = surface_memory(n, latents, points, methods, in_flight, mcmc_options)
    free = available_memory()
    if need > free:
        raise ValueError(
            f"this surface needs about {need / 2**30:.3g} GiB of memory ({points} grid "
            f"points at n = {n}: each point's sites and results, and n × n matrices for the "
            f"points in flight), more than the {free / 2**30:.3g} GiB available; use a "
            f"coarser grid or fewer data points")
    return total


def check_ais_memory(latent_values, num_temps, num_chains, chunk) -> None:
    """Refuse AIS settings whose arrays exceed the available memory (``ais_memory``),
    before any work: a direct ``mcmc.ais`` call has no other bound on its schedule."""
    need, free = ais_memory(latent_values, num_temps, num_chains, chunk), available_memory()
    if need > free:
        raise ValueError(
            f"AIS with num_temps={num_temps} and num_chains={num_chains} over {chunk} grid "
            f"point(s) at once needs about {need / 2**30:.3g} GiB of memory, more than the "
            f"{free / 2**30:.3g} GiB available; use fewer temperatures (the lab's longest "
            f"schedule is {MAX_TEMPS}) or chains")


def _round_up(work) -> str:
    """A short number at least ``work`` (for the error's suggestion)."""
    exponent = math.floor(math.log10(work))
    return f"{math.ceil(work / 10**exponent)}e{exponent}"


def _duration(work) -> str:
    seconds = work * SECONDS_PER_UNIT
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"
