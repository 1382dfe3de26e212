"""Guided tours without a browser: every step of every tour applies settings the lab
accepts, shows its page with its page controls, Back restores the previous step, and
the claims the tours' narrations make hold on their settings."""
import numpy as np
import panel as pn
import pytest

from bnlab.infer import validate_settings
from bnlab.ui import tour_panel, tours
from bnlab.ui.compare import CompareView
from bnlab.ui.compare_model import converge
from bnlab.ui.problem import build_problem
from bnlab.ui.mcmc_ref import MCMCReference
from bnlab.ui.settings import URL_PARAMS, LabSettings
from bnlab.ui.surfaces import SurfacesView

STEPS = [(key, k) for key, t in tours.TOURS.items() for k in range(len(t.steps))]


class PagesOnly:
    """The parts of a ``Lab`` a tour touches, without the live page (whose rebuild
    compiles an engine per step; ``test_a_tour_drives_the_real_lab`` covers it)."""

    def __init__(self):
        self.settings = LabSettings()
        self.compare = CompareView(self.settings)
        self.surfaces = SurfacesView(self.settings)
        self.tabs = pn.Tabs(*[(name, pn.pane.Markdown(name)) for name in tours.TABS])
        self.address = None


def _current(lab):
    return {p: getattr(lab.settings, p) for p in URL_PARAMS}


def _check_step(lab, tour, k):
    step = tour.steps[k]
    assert _current(lab) == tour.settings(k)
    assert lab.tabs.active == tours.TABS.index(step.tab)
    if step.page:
        view = getattr(lab, step.tab.lower())
        assert tour_panel.page_values(view, step.page) == dict(step.page)


@pytest.mark.parametrize("key,k", STEPS)
def test_every_step_applies_settings_the_lab_accepts(key, k):
    tour = tours.TOURS[key]
    lab = PagesOnly()
    panel = tour_panel.TourPanel(lab, perform_actions=False)
    panel.open(key)
    panel.go(k)
    _check_step(lab, tour, k)
    s = lab.settings
    # a tour sets no control the lab would disable for this combination
    assert not (set(tour.base) | set(tour.steps[k].settings)) & set(s.reasons())
    problem = build_problem(s)                     # data, likelihood and model fit
    validate_settings(s.method, s.effective_alpha(), s.rho, 1, 1e-6)
    assert problem.model.num_latents == 1
    n = len(tour.steps)
    assert f"step <b class='bn-tour-step'>{k + 1}</b> of {n}" in panel.heading.object
    assert panel.text.object == tour.steps[k].text
    assert panel.back.disabled == (k == 0) and panel.next.disabled == (k == n - 1)


@pytest.mark.parametrize("key", list(tours.TOURS))
def test_back_restores_the_previous_step_after_the_user_played(key):
    tour = tours.TOURS[key]
    lab = PagesOnly()
    panel = tour_panel.TourPanel(lab, perform_actions=False)
    panel.open(key)
    for k in range(1, len(tour.steps)):
        panel.next.clicks += 1
        assert panel.index == k
        _check_step(lab, tour, k)
    for k in reversed(range(len(tour.steps) - 1)):
        lab.settings.param.update(lengthscale=3.3, kernel="rbf", rho=0.77)   # the user plays
        lab.compare.method_a, lab.surfaces.points = "pl", 5
        lab.tabs.active = 3
        panel.back.clicks += 1
        assert panel.index == k
        _check_step(lab, tour, k)
    panel.go(-1)
    assert panel.index == 0                       # Back stops at the first step
    panel.exit.clicks += 1
    assert panel.tour is None and not panel.layout.visible
    assert tour_panel.CLOSED_CLASS in panel.layout.css_classes      # its card hidden too


