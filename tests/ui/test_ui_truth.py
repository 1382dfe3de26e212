"""The lab tells the truth, without a browser: runs stop and say why, Compare runs
each method at its own α and ρ, the α explorer marks what diverged, the MCMC reference
carries its error bars and outlives method changes, bad links keep their good values."""
import numpy as np
import pytest

from bnlab.ui import compare, compare_model
from bnlab.ui.controls import Status
from bnlab.ui.live import LiveView
from bnlab.ui.problem import build_problem
from bnlab.ui.runner import STALL_ITERS, make_runner
from bnlab.ui.settings import LabSettings


def _ticks(live, limit=5000):
    """Drive the live view as its periodic callback would, until the run stops."""
    live.running = True
    for _ in range(limit):
        live.model.tick()
        if not live.running:
            return
    raise AssertionError("the run never stopped")


def test_vi_qn_run_stops_at_vi_optimum_and_says_why():
    """vi_qn on the default problem reaches VI's optimum (plain VI's converged energy,
    computed independently); the run then stops, by the method's own test or as
    stalled, and the status says which — never 'running' at the fixed point."""
    s = LabSettings(method="vi_qn")
    live = LiveView(s, Status())
    assert live.rebuild()
    _ticks(live)
    st = live.runner.snapshot()["status"]
    assert st["stop"] in ("converged", "stalled")
    assert st["iteration"] < 10 * STALL_ITERS
    vi = compare_model.converge(live.problem, "vi", LabSettings(method="vi"))
    assert vi.converged
    np.testing.assert_allclose(st["energy"], vi.energy[-1], atol=1e-6)
    text = live.status_pane.object
    assert ("converged" in text or "stalled" in text) and "running" not in text


def test_an_engine_failure_while_building_is_shown_and_the_next_change_recovers(monkeypatch):
    """An exception the settings did not cause (once, under load, CPython's
    "SystemError: … bad argument to internal function" from JAX's tracing) left the page
    without a status line and without a run, silently; it is now named in the status
    and the run is off, and the next setting change builds again."""
    from bnlab.ui import live_model as live_module
    s = LabSettings()
    live = LiveView(s, Status())
    assert live.rebuild()

    def failing(problem, settings):
        raise SystemError("Objects/tupleobject.c:927: bad argument to internal function")
    monkeypatch.setattr(live_module, "make_runner", failing)
    s.lengthscale = 2.0
    assert live.runner is None and live.controls.run_button.disabled
    text = live.status_pane.object
    assert "could not be built" in text and "SystemError" in text and "bn-error" in text
    monkeypatch.undo()
    s.lengthscale = 1.5
    assert live.runner is not None and not live.controls.run_button.disabled
    assert "Method <b>vi</b>" in live.status_pane.object


def test_iteration_cap_stops_the_run_and_nothing_is_pushed_after():
    s = LabSettings(method="ep", rho=0.05, max_iters=7)
    live = LiveView(s, Status())
    assert live.rebuild()
    _ticks(live)
    assert live.runner.iteration == 7 and live.runner.stop_reason() == "cap"
    assert "cap reached" in live.status_pane.object and "(7)" in live.status_pane.object
    frames = []
    live.plots.update = lambda *a, **k: frames.append(1)
    live.running = True
    live.model.tick()                          # a stray tick after the stop: no step, no frame
    assert live.runner.iteration == 7 and frames == [] and not live.running
    assert "cap reached" in live.status_pane.object
    del live.plots.update
    s.max_iters = 9                       # a higher cap lets the same run go on
    assert live.runner.stop_reason() is None and live.runner.iteration == 7
    live.step(5)
    assert live.runner.iteration == 9


def test_pause_before_convergence_says_cancelled():
    s = LabSettings(method="ep", rho=0.05)
    live = LiveView(s, Status())
    assert live.rebuild()
    live.running = True
    live.model.tick()
    live.pause()
    assert "cancelled" in live.status_pane.object and not live.running


@pytest.mark.parametrize("method,how", [("laplace", "posterior that is not positive definite")])
def test_divergence_says_how(method, how):
    s = LabSettings(dataset="robust_1d", method=method, rho=1.0, lik_scale=0.05, df=2.0)
    live = LiveView(s, Status())
    assert live.rebuild()
    _ticks(live, 100)
    assert live.runner.stop_reason() == "diverged_posterior"
    assert "diverged" in live.status_pane.object and how in live.status_pane.object


