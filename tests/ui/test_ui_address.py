"""The page's address as a function of the lab's state: after every tour step, every
setting change and Exit it names exactly the tour's step and the settings in force
(read back by the shared-link parser), and a write requested from a worker thread is
applied on the event loop with the state at that moment, not the state when it was
requested (two writes in flight then cannot leave the older one last)."""
from urllib.parse import parse_qsl

from panel.io.location import Location

from bnlab.ui import tour_panel, tours
from bnlab.ui.address import Address
from bnlab.ui.settings import URL_PARAMS, parse_link

from test_ui_tours import PagesOnly


def _addressed_lab(doc=None):
    lab = PagesOnly()
    panel = tour_panel.TourPanel(lab, perform_actions=False)
    lab.address = Address(Location(search="?tour=alpha"), lab.settings, panel.query, doc=doc)
    return lab, panel


def _shown(location):
    """(tour and step named, settings named) of the address, read as a link is read."""
    pairs = dict(parse_qsl(location.search.lstrip("?")))
    good, bad = parse_link(location.search)
    assert bad == {}
    return (pairs.get("tour"), pairs.get("step")), good


def _state(lab):
    return {p: getattr(lab.settings, p) for p in URL_PARAMS}


def test_the_address_holds_the_step_and_the_settings_in_force():
    lab, panel = _addressed_lab()
    tour = tours.ALPHA
    panel.open("alpha")
    for k in range(len(tour.steps)):
        panel.go(k)
        assert _shown(lab.address.location) == (("alpha", str(k + 1)), tour.settings(k))
        lab.settings.param.update(lengthscale=2.5, rho=0.3)          # the user plays
        assert _shown(lab.address.location) == (("alpha", str(k + 1)), _state(lab))
    panel.close()
    assert _shown(lab.address.location) == ((None, None), _state(lab))


class LoopDoc:
    """A served document's event loop, run by hand: next-tick callbacks wait here."""
    session_context = object()

    def __init__(self):
        self.pending = []

    def add_next_tick_callback(self, callback):
        self.pending.append(callback)

    def run(self):
        while self.pending:
            self.pending.pop(0)()


def test_writes_from_a_worker_thread_land_with_the_latest_state():
    doc = LoopDoc()
    lab, panel = _addressed_lab(doc)
    panel.open("alpha")
    panel.go(2)                      # a Next click: its writes are queued for the loop …
    assert doc.pending and lab.address.location.search == "?tour=alpha"
    lab.settings.lengthscale = 3.5   # … and a setting echoed from the browser beside it
    panel.index = 3                  # (the step moves on before the queue runs)
    doc.run()
    assert _shown(lab.address.location) == (("alpha", "4"), _state(lab))
    assert lab.settings.lengthscale == 3.5


def test_nothing_is_written_once_the_page_is_gone():
    doc = LoopDoc()
    lab, panel = _addressed_lab(doc)
    doc.session_context = None       # Bokeh's Document.destroy
    lab.settings.lengthscale = 2.0   # a tour step finishing after the tab closed
    assert doc.pending == [] and lab.address.location.search == "?tour=alpha"


def test_a_sliders_arithmetic_is_written_as_its_box_shows_it():
    """6.35 + 0.3, as a slider's arithmetic gives it, is 6.6499999999999995 in floating
    point; the address says 6.65, and the link reads back within the last bits."""
    from bnlab.ui.address import settings_query
    from bnlab.ui.settings import LabSettings
    value = 6.35 + 0.3
    assert value != 6.65
    query = dict(settings_query(LabSettings(lengthscale=value, rho=0.1 + 0.2)))
    assert query["lengthscale"] == "6.65" and query["rho"] == "0.3"
    good, errors = parse_link("&".join(f"{k}={v}" for k, v in query.items()))
    assert errors == {} and abs(good["lengthscale"] - value) < 1e-12 * value


def test_a_copied_link_brings_back_the_solved_run_and_the_mcmc_reference():
    """The teacher's page solved its run and computed the MCMC reference: the address
    says so (``show=run``, ``mcmc=``temperatures), and a second lab opened on that
    address alone (a student's) shows the same stop, energy and log p(y) interval."""
    from bnlab.ui.app import Lab
    from bnlab.ui.address import shown_from_link
    from bnlab.ui.mcmc_ref import schedule_ladder

    def opened(search):
        lab = Lab()
        lab.address = Address(Location(search=search), lab.settings, lab.tour.query,
                              shown_query=lab.shown_query)
        return lab

    teacher = opened("")
    teacher.settings.param.update(method="ep", lengthscale=1.5)
    assert "show=" not in teacher.address.location.search
    teacher.live.solve()
    teacher.live.compute_mcmc()
    teacher.address.write()
    link = teacher.address.location.search
    assert "show=run" in link and "mcmc=1000" in link
    student = opened(link)
    good, bad = parse_link(link)
    student.settings.apply_link(good)
    solve, temps, bad = shown_from_link(link, schedule_ladder())
    assert bad == {} and (solve, temps) == (True, 1000)
    student.restore_shown(solve, temps)
    mine, theirs = (lab.live.runner.snapshot()["status"] for lab in (student, teacher))
    assert mine["stop"] == theirs["stop"] == "converged"
    assert (mine["iteration"], mine["energy"]) == (theirs["iteration"], theirs["energy"])
    assert (student.live.mcmc.log_z, student.live.mcmc.log_z_se) == (
        teacher.live.mcmc.log_z, teacher.live.mcmc.log_z_se)
    assert student.live.mcmc_pane.object == teacher.live.mcmc_pane.object


def test_a_link_shows_only_what_the_lab_can_bring_back():
    from bnlab.ui.address import shown_from_link
    from bnlab.ui.mcmc_ref import schedule_ladder
    solve, temps, bad = shown_from_link("?show=<b>x</b>&mcmc=999999", schedule_ladder())
    assert (solve, temps) == (False, None) and set(bad) == {"show", "mcmc"}
    assert "1000, 4000, 16000" in bad["mcmc"][1]