def test_a_copied_address_reopens_its_step_with_its_own_settings():
    """A link that names settings besides ``tour`` and ``step`` was copied from the
    address bar: the step's text, page and tab come back, and the settings stay the
    link's (the user's changes since the step included), not the step's."""
    tour = tours.ALPHA
    lab = PagesOnly()
    lab.settings.param.update(**tour.settings(2))
    lab.settings.lengthscale = 3.3                              # as the link has it
    panel = tour_panel.TourPanel(lab, perform_actions=False)
    panel.open("alpha", 2, keep_settings=True)
    assert panel.index == 2 and panel.text.object == tour.steps[2].text
    assert lab.settings.lengthscale == 3.3
    assert {**_current(lab), "lengthscale": tour.settings(2)["lengthscale"]} == tour.settings(2)
    assert lab.tabs.active == tours.TABS.index(tour.steps[2].tab)
    assert tour_panel.CLOSED_CLASS not in panel.layout.css_classes
    panel.go(1)                                                 # Back: the step's own again
    _check_step(lab, tour, 1)
    panel.open("alpha", 99)                                     # a step past the end: the last
    assert panel.index == len(tour.steps) - 1
    _check_step(lab, tour, panel.index)


def test_unknown_tour_names_the_tours():
    with pytest.raises(ValueError, match="alpha, skewed, cavities, sparse, surface"):
        tour_panel.TourPanel(PagesOnly(), perform_actions=False).open("nope")
    with pytest.raises(ValueError, match="unknown tour action"):
        tours.Step("x", actions=("explode",))
    with pytest.raises(ValueError, match="URL settings"):
        tours.Step("x", {"csv_text": "1,2"})


def test_about_page_lists_every_tour_as_a_link():
    md = tours.tour_list_markdown()
    for key, t in tours.TOURS.items():
        assert f"[{t.title}](?tour={key})" in md


def test_a_tour_drives_the_real_lab():
    """The hook in ``Lab``: a step's settings rebuild the live run with its method."""
    from bnlab.ui.app import Lab
    lab = Lab()
    panel = tour_panel.TourPanel(lab, perform_actions=False)
    panel.open("cavities")
    assert lab.live.runner is not None and lab.live.runner.method == "ep"
    panel.go(2)
    assert lab.live.runner.method == "pep_riemann" and lab.settings.rho == 1.0
    assert lab.tabs.active == 0



def _run(tour, k):
    s = LabSettings()
    s.param.update(**tour.settings(k))
    return converge(build_problem(s), s.method, s, max_iters=200)


def test_cavity_tour_shows_what_it_says():
    """Undamped EP on the tour's data needs a non-PSD cavity and is stopped as diverged;
    damping, the Riemannian and the heuristic variants keep every cavity PSD and
    converge. Damped EP's fixed point has negative site precisions; the Riemannian path
    keeps every one positive, so it ends near EP's energy but not at it, and the
    heuristic one within 10⁻³ of it too."""
    tour = tours.TOURS["cavities"]
    ep = _run(tour, 0)
    assert ep.diverged and not all(ep.cavity_psd)
    runs = []
    for k in (1, 2, 3):
        r = _run(tour, k)
        assert r.converged and not r.diverged and all(r.cavity_psd), tour.steps[k].text
        runs.append(r)
    damped, riemann, heuristic = runs
    assert damped.snapshot()["sites"]["prec"].min() < 0
    assert riemann.snapshot()["sites"]["prec"].min() > 0
    e_ep = damped.energy[-1]
    assert 1e-5 < abs(riemann.energy[-1] - e_ep) < 2e-3
    assert abs(heuristic.energy[-1] - e_ep) < 2e-3


def _sd(run):
    b = run.snapshot()["bands"]["f1"]
    return float(np.mean(b["upper"] - b["lower"]) / 4)