def test_mcmc_reference_kept_across_method_alpha_rho_and_dropped_on_data_changes():
    s = LabSettings(method="vi")
    live = LiveView(s, Status())
    assert live.rebuild()
    live.mcmc.compute(live.problem, num_temps=30, num_chains=16)
    live.push()
    text = live.mcmc_pane.object
    assert live.mcmc_pane.visible and "effective sample size" in text
    assert f"{live.mcmc.ess:.0f}</b> of 16" in text and f"± {live.mcmc.log_z_se:.3f}" in text
    assert "ESS below 100" in text              # 16 chains cannot reach it
    band = live.plots.src["mcmc"].data["mean"]
    s.param.update(method="pep", alpha=0.3)
    s.rho = 0.9
    assert live.mcmc.samples is not None
    np.testing.assert_array_equal(live.plots.src["mcmc"].data["mean"], band)
    assert live.mcmc.next_schedule(live.problem) == 4 * 30      # a rough run is refined
    s.lengthscale = 2.0
    assert live.mcmc.samples is None and not live.mcmc_pane.visible
    assert len(live.plots.src["mcmc"].data["mean"]) == 0


def test_compare_runs_pep_at_its_own_alpha_and_the_table_says_so():
    """Sidebar method vi (α not its setting): Compare still runs pep at α = 0.5, as
    bnlab.infer does independently, and EP at α = 1; the table shows α and ρ."""
    import bnlab
    s = LabSettings(method="vi")
    view = compare.CompareView(s, method_a="pep", method_b="ep")
    view.run_pair()
    table = view.table.object
    assert "<td class='bn-alpha'>0.5</td>" in table and "1 (EP)" in table
    assert "<th>ρ</th>" in table and "<td>0.5</td>" in table
    p = build_problem(s)
    ref = {m: bnlab.infer(p.model, np.asarray(p.X), np.asarray(p.y), method=m, alpha=a,
                          damping=0.5, max_iters=500, tol=1e-8).log_marginal
           for m, a in (("pep", 0.5), ("ep", 1.0))}
    shown = [float(c.split("</td>")[0]) for c in table.split("<td class='bn-energy'>")[1:]]
    np.testing.assert_allclose(shown, [ref["pep"], ref["ep"]], atol=1e-3)
    assert abs(shown[0] - shown[1]) > 1e-3
    assert view.widgets["alpha_b"].disabled and not view.widgets["alpha_a"].disabled
    assert view.widgets["alpha_a"].visible and not view.widgets["alpha_b"].visible
    view.param.update(method_a="laplace", rho_a=0.9)
    view.run_pair()
    assert "<td class='bn-alpha'>—</td><td>0.9</td>" in view.table.object


def test_a_diverged_method_of_the_pair_has_no_band_and_no_energy():
    """Laplace on the outliers' Student-t likelihood diverges at its first Newton step
    (the outliers' curvature is positive: a posterior that is not PD). Its last valid
    iterate is the prior, whose band once stood beside EP's as if it were Laplace's
    posterior, with the prior's energy in the table."""
    import holoviews as hv
    s = LabSettings(dataset="robust_1d")
    view = compare.CompareView(s, method_a="laplace", method_b="ep", rho_a=0.5, rho_b=0.5)
    view.run_pair()
    assert view.snaps["laplace"]["status"]["diverged"]
    assert not view.snaps["ep"]["status"]["diverged"]
    energies = [c.split("</td>")[0] for c in view.table.object.split("<td class='bn-energy'>")[1:]]
    assert energies[0] == "—" and np.isfinite(float(energies[1]))
    band = view.pair_pane.object
    labels = {el.label for el in band}
    assert not any(lab.startswith("laplace") for lab in labels) and "ep ± 2σ" in labels
    assert "laplace diverged: no band" in band.opts.get().kwargs["title"]
    assert {el.label for el in view.pair_trace.object} == {"laplace (diverged)", "ep"}
    hv.render(band)


