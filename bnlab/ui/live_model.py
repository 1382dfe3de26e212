"""The Live page's model: one session's run, built from the settings and driven step by
step (Step, Run's animation, a tour's solve, Pause, Reset), with its clicked points and
its MCMC reference. No Panel here: the view (``live.LiveView``) draws what this holds,
told through its ``Screen`` methods, and reacts to its parameters (``busy``, ``running``,
``sampling``); headless, the same run is driven by tests and scripts.

Every run (an animation or a solve) carries a generation number: starting one, a pause,
a rebuild or closing the page draws a new number, and a run whose number is no longer
current takes no further step and draws nothing. So no interleaving of clicks, tour
steps and ticks, on whatever threads they arrive, can leave two runs going or a stale
frame on screen."""
from __future__ import annotations

import logging
import threading
import time
from contextlib import nullcontext

import param

from .mcmc_ref import MCMCReference
from .problem import SettingError, build_problem
from .runner import Runner, make_runner
from .settings import URL_PARAMS, LabSettings

log = logging.getLogger(__name__)

#: settings that define the run (changing them restarts it); speed paces it and the
#: cap bounds it, neither changes the iteration
RUN_PARAMS = tuple(p for p in URL_PARAMS if p not in ("speed", "max_iters")) + ("csv_text",)
MAX_FPS = 20
#: iterations between two looks at the clock while a run is solved without animation
SOLVE_CHUNK = 10
#: seconds between two frames of a run solved without animation (big problems only)
SOLVE_FRAME_S = 1.0
#: runs of all sessions that compute at once; the others' ticks wait their turn, so a
#: class pressing Run together shares the cores instead of over-subscribing them
_COMPUTING = threading.BoundedSemaphore(4)


class Screen:
    """What the model tells its view (``live.LiveView``); this one draws nothing."""

    def push(self):
        """Draw the current run's state."""

    def show_status(self, st: dict | None = None):
        """Write the status line: ``st`` (a snapshot's status), or the model's message."""

    def show_no_run(self):
        """The settings cannot be built: the message, and no run's plots."""

    def describe(self, problem):
        """A new problem was built: say what it is."""

    def show_tick(self, runner: Runner, taken: int, stopped: bool, generation: int):
        """A tick of Run took ``taken`` steps: draw them (then ``LiveModel.tick_shown``)."""


class Headless(Screen):
    """The screen of a model without a view: a tick is taken as shown at once."""

    def __init__(self, model: LiveModel):
        self.model = model

    def show_tick(self, runner: Runner, taken: int, stopped: bool, generation: int):
        self.model.tick_shown(runner, stopped, generation)


