"""The Surfaces page's model: each chosen method's approximate log marginal likelihood
over a grid of two hyperparameters for the sidebar's problem (``bnlab.surface``), with
progress and cancel, the hyperparameter-learning trajectories, and the surface it holds.
No Panel here: the view (``surfaces.SurfacesView``) chooses the grid, draws the result
and follows ``computing``, ``fraction`` and ``message``."""
from __future__ import annotations

import threading
import time

import numpy as np
import param

from bnlab import hyperparameters
from bnlab.methods import REGISTRY, takes_alpha

from .mcmc_ref import schedule_ladder
from .problem import build_problem, make_kernel, make_likelihood
from .settings import LIKELIHOOD_CONTROLS, LabSettings
from .trajectories import learn_trajectories

#: the sidebar setting behind each surface axis the lab has a control for: the kernel's
#: hyperparameters (``problem.make_kernel``), the likelihood's (``LIKELIHOOD_CONTROLS``)
#: and α; a likelihood hyperparameter without one keeps the likelihood's default
THETA_SETTINGS = {"lengthscale": "lengthscale", "variance": "variance", "period": "period",
                  **LIKELIHOOD_CONTROLS, "alpha": "alpha"}
#: iterations per cell: ``bnlab.surface``'s default, named for the page's note
SURFACE_MAX_ITERS = 200
#: the MCMC schedules offered (AIS temperatures per grid point): those of the live
#: page's MCMC reference, each four times the time of the one before
MCMC_TEMPS = schedule_ladder()


def _likelihood_params(settings: LabSettings) -> dict:
    """The sidebar's likelihood's hyperparameters (its ``init_params()``), none when it is
    no longer offered (the surface's run says so)."""
    try:
        return make_likelihood(settings, settings.resolved_likelihood()).init_params()
    except ValueError:
        return {}


def available_axes(settings: LabSettings, methods=()) -> list:
    """The hyperparameters the current model has (a surface over another fails), named
    by ``bnlab.hyperparameters`` from the kernel's and the likelihood's own
    ``init_params()`` (the lab's one kernel serves every latent), and α when a chosen
    method takes it (``bnlab.methods.takes_alpha``, with the default options the
    surface runs each method with)."""
    out = hyperparameters.names({"kernel": [make_kernel(settings).init_params()],
                                 "likelihood": _likelihood_params(settings)})
    if any(takes_alpha(m) for m in methods if m in REGISTRY):
        out += hyperparameters.METHOD_SETTINGS
    return out


def current_theta(settings: LabSettings) -> dict:
    """The sidebar's value of every surface axis (the ★ on the panels): its control's,
    or the likelihood's default for a likelihood hyperparameter the lab has no control
    for."""
    theta = {name: float(v) for name, v in _likelihood_params(settings).items()}
    return {**theta, **{axis: getattr(settings, name) for axis, name in THETA_SETTINGS.items()}}


def make_grid(rows: tuple, columns: tuple, points: int) -> dict:
    """{axis: ``points`` log-spaced values} for ``rows`` and ``columns``, each (axis,
    from, to); a clear error for one axis twice or a range that is not 0 < from < to."""
    if rows[0] == columns[0]:
        raise ValueError("choose two different hyperparameters for rows and columns")
    out = {}
    for name, lo, hi in (rows, columns):
        if not (lo > 0 and hi > lo):
            raise ValueError(f"{name}: the range needs 0 < from < to, got {lo} … {hi}")
        out[name] = np.geomspace(lo, hi, points)
    return out


class SurfacesModel(param.Parameterized):
    """One per browser session: ``compute`` runs one surface at a time (``lock``), and
    ``cancel`` (an Event) stops it; ``dataset`` and ``trajectories`` hold the last one."""

    computing = param.Boolean(default=False, doc="a surface is being computed")
    fraction = param.Number(default=0.0, doc="the part of the grid computed so far")
    message = param.String(default="", doc="the learning trajectories' stage (HTML)")

    def __init__(self, settings: LabSettings, **params):
        super().__init__(**params)
        self.settings = settings
        self.dataset = None
        self.trajectories = {}
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def compute(self, methods, rows: tuple, columns: tuple, points: int, learners=(),
                mcmc_temps: int = MCMC_TEMPS[0]) -> float:
        """The surfaces of ``methods`` over ``make_grid(rows, columns, points)`` for the
        sidebar's settings (MCMC with ``mcmc_temps`` temperatures), then each learner's
        path over the two axes from the sidebar's values; the seconds it took. Raises
        ValueError, holding the last surface, for settings, a grid or a computation
        that fails."""
        import bnlab
        problem = build_problem(self.settings)
        grid = make_grid(rows, columns, points)
        self.cancel.clear()
        self.message = ""
        self.started, self.fraction = time.monotonic(), 0.0
        self.computing = True
        s = self.settings
        try:
            ds = bnlab.surface(problem.model, problem.X, problem.y, methods=list(methods),
                               grid=grid, params=problem.params, alpha=s.alpha,
                               max_iters=SURFACE_MAX_ITERS,
                               damping=s.rho, backtracking=s.backtrack,
                               acceleration=s.accelerate,
                               cubature=("gauss_hermite", s.cubature_order),
                               progress=lambda f: setattr(self, "fraction", f),
                               cancel=self.cancel, batching="auto",
                               mcmc_options={"num_temps": mcmc_temps})
            self.trajectories = {}
            if learners and not ds.attrs.get("cancelled"):
                self.message = "Learning the hyperparameters …"
                self.trajectories = learn_trajectories(
                    problem, (rows[0], columns[0]), list(learners), damping=s.rho,
                    cubature=("gauss_hermite", s.cubature_order))
                self.message = "Learning stopped: " + ", ".join(
                    f"{k} ({t.stop_reason})" for k, t in self.trajectories.items())
            seconds = time.monotonic() - self.started
        finally:
            self.computing = False
        self.dataset = ds
        return seconds

    def close(self):
        """The session is gone: cancel a running computation, drop the surface."""
        self.cancel.set()
        self.dataset, self.trajectories = None, {}