def test_alpha_sweep_on_outliers_marks_every_diverged_alpha_and_draws_no_band_for_it():
    """'Regression with outliers' with the sidebar's defaults: small α diverge (their
    posterior stops being PD) and so does VI. The curve has no point for them, a red ×
    each, the note names them, and neither their band nor VI's is drawn."""
    from bnlab.ui import alpha_plots, alpha_sweep
    s = LabSettings(dataset="robust_1d")
    sweep = alpha_sweep.alpha_sweep(build_problem(s), s)
    bad = [a for a, st in zip(sweep["alpha"], sweep["stop"]) if st.startswith("diverged")]
    assert bad and sweep["alpha"][0] in bad and 1.0 not in bad
    assert sweep["vi"]["stop"].startswith("diverged")
    note = alpha_sweep.sweep_note(sweep)
    assert "α = " + ", ".join(f"{a:g}" for a in bad) in note and "VI diverged" in note
    assert f"damping ρ = {s.rho:g}" in note           # the sidebar's, not the pair's
    i_bad = sweep["alpha"].index(bad[0])
    drawn = alpha_plots.sweep_layers(sweep)
    assert not set(bad) & set(drawn["curve"]["alpha"])
    np.testing.assert_array_equal(np.sort(drawn["diverged"]["alpha"]), np.sort(bad))
    shown = alpha_plots.alpha_layers(sweep, i_bad)
    assert len(shown["alpha"]["x"]) == 0 and len(drawn["vi"]["x"]) == 0    # no PEP, no VI band
    assert "diverged" in shown["title"] and len(drawn["ep"]["x"]) > 0
    ok = alpha_plots.alpha_layers(sweep, len(sweep["alpha"]) - 2)
    assert "α = 0.71" in ok["title"] and len(ok["alpha"]["x"]) > 0
    plots = alpha_plots.AlphaPlots()                 # the figures list what is drawn
    plots.show_sweep(sweep)
    plots.show(sweep, i_bad, alpha_plots.point_picture(sweep, i_bad, 0))
    legend = {item.label["value"] for fig in (plots.energy, plots.band)
              for item in fig.legend[0].items if item.visible}
    assert "diverged (no energy)" in legend and not {"VI ± 2σ", "Power EP(α) ± 2σ"} & legend
    # the per-point picture: an outlier by default; at a PEP fixed point of a full GP q
    # has the tilted distribution's mean and variance (q\ᵢ tᵢ^α = q) for every α
    from bnlab.studies.tilted import tilted_marginal
    p = sweep["problem"]
    i = alpha_sweep.surprising_point(sweep)
    assert abs(float(p.y[i]) - np.sin(float(p.x_plot[i]))) > 1.5
    for k in (sweep["alpha"].index(0.5), len(sweep["alpha"]) - 1):
        marginals, sites = sweep["states"][k]
        pic = tilted_marginal(p.model.likelihood, p.params["likelihood"], p.y[i], marginals,
                              sites, i, sweep["alpha"][k])
        np.testing.assert_allclose([pic["tilted_mean"], pic["tilted_var"]],
                                   [pic["q_mean"], pic["q_var"]], rtol=1e-4, atol=1e-6)
        drawn = alpha_plots.point_picture(sweep, k, i)
        assert len(drawn["q"]["f"]) and len(drawn["cavity"]["f"]) and len(drawn["tilted"]["f"])
    assert "diverged" in alpha_plots.point_picture(sweep, i_bad, i)["title"]


def test_alpha_sweep_without_divergence_has_no_diverged_legend_entry():
    """On the default problem every α converges: the energy plot's legend lists no
    "diverged" entry (an empty layer kept one, with no symbol beside it)."""
    from bnlab.ui import alpha_plots, alpha_sweep
    s = LabSettings()
    sweep = alpha_sweep.alpha_sweep(build_problem(s), s)
    assert not any(st.startswith("diverged") for st in sweep["stop"])
    plots = alpha_plots.AlphaPlots()
    plots.show_sweep(sweep)
    plots.show(sweep, 2, alpha_plots.point_picture(sweep, 2, 0))
    labels = {item.label["value"] for item in plots.energy.legend[0].items if item.visible}
    assert "Power EP(α)" in labels and not any("diverged" in lab for lab in labels)


def test_tilted_distribution_of_a_gaussian_likelihood_is_the_closed_form():
    """Gaussian likelihood: cavity N(mc, vc) × N(y | f, σ²)^α is Gaussian with
    precision 1/vc + α/σ² and mean (mc/vc + αy/σ²) / precision, at any state."""
    from bnlab.studies.tilted import tilted_marginal
    s = LabSettings(dataset="regression_1d", method="pep", alpha=0.3, lik_scale=0.05)
    p = build_problem(s)
    r = make_runner(p, s)
    r.step(2)
    st, i, a = r.state, 7, 0.3
    pic = tilted_marginal(p.model.likelihood, p.params["likelihood"], p.y[i], st.marginals,
                          st.sites, i, a)
    m, v = float(st.marginals.mean[i, 0]), float(st.marginals.cov[i, 0, 0])
    pc = 1 / v - a * float(st.sites.prec[i, 0, 0])
    mc = (m / v - a * float(st.sites.nat1[i, 0])) / pc
    prec = pc + a / 0.05
    np.testing.assert_allclose(pic["tilted_mean"], (pc * mc + a * float(p.y[i]) / 0.05) / prec,
                               rtol=1e-6)
    np.testing.assert_allclose(pic["tilted_var"], 1 / prec, rtol=1e-5)
    np.testing.assert_allclose(pic["q_mean"], m) and np.testing.assert_allclose(pic["q_var"], v)


