"""The Live page's status line: the method, the iteration, the energy and the run's
state in words (why it stopped: ``runner.STOP_REASONS``), and what the safeguards did."""
from __future__ import annotations

from .runner import STOP_REASONS


def status_line(st: dict, method: str, running: bool, cancelled: bool) -> str:
    """HTML for the status of a snapshot (``Runner.snapshot()["status"]``) of a run of
    ``method``, ``running`` or paused (``cancelled``: before it stopped)."""
    stop = st.get("stop")
    if stop == "converged":
        state = "<b class='bn-good'>converged</b>"
    elif stop is not None and stop.startswith("diverged"):
        why = STOP_REASONS[stop].removeprefix("diverged: ")
        state = (f"<b class='bn-bad'>diverged</b>: {why}; the last good iterate is shown")
    elif stop == "cap":
        state = (f"<b class='bn-warn'>cap reached</b>: stopped at the iteration cap "
                 f"({st['max_iters']}) before converging")
    elif stop == "stalled":
        why = STOP_REASONS[stop].removeprefix("stopped: ")
        state = f"<b class='bn-warn'>stalled</b>: {why}"
    elif running:
        state = "<b>running</b>"
    elif cancelled:
        state = "<b class='bn-warn'>cancelled</b>: paused before converging (▶ Run goes on)"
    else:
        state = "ready" if st["iteration"] == 0 else "paused"
    control = (f" · {st['rejected']} proposed step(s) rejected by the safeguards"
               if st["rejected"] else "")
    if st["rejected"] and st["step_size"] < st["first_step_size"] * (1 - 1e-9):
        # the step control halves ρ; an Anderson-mixed step is rejected without
        control += f"; ρ reduced to <b>{st['step_size']:.3g}</b>"
    if st["rejected"]:
        control += (" <span class='bn-reason'>(a proposed step that would make a "
                    "covariance not positive definite, overflow, or lower the ELBO is "
                    "not taken: the iterate stays, amber in the PSD strip)</span>")
    return (f"Method <b>{method}</b> · iteration <b>{st['iteration']}</b> · energy "
            f"<b>{st['energy']:.4f}</b> · {state}{control}")
