"""What a surface's MCMC layer settles, as lines of HTML for the Surfaces page
(numbers only): where bidirectional Monte Carlo's interval for log p(y) is too wide to
resolve the methods' differences, and what its standard errors resolve."""
from __future__ import annotations

import numpy as np

from bnlab.methods import REGISTRY

from . import markup


def mcmc_note(ds, remedy: str = "") -> str:
    """What the MCMC surface can settle (HTML, numbers only): the cells where BDMC's
    interval is too wide (``interval_note``), then its standard errors and the cells
    below VI's bound (``standard_error_note``)."""
    return "<br>".join(t for t in (interval_note(ds, remedy), standard_error_note(ds, remedy)) if t)


def elbo(ds):
    """The highest converged ELBO per cell (axis0 × axis1, NaN where there is none) among
    the surface's schemes that report one, a lower bound on log p(y) whatever q is: those
    whose record's energy is the ELBO ('vfe': VI and its variants; the page runs each
    method with its default options, so its record's energy is the one reported). None
    for a surface without one."""
    schemes = [m for m in map(str, ds["scheme"].values)
               if m in REGISTRY and REGISTRY[m].energy == "vfe"]
    if not schemes:
        return None
    values = [np.where(ds["converged"].sel(scheme=m).values.astype(bool),
                       ds["log_marginal"].sel(scheme=m).values.astype(float), np.nan)
              for m in schemes]
    return np.fmax.reduce(values, axis=0)


def unsettled_cells(ds):
    """The grid cells (axis0 × axis1, bool) where MCMC's interval for log p(y)
    ([forward − 2 se, reverse + 2 se]) is wider than the surface's tolerance and than the
    spread of the approximations' values there, so it cannot order them: the Surfaces
    page greys these on the MCMC panel and draws the MCMC contour only elsewhere. None
    for a surface without bounds."""
    methods = [str(m) for m in ds["scheme"].values]
    if "mcmc_upper" not in ds or "mcmc" not in methods:
        return None
    lo, hi = ds["mcmc_lower"].values, ds["mcmc_upper"].values
    lo_se = ds["mcmc_lower_se"].values if "mcmc_lower_se" in ds else 0.0
    hi_se = ds["mcmc_upper_se"].values if "mcmc_upper_se" in ds else 0.0
    width = (hi + 2 * hi_se) - (lo - 2 * lo_se)
    others = [k for k, m in enumerate(methods) if m != "mcmc"]
    values = np.array(ds["log_marginal"].values[others], dtype=float)
    if "diverged" in ds:
        values[ds["diverged"].values[others].astype(bool)] = np.nan
    with np.errstate(all="ignore"):
        finite = np.isfinite(values)
        spread = (np.where(finite, values, -np.inf).max(0)
                  - np.where(finite, values, np.inf).min(0)) if others else 0.0
        spread = np.where(finite.sum(0) >= 2, spread, 0.0) if others else 0.0
        resolved = ds["converged"].sel(scheme="mcmc").values.astype(bool) | (width < spread)
    return np.isfinite(width) & ~resolved


def interval_note(ds, remedy: str = "") -> str:
    """The cells where MCMC's interval for log p(y) ([forward − 2 se, reverse + 2 se],
    ``bnlab.mcmc.AISResult.interval``) is wider than the surface's tolerance, so that
    smaller gaps between the methods are not resolved there, and the cells where its
    upper estimate lies below VI's ELBO (``elbo``; the exact log p(y) never does). Empty
    for a surface without bounds."""
    if "mcmc_upper" not in ds or "mcmc" not in [str(m) for m in ds["scheme"].values]:
        return ""
    hi = ds["mcmc_upper"].values
    ok = np.isfinite(hi) & np.isfinite(ds["mcmc_lower"].values)
    if not ok.any():
        return ""
    wide = int((ok & ~ds["converged"].sel(scheme="mcmc").values.astype(bool)).sum())
    tol = ds.attrs.get("mcmc_tolerance", float("nan"))
    if not wide:
        return markup.caption(f"MCMC's interval for log p(y) is narrower than {tol:g} nats "
                              f"at all {int(ok.sum())} cells: resolved.")
    line = (f"MCMC's interval for log p(y) (forward and reverse AIS, ± 2 standard errors) "
            f"is wider than {tol:g} nats at {wide} of {int(ok.sum())} cells: not resolved "
            "there, so smaller gaps between the methods are not settled")
    grey = int(unsettled_cells(ds).sum())
    if grey:
        line += (f"; at {grey} of these it is also wider than the approximations' spread, so "
                 "it cannot order them there: grey on the MCMC panel, and its dashed "
                 "contour is drawn only at the other cells")
    bound = elbo(ds)
    if bound is not None:
        below = ok & np.isfinite(bound) & (hi < np.nan_to_num(bound, nan=-np.inf))
        if below.any():
            line += f"; its upper estimate lies below VI's ELBO at {int(below.sum())} cells"
    return markup.warning(line + (f": {remedy}." if remedy else "."))


def standard_error_note(ds, remedy: str = "") -> str:
    """What the MCMC surface's errors settle, as one line of HTML (numbers only): its
    standard error per point (AIS, per cell), and the cells where its estimate lies
    below VI's lower bound, which the exact log p(y) never does. AIS's log p(y) is low
    on average (the log of an unbiased estimate of p(y)), so a few such cells within
    about two standard errors are its noise; more than three says its schedule was too
    short there (``remedy`` then says what to do). Gaps between methods smaller than the
    error are not resolved."""
    methods = [str(m) for m in ds["scheme"].values]
    if "mcmc" not in methods or "log_marginal_se" not in ds:
        return ""
    n = ds.attrs.get("n_train", 1)
    mc = ds["log_marginal"].sel(scheme="mcmc").values
    se = ds["log_marginal_se"].sel(scheme="mcmc").values
    ok = np.isfinite(mc) & np.isfinite(se) & (se > 0)
    if not ok.any():
        return ""
    line = (f"MCMC (AIS) standard error per point: median {np.median(se[ok]) / n:.4f}, "
            f"largest {se[ok].max() / n:.4f}; differences smaller than that are not "
            "resolved.")
    bound = elbo(ds)
    if bound is None:
        return markup.caption(line)
    below = ok & np.isfinite(bound) & (mc < np.nan_to_num(bound, nan=-np.inf))
    if not below.any():
        return markup.caption(line)
    z = ((bound - mc) / se)[below]
    line += (f" At {int(below.sum())} of {int(ok.sum())} cells MCMC's estimate lies below "
             f"VI's lower bound (AIS's estimate is low on average), by at most "
             f"{z.max():.1f} standard errors")
    far = int((z > 3).sum())
    if far:
        return markup.warning(f"{line}; at {far} by more than 3, where its error is "
                              "underestimated and its schedule too short"
                              + (f": {remedy}." if remedy else "."))
    return markup.caption(line + ".")