@pytest.mark.parametrize("search,kept,bad", [
    ("?alpha=5&method=pep", {"method": "pep"}, "alpha"),
    ("?method=foo&kernel=rbf", {"kernel": "rbf"}, "method"),
    ("?n=-3&dataset=counts_1d", {"dataset": "counts_1d"}, "n"),
    ("?lengthscale=abc&variance=2.5", {"variance": 2.5}, "lengthscale"),
])
def test_a_bad_link_value_costs_only_itself_and_is_named_escaped(search, kept, bad):
    from bnlab.ui.settings import link_notice, parse_link
    good, errors = parse_link(search)
    assert good == kept and list(errors) == [bad]
    s = LabSettings()
    s.param.update(**good)                          # applies: every kept value is valid
    assert all(getattr(s, k) == v for k, v in kept.items())
    assert errors[bad][0] in link_notice(errors) and bad in link_notice(errors)
    good, errors = parse_link("?method=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E&alpha=0.3")
    assert good == {"alpha": 0.3}
    notice = link_notice(errors)
    assert "<img" not in notice and "&lt;img src=x onerror=alert(1)&gt;" in notice


def test_choosing_a_preset_opens_its_settings_and_links_keep_theirs():
    s = LabSettings()
    s.dataset = "product_1d"
    assert s.method == "ep"
    s.method = "laplace"                     # the user's choice survives leaving the preset
    s.dataset = "sparse_regression_1d"
    assert (s.model, s.num_inducing, s.method, s.alpha) == ("sparse", 6, "pep", 0.5)
    s.dataset = "classification_1d"         # what only the preset set goes back
    assert (s.model, s.method, s.rho, s.lik_scale) == ("full", "vi", 0.5, 0.1)
    s.apply_link({"dataset": "robust_1d", "method": "vi"})
    assert s.method == "vi"                  # a link's method wins over the preset's
    s.param.update(dataset="product_1d", kernel="rbf")
    assert s.method == "ep" and s.kernel == "rbf"


@pytest.mark.parametrize("dataset", [d for d in LabSettings.param.dataset.objects
                                     if d not in ("csv", "breast_cancer")])
def test_every_preset_converges_with_the_method_it_opens_with(dataset):
    s = LabSettings()
    s.dataset = dataset
    r = compare_model.converge(build_problem(s), s.method, s, max_iters=1000)
    assert r.stop_reason() == "converged", (s.method, r.stop_reason(), r.iteration)


def test_sparse_preset_is_where_alpha_matters():
    """VFE (α → 0) and FITC (α = 1) several nats apart, and their bands visibly so; the
    PEP energy in between (Bui et al. 2017: the PEP energy interpolates)."""
    s = LabSettings()
    s.dataset = "sparse_regression_1d"
    p = build_problem(s)
    runs = {a: compare_model.converge(p, "ep" if a == 1 else "pep", s, alpha=a) for a in (0.01, 0.5, 1)}
    e = {a: r.snapshot()["status"]["energy"] for a, r in runs.items()}
    assert e[1] - e[0.01] > 10 and e[0.01] < e[0.5] < e[1]
    m0, m1 = (runs[a].snapshot()["bands"]["f1"]["mean"] for a in (0.01, 1))
    assert np.abs(m0 - m1).max() > 0.05


def test_a_tap_on_two_neighbours_forms_the_pair_and_iteration_ticks_are_whole():
    s = LabSettings(method="vi")
    live = LiveView(s, Status())
    assert live.rebuild()
    live._on_tap("indices", [], [3])
    live._on_tap("indices", [3], [3, 4])         # the tap hit both neighbours
    assert live.selected == [3, 4] and len(live.plots.src["pair"].data["x"]) == 2
    live.show_all()
    assert live.plots.energy.xaxis[0].ticker.min_interval == 1
    assert live.panes["energy"].visible and not live.panes["gap"].visible   # the default