def test_alpha_and_skewed_tours_show_what_they_say():
    """On the separated classes: PEP at α = 10⁻³ is at its α → 0 limit, VI (energy
    within 0.01); the band widens from there through PEP(0.5) to EP, EP's the closest to
    MCMC's (within 20 %); the energy rises with α, below MCMC's log p(y); Laplace's mean
    is far closer to zero than MCMC's, VI's and EP's are not."""
    tour = tours.TOURS["alpha"]
    small, pep, ep = _run(tour, 0), _run(tour, 2), _run(tour, 4)
    vi_settings = LabSettings()
    vi_settings.param.update(**dict(tour.settings(0), method="vi"))
    vi = converge(build_problem(vi_settings), "vi", vi_settings, max_iters=200)
    laplace = _run(tours.TOURS["skewed"], 0)
    assert (small.method, tour.settings(0)["alpha"], pep.method, ep.method,
            laplace.method) == ("pep", 0.001, "pep", "ep", "laplace")
    assert all(r.converged for r in (small, vi, pep, ep, laplace))
    assert abs(small.energy[-1] - vi.energy[-1]) < 0.01
    assert _sd(small) < 0.92 * _sd(pep)
    ref = MCMCReference()
    ref.compute(build_problem(LabSettings(**tour.settings(0))))
    mc = ref.band()
    mc_sd = float(np.mean(mc["upper"] - mc["lower"]) / 4)
    assert _sd(vi) < 0.92 * _sd(pep) and _sd(pep) < 0.97 * _sd(ep)
    assert ref.ess >= 100, ref.ess          # a reference good enough to compare with
    assert _sd(ep) < mc_sd and abs(_sd(ep) - mc_sd) < 0.2 * mc_sd and _sd(vi) < 0.8 * mc_sd
    assert vi.energy[-1] < pep.energy[-1] < ep.energy[-1] < ref.log_z
    mc_mean = np.abs(mc["mean"]).mean()
    for r, ok in ((laplace, False), (vi, True), (ep, True)):
        b = r.snapshot()["bands"]["f1"]
        mean = np.abs(np.interp(mc["x"], b["x"], b["mean"])).mean()
        assert (abs(mean - mc_mean) < 0.15 * mc_mean) == ok, (r.method, mean, mc_mean)


def test_sparse_tour_shows_what_it_says():
    """M = 5: the energy rises from VFE (VI) through α = 0.01 and 0.5 to FITC (EP);
    with M = 8 the gap between VFE and FITC is far smaller."""
    tour = tours.TOURS["sparse"]
    e = [_run(tour, k).energy[-1] for k in (3, 2, 1, 0)]
    assert e == sorted(e) and len(set(e)) == 4
    s = LabSettings(**{**tour.settings(3), "num_inducing": 8})
    vfe8 = converge(build_problem(s), "vi", s).energy[-1]
    s.method = "ep"
    fitc8 = converge(build_problem(s), "ep", s).energy[-1]
    assert 0 < fitc8 - vfe8 < 0.2 * (e[-1] - e[0])


@pytest.mark.slow
def test_surface_tour_shows_what_it_says():
    """On the tour's 7 × 7 grid (MCMC by AIS): all four
    surfaces pick the same cell; there Laplace < VI < EP < MCMC; the slice opens on the
    ×'s row; the page states what MCMC's error resolves."""
    from bnlab.ui.app import Lab
    tour = tours.TOURS["surface"]
    lab = Lab()
    lab.tour.open("surface")
    ds = lab.surfaces.dataset
    z = ds["log_marginal_per_n"]
    cells = {str(m): np.unravel_index(np.nanargmax(z.sel(scheme=m).values), z.shape[1:])
             for m in ds["scheme"].values}
    assert list(cells) == tour.steps[0].page["methods"] and len(set(cells.values())) == 1
    at_best = [float(z.sel(scheme=m).values[cells["mcmc"]]) for m in cells]
    assert at_best == sorted(at_best) and len(set(at_best)) == 4, at_best
    assert lab.surfaces.slice.value == cells["mcmc"][0]
    assert "MCMC (AIS) standard error per point" in lab.surfaces.message.object


