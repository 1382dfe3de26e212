"""What a teacher or a student takes away from the live page: the energy trace, the
posterior band and, once computed, the MCMC reference as CSV files, and a link that
reproduces the settings. (PNG: the save tool on each figure's toolbar.)

The CSV text is made from the runner's snapshot, the same numbers the plots and the
status line show, written with 17 significant digits so they read back exactly."""
from __future__ import annotations

import io

import numpy as np
import panel as pn

from . import markup
from .layout import controls_row

TRACE_COLUMNS = ("iteration", "energy", "step_size", "max_change", "posterior_psd",
                 "cavity_psd", "accepted")


def _number(v) -> str:
    return format(float(v), ".17g")


def trace_csv(snap: dict) -> str:
    """One row per iteration (0: the initial sites): the method's energy, the step size ρ
    in effect after the iteration (the step control halves it on a rejected step), the
    largest change of a site parameter, whether the posterior and the cavities of the
    iteration's proposal were positive definite, and whether the proposal was accepted
    (a rejected one leaves the iterate as it was)."""
    t, q = snap["trace"], snap["psd"]
    lines = [",".join(TRACE_COLUMNS)]
    for i in range(len(t["iteration"])):
        lines.append(",".join([str(int(t["iteration"][i])), _number(t["energy"][i]),
                               _number(t["step_size"][i]), _number(t["max_change"][i]),
                               str(int(bool(q["posterior_psd"][i]))),
                               str(int(bool(q["cavity_psd"][i]))),
                               str(int(bool(q["accepted"][i])))]))
    return "\n".join(lines) + "\n"


def band_csv(snap: dict) -> str:
    """The plotted posterior on the plotting grid: x, then per latent the mean and the
    ±2σ band, then the predictive mean and band (a probability for a classifier)."""
    x = np.asarray(snap["predictive"]["x"])
    columns = {"x": x}
    for key, band in snap["bands"].items():
        for part in ("mean", "lower", "upper"):
            columns[f"{key}_{part}"] = np.asarray(band[part])
    kind = snap["predictive"]["kind"]
    for part in ("mean", "lower", "upper"):
        columns[f"predictive_{kind}_{part}"] = np.asarray(snap["predictive"][part])
    return _table(columns)


def _table(columns: dict) -> str:
    """CSV text of equally long numeric columns, {name: values}, a header line first."""
    lines = [",".join(columns)]
    rows = zip(*columns.values())
    lines += [",".join(_number(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def mcmc_csv(truth: dict) -> str:
    """The MCMC reference as the posterior plot shows it (``MCMCReference.truth_for``):
    the weighted mean and ±2σ band of f at the training inputs, by x, and on every row
    the run's log p(y) as the page states it: forward AIS (a stochastic lower bound) and
    reverse AIS (an upper one), each with its standard error, the interval
    [lower − 2 se, upper + 2 se], whether it is narrower than the tolerance (1 or 0),
    the weights' effective sample size and the schedule (one plain table: not every CSV
    reader skips a comment line, numpy's header reading takes it for the column
    names)."""
    b = truth["band"]
    lo, hi = truth["interval"]
    run = {"log_p_y_lower": truth["log_z"], "log_p_y_lower_se": truth["log_z_se"],
           "log_p_y_upper": truth["log_z_upper"], "log_p_y_upper_se": truth["log_z_upper_se"],
           "interval_lower": lo, "interval_upper": hi,
           "resolved": float(bool(truth["converged"])), "ess": truth["ess"],
           "chains": truth["num_chains"], "temperatures": truth["num_temps"]}
    n = len(b["x"])
    return _table({**{c: b[c] for c in ("x", "mean", "lower", "upper")},
                   **{name: np.full(n, value) for name, value in run.items()}})


#: JavaScript of the "Copy link" button: the address bar holds every setting (the page
#: keeps it in sync); the link is shown in a field, and copied where the browser allows
#: it (the clipboard needs https or localhost)
_COPY_JS = """
const url = window.location.href;
field.value = url;
if (navigator.clipboard && window.isSecureContext) {
  navigator.clipboard.writeText(url).catch(() => {});
}
"""


class Exports(pn.viewable.Viewer):
    """Download buttons for the trace and band CSVs of the current run, the MCMC
    reference's (offered while the page shows one), and the link."""

    def __init__(self, live, **params):
        super().__init__(**params)
        self.live = live
        self.trace_download = pn.widgets.FileDownload(
            callback=self._trace, filename="bnlab-trace.csv", label="⤓ Trace CSV",
            color="light", width=130, css_classes=["bn-trace-csv"])
        self.band_download = pn.widgets.FileDownload(
            callback=self._band, filename="bnlab-band.csv", label="⤓ Band CSV",
            color="light", width=130, css_classes=["bn-band-csv"])
        self.mcmc_download = pn.widgets.FileDownload(
            callback=self._mcmc, filename="bnlab-mcmc.csv", label="⤓ MCMC CSV",
            color="light", width=130, css_classes=["bn-mcmc-csv"],
            visible=live.mcmc_pane.visible)
        live.mcmc_pane.param.watch(lambda e: setattr(self.mcmc_download, "visible", e.new),
                                   "visible")
        self.link = pn.widgets.TextInput(placeholder="press Copy link", width=280,
                                         css_classes=["bn-link"])
        self.copy = pn.widgets.Button(label="↪ Copy link", width=120,
                                      description=markup.tooltip_below(
                                          "a link to this exact setup (an uploaded CSV file "
                                          "is not part of it)"))
        self.copy.js_on_click(args={"field": self.link}, code=_COPY_JS)
        self.layout = controls_row(self.trace_download, self.band_download,
                                   self.mcmc_download, self.copy, self.link,
                                   pn.pane.Markdown("PNG: the save tool of each plot.",
                                                    margin=(12, 10)),
                                   align_items="center")

    def __panel__(self):
        return self.layout

    def _snapshot(self):
        runner = self.live.runner
        if runner is None:
            raise ValueError("no run to export: fix the settings marked in the sidebar")
        return runner.snapshot()

    def _trace(self):
        return io.StringIO(trace_csv(self._snapshot()))

    def _band(self):
        return io.StringIO(band_csv(self._snapshot()))

    def _mcmc(self):
        problem = self.live.problem
        truth = None if problem is None else self.live.mcmc.truth_for(problem)
        if truth is None:
            raise ValueError("no MCMC reference of these settings: press “MCMC reference”")
        return io.StringIO(mcmc_csv(truth))