def _surface(data, schemes):
    """A log p(y)/n surface over 3 variances × 4 lengthscales (0.1 to 10, log-spaced)."""
    import xarray as xr
    return xr.Dataset({"log_marginal_per_n": (("scheme", "variance", "lengthscale"), data)},
                      coords={"scheme": schemes, "variance": np.geomspace(0.1, 10, 3),
                              "lengthscale": np.geomspace(0.1, 10, 4)})


def test_surfaces_offer_the_model_s_axes_mark_theta_and_label_the_colour_bar():
    import holoviews as hv
    from bnlab.ui.surface_plots import contour_layout
    from bnlab.ui.surfaces import SurfacesView
    from bnlab.ui.trajectories import Trajectory
    s = LabSettings()                                   # probit, Matérn: no noise, df, period
    view = SurfacesView(s)
    assert view.param.axis0.objects == ["lengthscale", "variance"]
    s.param.update(dataset="robust_1d", kernel="periodic")
    assert set(view.param.axis0.objects) == {"lengthscale", "variance", "period", "scale", "df"}
    view.methods.value = ["vi", "pep"]
    assert "alpha" in view.param.axis1.objects
    ds = _surface(np.random.default_rng(0).normal(size=(1, 3, 4)), ["vi"])
    path = Trajectory({"variance": np.array([1.0, 2.0]), "lengthscale": np.array([1.0, 3.0])},
                      "#ff7f0e", "converged")
    layout = contour_layout(ds, trajectories={"joint ELBO (VI)": path},
                            current={"variance": 2.0, "lengthscale": 0.5})
    panel = list(layout)[0]
    star = [el for el in panel
            if el.group == "Points" and el.opts.get().kwargs.get("marker") == "star"]
    np.testing.assert_allclose(star[0].array()[0], np.log10([0.5, 2.0]))
    fig = hv.render(panel)
    labels = [item.label["value"] for legend in fig.legend for item in legend.items]
    assert labels == ["joint ELBO (VI)"]
    bars = [r for r in fig.below if type(r).__name__ == "ColorBar"]
    assert bars and bars[0].title == "log p(y) / n"


def test_the_star_follows_the_sidebar_without_drawing_the_panels_again():
    """A hyperparameter moved in the sidebar moves the ★ on every panel of the page (to
    log10 of the new value) and leaves the panels as drawn: redrawing them, contours and
    all, is the slow part of the page."""
    import panel as pn
    from bokeh.document import Document
    from bokeh.models import GlyphRenderer, Scatter
    from bnlab.ui.surfaces import SurfacesView
    s = LabSettings(lengthscale=1.0, variance=1.0)
    view = SurfacesView(s)
    view.dataset = _surface(np.random.default_rng(1).normal(size=(2, 3, 4)), ["vi", "ep"])
    doc = Document()
    doc.add_root(pn.Column(view.contours).get_root(doc))
    view.draw()
    drawn = view.contours.object

    def stars(doc):
        return [(np.asarray(r.data_source.data["log10 lengthscale"], float).tolist(),
                 np.asarray(r.data_source.data["log10 variance"], float).tolist())
                for r in doc.select({"type": GlyphRenderer})
                if isinstance(r.glyph, Scatter) and r.glyph.marker == "star"]
    assert stars(doc) == [([0.0], [0.0])] * 2
    s.param.update(lengthscale=2.0, variance=0.5)
    assert view.contours.object is drawn
    np.testing.assert_allclose(np.array(stars(doc), float).reshape(2, 2),
                               [np.log10([2.0, 0.5])] * 2)
    # drawn again later (the Surfaces page shown again after θ moved): at the new θ
    s.lengthscale = 4.0
    again = Document()
    again.add_root(pn.Column(view.contours).get_root(again))
    np.testing.assert_allclose(np.array(stars(again), float).reshape(2, 2),
                               [np.log10([4.0, 0.5])] * 2)


def test_the_alpha_explorers_energy_has_its_own_scale_beside_the_pairs_trace():
    """Both plots show "energy": Panel linked their axes, and the converged energies of
    the α sweep (spread over a few hundredths here) were drawn on the pair's
    energy-per-iteration scale (≈ 20 wide), as a flat line."""
    import panel as pn
    from bokeh.document import Document
    from bokeh.models import Plot
    view = compare.CompareView(LabSettings())
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    view.run_pair()
    view.run_sweep()
    figs = {f.title.text: f for f in doc.select({"type": Plot}) if f.title is not None}
    alpha, trace = figs["Converged energy against α"], figs["Energy per iteration"]
    span = lambda r: r.end - r.start                      # noqa: E731
    assert alpha.y_range is not trace.y_range
    assert span(alpha.y_range) < span(trace.y_range) / 10


