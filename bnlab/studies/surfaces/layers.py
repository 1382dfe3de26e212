"""A surface's other layers: a direct family (G-KL) at every grid point, the MCMC
reference (BDMC, ``bnlab.studies.mcmc``), and the Dataset the layers are gathered in."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from ..._runtime import exported
from ..._runtime.compiled import CompiledCache
from ...infer import infer
from .axes import point_params
from .blocks import is_cancelled

__all__ = ["run_direct", "run_mcmc", "gather"]

_DIRECT = CompiledCache(maxsize=8)


def _direct_bound(record, model, names, max_iters, tol, cubature, options):
    """bound(thetas (R, 2), base, X, y) → (R,): the record's pure ``bound_at_optimum``
    at each θ under ``lax.map``, jitted once per key and models with the same structure
    key (every number is an argument), and called through its stored ``jax.export``
    (``bnlab._runtime.exported``: the key describes the program completely, so a new
    process neither traces nor lowers it)."""
    key = ("direct", record.name, model.structure_key(), names, max_iters, tol, cubature,
           options)

    def build():
        def bound(thetas, base, X, y):
            return jax.lax.map(lambda t: record.bound_at_optimum(
                point_params(base, names, t), X, y, model=model, max_iters=max_iters,
                tol=tol, cubature=cubature, **dict(options)), thetas)
        return jax.jit(bound)

    jitted = _DIRECT.get(key, build)
    return lambda *args: exported.call(jitted, key, args)


def run_direct(record, model, X, y, test, base, names, thetas, r, options, max_iters, tol,
               cubature, cancel, report):
    """A family that optimises q directly (``bnlab.methods.DirectMethod``, G-KL) at every
    grid point, into ``r`` (the method's arrays of ``surface._empty``); True if cancelled.
    Without a ``test`` set (X_test, y_test) the energy comes from the record's pure
    ``bound_at_optimum`` under ``lax.map`` (one grid row per call); with one, or with
    options the pure form does not take, each point is a ``bnlab.infer`` call in a loop
    (compiled once): the predictive needs the optimised q."""
    if test is None and set(options) <= set(record.bound_options):
        bound = _direct_bound(record, model, names, int(max_iters), float(tol),
                              tuple(cubature), tuple(sorted(options.items())))
        row = thetas.shape[0] // np.unique(thetas[:, 0]).size      # one grid row
        for start in range(0, thetas.shape[0], row):
            if is_cancelled(cancel):
                return True
            idx = np.arange(start, min(start + row, thetas.shape[0]))
            r["log_marginal"][idx] = np.asarray(bound(jnp.asarray(thetas[idx]), base, X, y))
            ok = np.isfinite(r["log_marginal"][idx])
            r["converged"][idx], r["psd"][idx], r["diverged"][idx] = ok, ok, ~ok
            report(idx.size)
        return False
    for i, theta in enumerate(thetas):
        if is_cancelled(cancel):
            return True
        params = point_params(base, names, jnp.asarray(theta))
        res = infer(model, X, y, method=record.name, params=params, max_iters=max_iters,
                    tol=tol, cubature=cubature, **options)
        r["log_marginal"][i] = res.log_marginal
        r["iterations"][i], r["converged"][i] = res.n_iters, res.converged
        r["diverged"][i], r["psd"][i] = res.diverged, not res.diverged
        if test is not None:
            r["log_predictive"][i] = res.log_predictive(*test)
        report()
    return False


def run_mcmc(model, X, y, Xs, ys, base, names, thetas, results, cancel, report, options):
    """BDMC at every grid point (``bnlab.studies.mcmc.ais_grid``): the 'mcmc' scheme's
    log_marginal is forward AIS's estimate (a stochastic lower bound), and its bounds,
    standard errors and chain diagnostics become the ``mcmc_*`` variables (``gather``).
    'converged' marks the cells whose interval is narrower than ``tolerance`` (an
    option here, ``mcmc.GAP_TOLERANCE`` by default); with ``max_temps`` (and
    ``max_seconds``) the unresolved cells are rerun with longer schedules
    (``mcmc.bdmc_grid``), and 'iterations' holds each cell's last schedule."""
    from ..mcmc import GAP_TOLERANCE, ais_grid, bdmc_grid
    options = dict(options)
    tolerance = options.pop("tolerance", GAP_TOLERANCE)
    thetas = [point_params(base, names, jnp.asarray(t)) for t in thetas]
    if options.get("direction", "bidirectional") == "forward":
        out, cancelled = ais_grid(model, X, y, thetas, X_test=Xs, y_test=ys,
                                  cancel=lambda: is_cancelled(cancel), progress=report, **options)
    else:
        out, cancelled = bdmc_grid(model, X, y, thetas, X_test=Xs, y_test=ys,
                                   tolerance=tolerance, cancel=lambda: is_cancelled(cancel),
                                   progress=report, **options)
    r = results["mcmc"]
    r["log_marginal"][:] = out["log_z"]
    r["log_marginal_se"][:] = out["log_z_se"]
    r["log_predictive"][:] = out["lpd"]
    width = (out["log_z_upper"] + 2 * out["log_z_upper_se"]) - (out["log_z"] - 2 * out["log_z_se"])
    r["converged"][:] = np.isfinite(width) & (width < tolerance)
    r["psd"][:] = np.isfinite(out["log_z"])
    r["iterations"][:] = out["num_temps"]
    r["bounds"] = {"mcmc_lower": out["log_z"], "mcmc_upper": out["log_z_upper"],
                   "mcmc_lower_se": out["log_z_se"], "mcmc_upper_se": out["log_z_upper_se"],
                   "mcmc_rhat": out["rhat"], "mcmc_bulk_ess": out["bulk_ess"]}
    r["tolerance"] = float(tolerance)
    return cancelled


def gather(results, methods, axes, shape, N, with_test, cancelled, warm_start, model):
    dims = ("scheme", axes[0][0], axes[1][0])
    coords = {"scheme": methods, axes[0][0]: axes[0][1], axes[1][0]: axes[1][1]}

    def stack(key):
        return np.stack([results[m][key].reshape(shape) for m in methods])

    lml = stack("log_marginal")
    data = {"log_marginal": (dims, lml), "log_marginal_per_n": (dims, lml / N),
            "converged": (dims, stack("converged")), "diverged": (dims, stack("diverged")),
            "psd": (dims, stack("psd")), "iterations": (dims, stack("iterations"))}
    if "mcmc" in methods:
        data["log_marginal_se"] = (dims, stack("log_marginal_se"))
        # BDMC's bounds per cell (``run_mcmc``); NaN where AIS did not run (cancelled)
        bounds = results["mcmc"].get("bounds", {})
        for name in ("mcmc_lower", "mcmc_upper", "mcmc_lower_se", "mcmc_upper_se",
                     "mcmc_rhat", "mcmc_bulk_ess"):
            data[name] = (dims[1:], bounds.get(name, np.full(shape, np.nan)).reshape(shape))
        data["mcmc_gap"] = (dims[1:], data["mcmc_upper"][1] - data["mcmc_lower"][1])
    if with_test:
        data["log_predictive"] = (dims, stack("log_predictive"))
    attrs = {"n_train": int(N), "cancelled": int(cancelled), "warm_start": int(warm_start),
             "model": repr(model)}
    if "mcmc" in methods:
        from ..mcmc import GAP_TOLERANCE
        attrs["mcmc_tolerance"] = results["mcmc"].get("tolerance", GAP_TOLERANCE)
    return xr.Dataset(data, coords=coords, attrs=attrs)