def test_clicks_at_random_moments_leave_the_step_asked_for_last():
    """Next, Back, Replay, Run and Pause pressed at random moments from four threads (as
    Panel's worker threads deliver a teacher's clicks) while steps are still being shown:
    no click raises, and once the clicks stop the tour shows the step its Next and Back
    clicks add up to, with that step's settings and the run solved to the stop its text
    describes (undamped EP diverges at a cavity, the others converge to the energy an
    independent run of the same settings reaches)."""
    import random
    import threading
    import time
    from bnlab.ui.app import Lab
    tour = tours.TOURS["cavities"]
    lab = Lab()
    panel = lab.tour
    panel.open("cavities")
    rng = random.Random(7)
    buttons = {"next": panel.next, "back": panel.back, "replay": panel.replay,
               "run": lab.live.controls.run_button, "pause": lab.live.controls.pause_button}
    clicks = [rng.choice(["next", "next", "back", "replay", "run", "pause"]) for _ in range(56)]
    wanted, errors = 0, []
    for name in clicks:
        if name in ("next", "back"):
            wanted = min(max(wanted + (1 if name == "next" else -1), 0), len(tour.steps) - 1)
    clicks.append("back" if wanted else "next")
    wanted = wanted - 1 if wanted else 1
    pending = list(clicks)
    order = threading.Lock()

    def click_next():
        with order:                         # clicks reach the server in the order made
            name = pending.pop(0)
            buttons[name].clicks += 1       # returns at once unless this thread shows

    def worker():
        try:
            click_next()
        except Exception as exc:            # pragma: no cover - the assertion shows it
            errors.append(exc)

    threads = []
    for _ in clicks:
        time.sleep(rng.uniform(0.0, 0.15))
        t = threading.Thread(target=worker)
        t.start()
        threads.append(t)
        while sum(t.is_alive() for t in threads) >= 4:      # Panel's four workers
            time.sleep(0.01)
    for t in threads:
        t.join(300)
    deadline = time.time() + 300
    while (panel._showing or lab.live.running) and time.time() < deadline:
        time.sleep(0.05)
    assert errors == []
    assert panel.index == wanted and not panel._showing and not lab.live.running
    _check_step(lab, tour, wanted)
    assert "bn-tour-busy" not in panel.heading.object
    st = lab.live.runner.snapshot()["status"]
    if wanted == 0:
        assert st["stop"] == "diverged_cavity"
    else:
        assert st["stop"] == "converged"
        np.testing.assert_allclose(st["energy"], _run(tour, wanted).energy[-1], atol=1e-8)
    assert lab.live.runner.method == tour.settings(wanted)["method"]


def test_quick_clicks_from_panels_worker_threads_each_count():
    """Panel hands each click to one of its worker threads: 200 clicks on Next from
    eight threads at once, with the interpreter switching threads as often as it can,
    move the tour 200 steps on (a Next that read the step asked for before another
    click wrote it was lost), and as many on Back bring it to the first step again."""
    import sys
    import threading
    long_tour = tours.Tour(key="long", title="long", summary="", base={},
                           steps=tuple(tours.Step(f"step {k}") for k in range(260)))
    panel = tour_panel.TourPanel(PagesOnly(), perform_actions=False)
    panel.tour = long_tour
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for delta, expected in ((+1, 200), (-1, 0)):
            start = threading.Barrier(8)

            def clicks():
                start.wait()
                for _ in range(25):
                    panel.move(delta)

            threads = [threading.Thread(target=clicks) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert panel._wanted == expected and panel.index == expected
    finally:
        sys.setswitchinterval(interval)


def test_a_step_on_the_alpha_explorer_folds_the_pair_away():
    """On a 1024 × 768 projector the pair's section left only the α explorer's title on
    the screen: a step on the explorer folds the pair's section, a step on the pair
    unfolds it, and a user's fold or unfold is the page control the step restores."""
    lab = PagesOnly()
    panel = tour_panel.TourPanel(lab, perform_actions=False)
    panel.open("alpha", step=len(tours.ALPHA.steps) - 1)
    assert lab.compare.pair_card.collapsed and not lab.compare.pair_open
    panel.open("skewed", step=3)
    assert tours.SKEWED.steps[3].tab == "Compare"
    assert not lab.compare.pair_card.collapsed and lab.compare.pair_open
    lab.compare.pair_card.collapsed = True          # the user folds it
    assert not lab.compare.pair_open