def test_a_new_slice_row_draws_the_slice_alone():
    """The slice row's slider redraws the slice plot, at that row of every method, and
    leaves the contour panels as drawn (redrawing them is the slow part of the page)."""
    from bnlab.ui.surfaces import SurfacesView
    view = SurfacesView(LabSettings())
    data = np.random.default_rng(2).normal(size=(2, 3, 4))
    view.dataset = _surface(data, ["vi", "ep"])
    view.draw()
    drawn = view.contours.object
    view.slice.param.update(end=2, value=2)
    assert view.contours.object is drawn
    for k, curve in enumerate(view.slice_pane.object):
        np.testing.assert_allclose(curve.dimension_values(1), data[k, 2])
    assert "variance = 10" in view.slice_pane.object.opts.get().kwargs["title"]


@pytest.mark.parametrize("best_row", [0, 1])
def test_a_computed_surface_draws_its_slice_once_at_the_best_row(monkeypatch, best_row):
    """The slice opens on the best cell's row, drawn once whether that row is the one
    the slider was on (1, the middle) or not."""
    import bnlab
    from bnlab.ui.surfaces import SurfacesView
    data = np.random.default_rng(3).normal(size=(2, 3, 4))
    data[0, best_row, 2] = 10.0
    monkeypatch.setattr(bnlab, "surface", lambda *a, **kw: _surface(data, ["vi", "ep"]))
    view = SurfacesView(LabSettings(), axis0="variance", axis1="lengthscale", points=3)
    view.slice.value = 1
    drawn = []
    view.slice_pane.param.watch(lambda e: drawn.append(e.new), "object")
    view.compute()
    assert view.slice.value == best_row and len(drawn) == 1
    for k, curve in enumerate(drawn[0]):
        np.testing.assert_allclose(curve.dimension_values(1), data[k, best_row])
    assert view.contours.object is not None


def test_energy_gap_view_shows_the_distance_to_the_latest_energy_on_a_log_axis():
    s = LabSettings(method="ep")
    live = LiveView(s, Status())
    assert live.rebuild()
    live.step(6)
    e = np.asarray(live.runner.energy)
    gap = live.plots.src["gap"].data
    np.testing.assert_allclose(gap["gap"], np.abs(e[:-1] - e[-1])[np.abs(e[:-1] - e[-1]) > 0])
    live.gap_toggle.value = True       # before the page has the energy plots (show_all)
    live.show_all()
    assert live.plots.gap.y_scale.__class__.__name__ == "LogScale"
    assert live.panes["gap"].visible and not live.panes["energy"].visible
    live.gap_toggle.value = False
    assert not live.panes["gap"].visible and live.panes["energy"].visible


def test_surfaces_run_pep_at_the_sidebar_alpha_whatever_the_sidebar_method(monkeypatch):
    """As in Compare: a pep surface is PEP at the sidebar's α even while the sidebar's
    own method (vi) has no α; ep stays α = 1 inside bnlab.surface."""
    import bnlab
    from bnlab.ui.surfaces import SurfacesView
    seen = {}

    def fake_surface(model, X, y, **kw):
        seen.update(kw)
        raise ValueError("stop here")
    monkeypatch.setattr(bnlab, "surface", fake_surface)
    s = LabSettings(method="vi", alpha=0.3)
    view = SurfacesView(s)
    view.methods.value = ["ep", "pep"]
    view.compute()
    assert seen["alpha"] == 0.3 and "stop here" in view.message.object


def test_surfaces_run_mcmc_at_the_chosen_schedule(monkeypatch):
    """The MCMC temperatures control shows only while MCMC is among the methods, and its
    value is AIS's schedule in ``bnlab.surface``."""
    import bnlab
    from bnlab.ui.surfaces import MCMC_TEMPS, SurfacesView
    seen = {}

    def fake_surface(model, X, y, **kw):
        seen.update(kw)
        raise ValueError("stop here")
    monkeypatch.setattr(bnlab, "surface", fake_surface)
    view = SurfacesView(LabSettings())
    assert not view.mcmc_temps_widget.visible
    view.methods.value = ["vi", "mcmc"]
    assert view.mcmc_temps_widget.visible and view.mcmc_temps == 1000
    view.mcmc_temps_widget.value = MCMC_TEMPS[1]
    view.compute()
    assert seen["mcmc_options"] == {"num_temps": 4000}
    view.methods.value = ["vi"]
    assert not view.mcmc_temps_widget.visible