class LiveModel(param.Parameterized):
    """One per browser session. ``rebuild()`` makes a new ``Runner`` from the settings;
    ``run()`` animates it at ``settings.speed``, ``solve()`` runs it to its stop at once."""

    running = param.Boolean(default=False)
    cancelled = param.Boolean(default=False, doc="paused by the user before the run stopped")
    busy = param.Boolean(default=False, doc="a new problem is being built (JAX compiles)")
    sampling = param.Boolean(default=False, doc="the MCMC reference is being computed")
    message = param.String(default="")
    references = param.Integer(default=0, doc="MCMC references computed (other pages "
                                              "watch it to overlay the new one)")

    def __init__(self, settings: LabSettings, status, screen: Screen | None = None, **params):
        super().__init__(**params)
        self.settings, self.status = settings, status    # status: ``controls.Status``
        self.screen = screen or Headless(self)
        self.runner: Runner | None = None
        self.problem = None
        self.selected: list[int] = []
        self.point: int | None = None    # the clicked point whose local picture is shown
        self.mcmc = MCMCReference()
        self._generation = 0             # the current run's number (see the module doc)
        self._generation_lock = threading.Lock()
        self.lock = threading.Lock()     # around the runner's steps and replacement
        self._draw_pending = False       # a tick's drawing is queued on the event loop
        self.closed = False
        settings.param.watch(lambda *_: self.rebuild(), list(RUN_PARAMS))
        settings.param.watch(self._on_cap, ["max_iters"])

    # -- building a run -------------------------------------------------------------
    def rebuild(self) -> bool:
        """New problem and runner from the settings; errors go next to their control.
        While it builds (JAX compiles a new data shape, likelihood or method: seconds),
        ``busy`` is set (the view covers its plots and turns the driving buttons off):
        the old problem is never shown as the new one. Settings that cannot be built
        drop the old run too (Run and Step stay off until the settings are fixed): Run
        would otherwise go on with the previous model under the new settings' names."""
        self.halt()
        s = self.settings
        errors = {}
        self.busy = True
        try:
            try:
                problem = build_problem(s)
                self.status.input_dim = problem.input_dim
                runner = make_runner(problem, s)
            except SettingError as exc:
                errors[exc.control] = str(exc)
            except (ValueError, TypeError) as exc:
                errors["method"] = str(exc)
            except Exception as exc:         # the engine failed, not the settings: say so
                log.exception("bnlab: building the run failed")
                errors["method"] = (f"The run could not be built ({type(exc).__name__}: "
                                    f"{exc}). Change a setting or reload the page to try "
                                    f"again; the server's log has the details.")
            if errors:
                with self.lock:
                    self.problem = self.runner = None
                self.status.errors = errors
                self.message = next(iter(errors.values()))
                self.screen.show_no_run()
                return False
            with self.lock:
                self.problem, self.runner = problem, runner
                self.selected = [i for i in self.selected if i < len(problem.x_plot)]
                if self.point is not None and self.point >= len(problem.x_plot):
                    self.point = None
                self.mcmc.keep_for(problem)
                self.cancelled = False
            self.status.errors = {}
            self.screen.describe(problem)
            self.screen.push()
            return True
        finally:
            self.busy = False

    # -- driving --------------------------------------------------------------------
    def step(self, k: int = 1):
        if self.runner is None or self.busy:
            return
        with self.lock:
            self.runner.step(k)
            self.cancelled = False
        self.screen.push()

    def reset(self):
        self.halt()
        self.cancelled = False
        if self.runner is not None and not self.busy:
            self.runner.reset()
            self.screen.push()

    def run(self, scope=nullcontext, connected=lambda: True):
        """Animate the run: a thread of its own steps it every ``pace()`` until it
        stops, is paused or is replaced (``_animate``), within ``scope()`` (the view's
        session document) while ``connected()`` (its page is open)."""
        if self.runner is None or self.running or self.busy:
            return
        generation = self._start_generation()
        self.running, self.cancelled = True, False
        threading.Thread(target=self._animate, args=(generation, scope, connected),
                         name="bnlab-run", daemon=True).start()

    def _start_generation(self) -> int:
        """A new current run number (held only for the increment: the event loop calls
        this while a step may hold ``lock``)."""
        with self._generation_lock:
            self._generation += 1
            return self._generation

    def _animate(self, generation: int, scope, connected):
        """The animation's loop: a tick per period while ``generation`` is current and the
        page is open (a closed tab's run stops at once, not when Bokeh discards its
        session 15 s later)."""
        with scope():
            while generation == self._generation and not self.closed:
                if not connected():
                    self.halt()
                    return
                start = time.monotonic()
                with _COMPUTING:
                    self.tick(generation)
                time.sleep(max(0.0, self.pace()[0] / 1000.0 - (time.monotonic() - start)))

    def solve(self, cancelled=lambda: False) -> bool:
        """Run the problem from its start to its stop (converged, diverged, the cap,
        stalled) without animation and show where it stopped: what a tour step shows.
        It counts as running (Pause stops it, a rebuild replaces it); a frame is drawn
        every ``SOLVE_FRAME_S`` on problems slow enough to need one. False if there was
        no run, or if it was paused, replaced or ``cancelled()`` before its stop."""
        runner = self.runner
        if runner is None or self.busy:
            return False
        self.halt()
        generation = self._start_generation()
        with self.lock:                  # after a tick under way, which then sees its end
            runner.reset()
        self.running, self.cancelled = True, False
        shown, stopped = time.monotonic(), False
        try:
            while generation == self._generation and runner is self.runner and not (
                    self.closed or cancelled()):
                with _COMPUTING, self.lock:
                    runner.step(SOLVE_CHUNK)
                if runner.stop_reason() is not None:
                    stopped = True
                    break
                if time.monotonic() - shown > SOLVE_FRAME_S:
                    self.screen.push()
                    shown = time.monotonic()
        finally:
            if generation == self._generation:
                self.halt()
                self.cancelled = not stopped
        self.screen.push()
        return stopped

    def pause(self):
        """The Pause button: the run stops before it converged, and the status says so."""
        if self.halt() and self.runner is not None:
            self.cancelled = self.runner.stop_reason() is None
            self.screen.show_status(self.runner.snapshot()["status"])

    def halt(self) -> bool:
        """End the current run's generation, so that it takes no further step and
        pushes no frame; True if the run was running."""
        self._start_generation()
        was_running, self.running = self.running, False
        return was_running

    def pace(self):
        """(callback period in ms, iterations per tick) for the chosen speed."""
        speed = float(self.settings.speed)
        period = max(1000.0 / MAX_FPS, 1000.0 / speed)
        return int(period), max(1, int(round(speed * period / 1000.0)))

    def _on_cap(self, *_):
        """A new cap applies to the current run (a run stopped at the old cap may go on)."""
        if self.runner is not None:
            self.runner.set_cap(int(self.settings.max_iters))
            self.screen.push()

    def tick(self, generation: int | None = None):
        """One tick of Run: the steps and their plot data are computed here (on the
        animation's thread); the view draws them on the server's event loop
        (``Screen.show_tick``). A tick whose drawing is still queued is skipped, so
        ticks never pile up; so is a tick of a run no longer current."""
        if generation is None:
            generation = self._generation
        if self.closed or self._draw_pending or not self.lock.acquire(blocking=False):
            return
        try:
            runner = self.runner
            if runner is None or self.busy or generation != self._generation:
                return
            taken = runner.step(self.pace()[1])
            stopped = runner.stop_reason() is not None
            runner.snapshot()
        finally:
            self.lock.release()
        self._draw_pending = True
        self.screen.show_tick(runner, taken, stopped, generation)

    def tick_shown(self, runner: Runner, stopped: bool, generation: int) -> bool:
        """The view is drawing a tick of ``runner`` (on the event loop): a stop ends the
        run that stopped only. False, to draw nothing, for a closed session or a
        replaced run."""
        self._draw_pending = False
        if self.closed or runner is not self.runner:
            return False
        if stopped and generation == self._generation:
            self.halt()
        return True

    def close(self):
        """Release the session's run (its browser page is gone): end the current run,
        drop the runner, the problem and the MCMC reference."""
        self.closed = True
        self._start_generation()
        with self.lock:
            self.runner = self.problem = None
            self.mcmc.clear()

    # -- two points and MCMC --------------------------------------------------------
    def tap(self, indices) -> bool:
        """Data points clicked (``indices``, Bokeh's selection): the last point's picture
        is shown, and the last two clicked form the pair. A tap on overlapping or
        nearby points selects them all: the one that is not the previous pick is taken,
        so two neighbours can form a pair. False if ignored (no run, or one building)."""
        if self.problem is None or not indices or self.busy:
            return False
        fresh = [int(i) for i in indices if int(i) not in self.selected[-1:]]
        sel = (self.selected + [fresh[-1] if fresh else int(indices[-1])])[-2:]
        self.point = sel[-1]
        self.selected = sel if len(sel) == 2 and sel[0] != sel[1] else sel[-1:]
        return True

    def compute_mcmc(self, num_temps: int | None = None):
        """AIS on the current problem (kept while only the method, α or ρ change); a
        second press on a problem whose run was rough refines the schedule, a copied
        link names its own (``num_temps``)."""
        if self.problem is None or self.busy:
            return
        self.sampling = True
        try:
            self.mcmc.compute(self.problem, num_temps=num_temps)
        except ValueError as exc:
            self.message = f"MCMC reference: {exc}"
            self.screen.show_status()
            return
        finally:
            self.sampling = False
        self.screen.push()
        self.references += 1

    def joint_data(self):
        """The selected pair's joint Gaussian (and MCMC samples), or None without a pair."""
        if self.runner is None or len(self.selected) != 2:
            return None
        try:
            view = self.runner.joint_view(*self.selected)
        except ValueError as exc:
            return {"error": str(exc)}
        view["samples"] = self.mcmc.pair(*self.selected)
        return view