def test_results_computed_with_other_settings_say_so():
    """Compare's pair and sweep and the Surfaces page stay on screen after the sidebar
    changes: a note names each setting they depend on that changed (with its value
    then) until they are computed again; settings they do not read (the pair's α and ρ
    are its own, a surface's axes are its grid) raise no note (the ★ follows the
    sidebar's axes: ``test_the_star_follows_the_sidebar_without_drawing_the_panels_again``)."""
    from bnlab.ui.surfaces import SurfacesView
    s = LabSettings()
    view = compare.CompareView(s)
    view.run_pair()
    assert view.snaps and not view.pair_made.note.visible
    s.rho = 0.7                                   # the pair runs at its own ρ
    assert not view.pair_made.note.visible
    s.lengthscale = 2.0
    assert view.pair_made.note.visible
    assert "lengthscale was “1.0”" in view.pair_made.note.object
    view.run_pair()
    assert not view.pair_made.note.visible
    assert "rho" in view.sweep_made.names          # the sweep runs at the sidebar's ρ
    surfaces = SurfacesView(s)
    surfaces.methods.value = ["vi"]
    surfaces.param.update(axis0="variance", axis1="lengthscale", points=3)
    surfaces.compute()
    assert surfaces.dataset is not None and not surfaces.made.note.visible
    s.lengthscale = 0.5                           # an axis of the grid: the ★ moves
    assert not surfaces.made.note.visible
    s.kernel = "matern32"
    assert surfaces.made.note.visible and "kernel was “matern52”" in surfaces.made.note.object
    assert view.pair_made.note.visible             # the pair depends on it too
    s.kernel = "matern52"                          # back as computed: no note
    assert not surfaces.made.note.visible
    s.dataset = "counts_1d"
    assert "dataset was “classification_1d”" in surfaces.made.note.object


def _layers(overlay, label):
    return [el for el in overlay if el.label == label]


def test_compare_overlays_the_live_pages_mcmc_reference_of_its_own_problem_only():
    """Gaussian regression, where Power EP at every α and VI are exact (a Gaussian site
    is the likelihood term itself): the MCMC reference computed on the Live page and
    drawn by the Compare page must lie on them, log p(y) within 3 standard errors of
    every α's energy and MCMC's band on the sweep's (an overlay at the wrong points
    or of another problem would not). Computed after the sweep, it is drawn at once;
    a reference of other hyperparameters is not drawn."""
    import bnlab.ui
    lab = bnlab.ui.Lab()
    lab.settings.param.update(dataset="regression_1d", likelihood="gaussian")
    view = lab.compare
    view.run_sweep()
    drawn = view.explorer.plots.src                  # the α explorer's Bokeh sources
    assert not len(drawn["mcmc"].data["x"])
    lab.live.compute_mcmc()
    lab.live.compute_mcmc()              # a rough reference is refined by a second press
    ref = lab.live.mcmc
    assert ref.ess >= 100, ref.ess
    energies = np.asarray(view.sweep["energy"])
    assert np.ptp(energies) < 1e-6 and abs(energies[0] - ref.log_z) < 3 * ref.log_z_se + 0.01
    lines = {float(v) for key in ("logz", "vi_line") for v in drawn[key].data["energy"]}
    assert lines == {ref.log_z, view.sweep["vi"]["energy"]}
    mcmc = drawn["mcmc"].data
    x = mcmc["x"]
    exact = view.sweep["bands"][-1]
    sd = np.interp(x, exact["x"], exact["upper"] - exact["lower"]) / 4
    assert np.mean(np.abs(mcmc["mean"] - np.interp(x, exact["x"], exact["mean"]))) \
        < 0.2 * np.mean(sd)
    mc_sd = (mcmc["upper"] - mcmc["lower"]) / 4
    assert abs(np.mean(mc_sd) / np.mean(sd) - 1) < 0.15
    histogram = [item for item in view.explorer.plots.point.legend[0].items
                 if item.label["value"] == f"MCMC p(fᵢ | y), ESS {ref.ess:.0f}"]
    assert histogram and len(drawn["histogram"].data["top"]) > 0
    # log p(y) stays on the plot when it lies above every energy (EP's on skewed data)
    from bnlab.ui.alpha_plots import AlphaPlots
    truth = dict(ref.truth_for(view.sweep["problem"]), log_z=energies[0] + 1.0)
    plots = AlphaPlots()
    plots.show_sweep(view.sweep, truth)
    fig = plots.energy
    assert fig.y_range.start < energies[0] and energies[0] + 1.0 < fig.y_range.end
    view.run_pair()
    assert _layers(view.pair_pane.object, "MCMC ± 2σ")
    lab.settings.lengthscale = 2.0            # another posterior: the Live page drops it
    view.run_sweep()
    view.run_pair()
    assert not len(drawn["mcmc"].data["x"])
    assert not _layers(view.pair_pane.object, "MCMC ± 2σ")
    lab.close()


def test_surface_cells_where_a_method_diverged_have_no_value_on_the_page():
    """Student-t regression with outliers at ρ = 0.7: EP's cavities lose positive-
    definiteness at some cells, where ``bnlab.surface`` keeps the last valid iterate's
    energy (flagged ``diverged``). The panels and the slice draw no value there (grey),
    the best cell's × ignores them, and the note counts them; a cell stopped by the
    iteration cap is drawn, and named as not converged."""
    import holoviews as hv

    import bnlab
    from bnlab.ui.surface_plots import NO_VALUE, contour_layout, convergence_note, slice_plot
    p = build_problem(LabSettings(dataset="robust_1d", likelihood="student_t", df=4.0,
                                  lik_scale=0.1, kernel="matern52"))
    ds = bnlab.surface(p.model, p.X, p.y, methods=["vi", "ep"], params=p.params,
                       damping=0.7, grid={"variance": np.logspace(0, 1, 3),
                                          "lengthscale": np.logspace(-1, 0.5, 3)})
    bad = ds["diverged"].sel(scheme="ep").values
    raw = ds["log_marginal_per_n"].sel(scheme="ep").values
    assert bad.any() and not ds["diverged"].sel(scheme="vi").values.any()
    panels = list(contour_layout(ds))
    ep_image = next(el for el in panels[1] if isinstance(el, hv.Image))
    drawn = ep_image.dimension_values(2)
    assert np.isnan(drawn).sum() == bad.sum()
    np.testing.assert_allclose(np.sort(drawn[np.isfinite(drawn)]), np.sort(raw[~bad]))
    cross = next(el for el in panels[1] if isinstance(el, hv.Points))
    best = np.unravel_index(np.nanargmax(np.where(bad, np.nan, raw)), raw.shape)
    assert tuple(cross.array()[0]) == (np.log10(ds["lengthscale"].values[best[1]]),
                                      np.log10(ds["variance"].values[best[0]]))
    row = int(np.argmax(bad.sum(axis=1)))
    ep_slice = list(slice_plot(ds, slice_index=row))[1]
    assert np.array_equal(np.isnan(ep_slice.dimension_values(1)), bad[row])
    note = convergence_note(ds, 200)
    assert f"ep diverged</b> at {bad.sum()} of 9 cells" in note
    capped = (~ds["converged"].sel(scheme="ep").values & ~bad).sum()
    assert (f"ep not converged</b> within 200 iterations at {capped} of 9" in note) == bool(capped)
    assert "vi diverged" not in note
    from bokeh.models import LinearColorMapper
    mappers = hv.render(panels[1]).select({"type": LinearColorMapper})
    assert [m.nan_color for m in mappers if len(m.palette) > 1] == [NO_VALUE]   # the image's


def test_surface_progress_says_how_long_is_left(monkeypatch):
    """Before the first grid point is done the line says the programs compile; once a
    fraction f is done after t seconds, about t (1 − f) / f are left; after the compute
    the line is gone."""
    import time

    import bnlab
    from bnlab.ui.surfaces import SurfacesView
    lines = []

    def fake_surface(model, X, y, progress, **kw):
        lines.append(view.time_left.object)
        time.sleep(0.2)
        progress(0.25)
        lines.append(view.time_left.object)
        raise ValueError("stop here")
    monkeypatch.setattr(bnlab, "surface", fake_surface)
    view = SurfacesView(LabSettings())
    view.compute()
    assert "compile" in lines[0]
    left = float(lines[1].split("about ")[1].split(" s left")[0])
    assert lines[1].startswith("25 %") and 0.6 <= left <= 6      # 3 × (0.2 s and a little)
    assert view.time_left.object == ""
