"""The lab's components without a browser: settings → problem → runner → plot data,
checked against closed forms and limits that do not go through the UI code."""
import holoviews as hv
import numpy as np
import pytest
import xarray as xr
from scipy.stats import norm

import bnlab
from bnlab.ui.compare_model import converge
from bnlab.ui.controls import Controls, Status
from bnlab.ui.live import LiveView
from bnlab.ui.live_plots import BAD, FRAMES, REJECTED, psd_colours
from bnlab.ui.problem import SettingError, build_problem
from bnlab.ui.runner import ellipse_points, make_runner
from bnlab.ui.settings import URL_PARAMS, LabSettings
from bnlab.ui.surface_plots import contour_layout, slice_plot


def _gp_regression(X, y, Xs, ell, var, noise):
    """Exact GP regression with a Matérn-5/2 kernel (R&W eqs. 2.25–2.26) in numpy."""
    def k(a, b):
        r = np.abs(a[:, None, 0] - b[None, :, 0]) / ell
        return var * (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)
    A = k(X, X) + noise * np.eye(len(X))
    Ks = k(X, Xs)
    mean = Ks.T @ np.linalg.solve(A, y)
    cov = k(Xs, Xs) - Ks.T @ np.linalg.solve(A, Ks)
    sign, logdet = np.linalg.slogdet(A)
    lml = -0.5 * (y @ np.linalg.solve(A, y) + logdet + len(y) * np.log(2 * np.pi))
    return mean, np.diag(cov), lml


def test_default_problem_is_the_classification_preset():
    s = LabSettings()
    p = build_problem(s)
    ds = bnlab.datasets.load("classification_1d")
    np.testing.assert_array_equal(np.asarray(p.X), ds.X)
    np.testing.assert_array_equal(np.asarray(p.y), ds.y)
    assert p.likelihood == "probit" and p.input_dim == 1
    assert p.xs_plot.min() < ds.X.min() and p.xs_plot.max() > ds.X.max()


@pytest.mark.parametrize("method", ["vi", "ep", "laplace"])
def test_band_and_energy_equal_exact_gp_regression(method):
    """Gaussian likelihood: every method's converged band and energy are the exact
    posterior and log marginal likelihood (one full step is exact)."""
    s = LabSettings(dataset="regression_1d", method=method, rho=1.0, lik_scale=0.05,
                    lengthscale=0.7, variance=1.3)
    p = build_problem(s)
    r = make_runner(p, s)
    r.step(3)
    snap = r.snapshot()
    X, y = np.asarray(p.X), np.asarray(p.y)
    mean, var, lml = _gp_regression(X, y, np.asarray(p.Xs), 0.7, 1.3, 0.05)
    b = snap["bands"]["f1"]
    np.testing.assert_allclose(b["mean"], mean, atol=1e-6)
    np.testing.assert_allclose((b["upper"] - b["lower"]) / 4, np.sqrt(var), atol=1e-6)
    np.testing.assert_allclose(snap["trace"]["energy"][-1], lml, rtol=1e-7)
    pred = snap["predictive"]
    np.testing.assert_allclose((pred["upper"] - pred["lower"]) / 4, np.sqrt(var + 0.05), atol=1e-6)


def test_classification_predictive_is_probit_of_band():
    s = LabSettings(method="ep")
    r = make_runner(build_problem(s), s)
    r.step(20)
    snap = r.snapshot()
    b = snap["bands"]["f1"]
    v = ((b["upper"] - b["lower"]) / 4) ** 2
    np.testing.assert_allclose(snap["predictive"]["mean"], norm.cdf(b["mean"] / np.sqrt(1 + v)),
                               atol=1e-10)
    assert snap["predictive"]["kind"] == "probability"


def test_trace_psd_strip_and_sites_follow_steps():
    s = LabSettings(method="ep")
    r = make_runner(build_problem(s), s)
    before = r.snapshot()
    r.step(4)
    after = r.snapshot()
    assert len(after["trace"]["energy"]) == 5 and after["status"]["iteration"] == 4
    assert not np.allclose(before["bands"]["f1"]["mean"], after["bands"]["f1"]["mean"])
    assert after["psd"]["posterior_psd"].all()
    # EP on probit: site precisions are positive; sites are sorted by x for plotting
    assert (after["sites"]["prec"] > 0).all()
    assert np.all(np.diff(after["sites"]["x"]) >= 0)
    r.reset()
    assert r.snapshot()["status"]["iteration"] == 0


def test_diverged_run_is_recorded_not_raised():
    s = LabSettings(dataset="robust_1d", method="laplace", rho=1.0, lik_scale=0.05, df=2.0)
    r = make_runner(build_problem(s), s)
    r.step(10)
    snap = r.snapshot()
    assert snap["status"]["diverged"]
    assert not snap["psd"]["posterior_psd"][-1]
    assert r.step(5) == 0                 # a diverged run stays at its last PSD iterate
    assert np.isfinite(snap["bands"]["f1"]["mean"]).all()
    colours = psd_colours(snap["psd"]["posterior_psd"], snap["psd"]["posterior_psd"],
                          snap["psd"]["accepted"], diverged=True)
    assert colours[len(snap["psd"]["accepted"]) - 1] == BAD    # the step that ended it: red


def test_psd_strip_tells_a_rejected_proposal_from_an_invalid_iterate():
    """The heteroscedastic preset under VI converges, with Anderson-mixed proposals
    whose posterior was not PD along the way. Each such step left the sites as they
    were (checked on the state, not on the flags), so the strip draws it amber, never
    red, and the status does not claim ρ changed (a mixed step is rejected without
    halving it)."""
    s = LabSettings(dataset="heteroscedastic_1d")
    s.method = "vi"
    r = make_runner(build_problem(s), s)
    invalid_proposals = 0
    while r.stop_reason() is None:
        before = [np.array(leaf) for leaf in (r.state.sites.nat1, r.state.sites.prec)]
        r.step(1)
        q = r.snapshot()["psd"]
        if not (q["posterior_psd"][-1] and q["cavity_psd"][-1]):
            invalid_proposals += 1
            after = (r.state.sites.nat1, r.state.sites.prec)
            assert all(np.array_equal(b, np.asarray(a)) for b, a in zip(before, after))
    snap = r.snapshot()
    assert snap["status"]["stop"] == "converged" and invalid_proposals >= 3
    q = snap["psd"]
    colours = psd_colours(q["posterior_psd"], q["cavity_psd"], q["accepted"],
                          snap["status"]["diverged"])
    assert BAD not in colours and colours.count(REJECTED) >= invalid_proposals
    live = LiveView(s, Status())
    live.runner, live.problem = r, r.problem
    live.show_status(snap["status"])
    text = live.status_pane.object
    assert "rejected by the safeguards" in text and "ρ reduced" not in text   # ρ as set
    assert "is not taken: the iterate stays" in text       # in words a student reads
    # a cavity that is not PD at an accepted iterate is a fact about the iterate: red
    assert psd_colours([True, True], [True, False], [True, True], False)[3] == BAD


def test_joint_view_ellipse_is_the_two_sigma_contour():
    s = LabSettings(method="vi")
    r = make_runner(build_problem(s), s)
    r.step(10)
    view = r.joint_view(3, 9)
    m, C = view["mean"], view["cov"]
    d = view["ellipse"] - m
    q = np.einsum("na,ab,nb->n", d, np.linalg.inv(C), d)
    np.testing.assert_allclose(q, 4.0, rtol=1e-9)
    np.testing.assert_allclose(view["corr"], C[0, 1] / np.sqrt(C[0, 0] * C[1, 1]))
    np.testing.assert_allclose(ellipse_points([0, 0], np.eye(2), 1.0)[0], [1, 0])


def test_gkl_full_covariance_reaches_the_vi_optimum():
    """Full-covariance G-KL and natural-gradient VI maximise the same ELBO."""
    vi = LabSettings(method="vi", rho=1.0)
    p = build_problem(vi)
    r_vi = converge(p, "vi", vi)
    g = LabSettings(method="gkl", covariance="full")
    r_g = make_runner(p, g)
    r_g.step(1)
    assert r_g.converged or r_g.iteration > 0
    np.testing.assert_allclose(r_g.energy[-1], r_vi.energy[-1], rtol=1e-4)


def test_step_control_reaches_the_elbo_optimum_where_fixed_step_vi_cycles():
    """σ² = 1000: CVI with a fixed ρ = 0.5 cycles below the ELBO's maximum (G-KL's
    full-covariance optimum); the lab's default step control converges to it and the
    status says how many steps it rejected; with Anderson acceleration (the default) it
    gets there in fewer iterations. The step control is disabled, with a reason, for
    methods that do not ascend the ELBO; acceleration for methods it does not serve, and
    for CVI without the step control."""
    s = LabSettings(method="vi", lengthscale=0.3, variance=1e3)
    p = build_problem(s)
    ctrl = converge(p, "vi", LabSettings(method="vi", lengthscale=0.3, variance=1e3,
                                         accelerate=False))
    fast = converge(p, "vi", s)
    fixed = converge(p, "vi", LabSettings(method="vi", lengthscale=0.3, variance=1e3,
                                          backtrack=False))
    g = make_runner(p, LabSettings(method="gkl", lengthscale=0.3, variance=1e3))
    g.step(1)
    assert ctrl.converged and not fixed.converged
    np.testing.assert_allclose(ctrl.energy[-1], g.energy[-1], atol=1e-5)
    assert fast.converged and fast.iteration < ctrl.iteration
    np.testing.assert_allclose(fast.energy[-1], g.energy[-1], atol=1e-5)
    assert fixed.energy[-1] < g.energy[-1] - 0.5
    st = ctrl.snapshot()["status"]
    assert st["rejected"] >= 1 and st["step_size"] <= 0.25
    live = LiveView(s, Status())
    live.show_status(st)
    assert f"ρ reduced to <b>{st['step_size']:.3g}</b>" in live.status_pane.object
    ep = LabSettings(method="ep").reasons()
    assert "backtrack" in ep and "covariance" in ep and "band" in ep
    assert "backtrack" not in s.reasons() and "covariance" in s.reasons()
    assert "backtrack" in LabSettings(method="gkl").reasons()
    assert "accelerate" not in ep and "accelerate" not in s.reasons()
    for method in ("vi_riemann", "laplace_gn", "gkl"):
        assert "accelerate" in LabSettings(method=method).reasons()
    # CVI's mixed steps are guarded by the ELBO test, EP's by a residual test
    assert "accelerate" in LabSettings(method="vi", backtrack=False).reasons()
    assert "accelerate" not in LabSettings(method="ep", backtrack=False).reasons()


def test_pep_small_alpha_approaches_vi():
    """Power EP tends to VI as α → 0 (Bui et al. 2017; Wilkinson et al. 2023 §4.3)."""
    s = LabSettings(method="pep")
    p = build_problem(s)
    vi = converge(p, "vi", s)
    pep = converge(p, "pep", s, alpha=0.01)
    ep = converge(p, "ep", s, alpha=1.0)
    assert abs(pep.energy[-1] - vi.energy[-1]) < 0.1 * abs(ep.energy[-1] - vi.energy[-1]) + 1e-3


def test_reasons_disable_what_does_not_apply():
    s = LabSettings(method="vi")
    r = s.reasons(1)
    assert "alpha" in r and "covariance" in r and "period" in r and "lik_scale" in r
    s.method = "pep"
    assert "alpha" not in s.reasons(1) and s.effective_alpha() == s.alpha
    s.method = "ep"
    assert s.effective_alpha() == 1.0
    s.kernel = "rbf"
    assert "Matérn" in s.model_reasons(1).get("markov", "")
    s.kernel = "matern32"
    assert "1-D" in s.model_reasons(30).get("markov", "")
    s.param.update(dataset="regression_1d", method="gkl", covariance="full")
    r = s.reasons(1)
    assert "cubature_order" in r and "rho" in r and "band" in r and "covariance" not in r


def test_breast_cancer_bands_use_a_projection():
    s = LabSettings(dataset="breast_cancer", method="laplace")
    p = build_problem(s)
    assert p.input_dim == 30 and "projection" in p.x_label
    assert np.all(np.diff(p.xs_plot) >= 0) and len(p.xs_plot) == len(p.x_plot)


def test_bad_csv_and_misfit_labels_name_their_control():
    s = LabSettings(dataset="csv", csv_text="a,b\n1,2\nx,3\n")
    with pytest.raises(SettingError, match="non-numeric") as e:
        build_problem(s)
    assert e.value.control == "csv"
    s.csv_text = "x,label\n0.1,0\n0.5,1\n0.9,1\n"
    s.likelihood = "probit"
    with pytest.raises(SettingError, match=r"labels in \{-1, 1\}") as e:
        build_problem(s)
    assert e.value.control == "likelihood"


def test_controls_show_reasons_and_errors():
    s, st = LabSettings(method="vi"), Status()
    c = Controls(s, st)
    assert not c.rows["alpha"].visible            # α means nothing for VI: not shown
    s.method = "pep"
    assert c.rows["alpha"].visible and not c.hints["alpha"].visible
    st.errors = {"likelihood": "these data do not fit"}
    assert "bn-error" in c.hints["likelihood"].object and c.hints["likelihood"].visible
    assert "sparse" not in c.widgets["model"].disabled_options


def test_the_chosen_method_is_named_in_full_under_its_box():
    """The sidebar's method box shows its first ≈ 45 characters; the line under it holds
    the whole description from the method's record, and an error replaces it."""
    from bnlab.methods import REGISTRY
    s, st = LabSettings(method="laplace_riemann"), Status()
    c = Controls(s, st)
    full = REGISTRY["laplace_riemann"].description
    assert len(f"laplace_riemann — {full}") > 60
    assert c.hints["method"].visible and full in c.hints["method"].object
    s.method = "pep"
    assert REGISTRY["pep"].description in c.hints["method"].object
    st.errors = {"method": "cannot run"}
    assert "bn-error" in c.hints["method"].object
    assert REGISTRY["pep"].description not in c.hints["method"].object


def test_divergence_by_a_non_pd_cavity_is_named_in_the_status():
    """Undamped EP on a Student-t problem with outliers (the problem of
    tests/engine/test_engine_psd.py, where the proposal's cavity is checked densely) loaded as
    a CSV: the status names the cavity, and reports the energy of the iterate it shows
    rather than the NaN of the rejected step."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 16))
    y = np.sin(X) + 0.05 * rng.standard_normal(16)
    y[rng.choice(16, 3, replace=False)] += rng.choice([-3.0, 3.0], 3)
    csv = "x,y\n" + "\n".join(f"{a:.17g},{b:.17g}" for a, b in zip(X, y))
    s = LabSettings(dataset="csv", csv_text=csv, likelihood="student_t", lik_scale=0.05,
                    df=3.0, kernel="matern32", lengthscale=0.7, method="ep", rho=1.0,
                    accelerate=False)
    live = LiveView(s, Status())
    assert live.rebuild()
    live.step(40)
    st = live.runner.snapshot()["status"]
    assert st["diverged"] and st["last_step_psd"] and not st["last_step_cavity_psd"]
    assert "cavity that is not positive definite" in live.status_pane.object
    assert np.isnan(live.runner.energy[-1])
    assert np.isfinite(st["energy"]) and st["energy"] == live.runner.energy[-2]


def test_live_view_step_updates_plot_sources_and_bad_settings_leave_no_run():
    """Steps reach the plot sources; settings that cannot be built (a bad CSV, a Markov
    GP with an RBF kernel) name their control, keep the settings, and leave no run:
    the plots are emptied and Run / Step are off and do nothing, where they went on
    with the previous model under the new settings' names."""
    s, st = LabSettings(method="ep"), Status()
    live = LiveView(s, st)
    assert live.rebuild()
    src = live.plots.src
    m0 = np.array(src["f1"].data["mean"])
    live.step(3)
    assert len(src["energy"].data["energy"]) == 4
    assert not np.allclose(m0, src["f1"].data["mean"])
    live.select_pair(1, 4)
    assert len(src["ellipse"].data["a"]) > 0 and len(src["pair"].data["x"]) == 2
    runner = live.runner
    s.param.update(dataset="csv", csv_text="a,b\n1,oops\n")     # bad CSV: error, no run
    assert "csv" in st.errors and s.csv_text == "a,b\n1,oops\n"
    _assert_no_run(live)
    s.param.update(dataset="classification_1d", csv_text="")
    assert st.errors == {} and live.runner is not None and live.runner is not runner
    assert not live.controls.run_button.disabled and len(src["f1"].data["mean"]) > 0
    live.step(2)
    s.param.update(model="markov", kernel="rbf")               # the audit's combination
    assert "kernel" in st.errors or "model" in st.errors
    _assert_no_run(live)
    assert "Matérn" in live.status_pane.object
    s.kernel = "matern32"                                       # fixed: a fresh run
    assert st.errors == {} and live.runner.snapshot()["status"]["iteration"] == 0
    assert not (live.controls.run_button.disabled or live.controls.step_button.disabled)


def _assert_no_run(live):
    assert live.runner is None and live.problem is None
    assert all(len(next(iter(src.data.values()))) == 0
               for key, src in live.plots.src.items() if key not in FRAMES)
    assert _framed(live.plots) == set(FRAMES)
    c = live.controls
    assert c.run_button.disabled and c.step_button.disabled and c.reset_button.disabled
    live.run()
    live.step(3)
    assert not live.running and live.runner is None


def _legend_labels(figure):
    return {item.label.value for item in figure.legend[0].items if item.visible}


def test_legends_list_only_what_has_data():
    s, st = LabSettings(method="vi"), Status()
    early = LiveView(LabSettings(method="vi"), Status())
    assert early.rebuild()
    assert not early.plots.built                # the first page has the band only
    early.select_pair(1, 4)
    early.show_all()                            # the other figures come labelled as asked
    assert _legend_labels(early.plots.joint) == {"q: 2σ ellipse", "q mean"}
    assert early.plots.joint.title.text.startswith("q(f1, f4): correlation")
    assert early.plots.predictive.xaxis[0].axis_label == early.problem.x_label

    live = LiveView(s, st)
    assert live.rebuild()
    live.show_all()
    band, joint = live.plots.band, live.plots.joint
    assert _legend_labels(band) == {"latent f1 ± 2σ", "latent f1 mean", "data"}
    assert _legend_labels(joint) == set()
    live.select_pair(1, 4)
    assert _legend_labels(band) == {"latent f1 ± 2σ", "latent f1 mean", "data", "chosen pair"}
    assert _legend_labels(joint) == {"q: 2σ ellipse", "q mean"}
    s.param.update(dataset="heteroscedastic_1d")            # two latents: f2 has a band
    assert st.errors == {}
    assert {"latent f2 ± 2σ", "latent f2 mean"} <= _legend_labels(band)
    assert "of f1" in live.plots.site_prec.title.text      # the sites shown: f1's
    s.param.update(dataset="classification_1d")
    assert "of f1" not in live.plots.site_prec.title.text
    assert not {"MCMC ± 2σ", "MCMC mean"} & _legend_labels(band)


def _framed(plots):
    return {key for key in FRAMES if len(plots.src[key].data[next(iter(plots.src[key].data))])}


def test_figures_are_framed_exactly_while_they_have_no_data():
    """A figure with no data has no automatic range in Bokeh (NaN: axes with no ticks, a
    console warning at every render), so it is framed by a fixed extent until its data
    come; then the frame is emptied, or the ranges would span it beside the data."""
    live = LiveView(LabSettings(method="vi"), Status())
    assert _framed(live.plots) == set(FRAMES)          # the page before its first run
    assert live.rebuild()
    live.show_all()
    assert _framed(live.plots) == {"gap_frame", "joint_frame"}     # iteration 0, no pair
    live.step(3)
    live.select_pair(1, 4)
    assert _framed(live.plots) == set()
    live.settings.method = "gkl"            # no sites: both site plots framed, and say so
    assert _framed(live.plots) == {"energy_frame", "gap_frame", "prec_frame", "nat1_frame",
                                   "joint_frame"}          # the pair needs the solved q
    live.step(1)                            # solved: its energy trace and pair, no sites
    assert _framed(live.plots) == {"prec_frame", "nat1_frame"}
    assert "none" in live.plots.site_prec.title.text and "none" in live.plots.site_nat1.title.text


def test_url_parameters_round_trip():
    a = LabSettings(method="pep", alpha=0.3, kernel="matern32", rho=0.7, dataset="counts_1d")
    b = LabSettings()
    b.param.update(**a.url_state())
    assert b.url_state() == a.url_state()
    assert "csv_text" not in URL_PARAMS


def test_contour_panels_mark_argmax_and_share_colour_limits():
    ls, var = np.geomspace(0.1, 10, 5), np.geomspace(0.1, 100, 4)
    z = -((np.log(var)[:, None] - 1.0) ** 2 + (np.log(ls)[None, :] - 0.5) ** 2)
    data = np.stack([z, z - 1.0])
    ds = xr.Dataset({"log_marginal_per_n": (("scheme", "variance", "lengthscale"), data)},
                    coords={"scheme": ["vi", "ep"], "variance": var, "lengthscale": ls})
    layout, sl = contour_layout(ds), slice_plot(ds, slice_index=2)
    panels = list(layout)
    clims = {p.get(0).opts.get().kwargs["clim"] for p in panels}
    assert len(clims) == 1
    marker = panels[0].get(2)
    i0, i1 = np.unravel_index(np.argmax(z), z.shape)
    np.testing.assert_allclose(marker.array()[0], [np.log10(ls[i1]), np.log10(var[i0])])
    np.testing.assert_allclose(list(sl)[1].dimension_values(1), data[1][2])
    # contour levels are not legend entries: HoloViews 1.23 lists every level, as raw
    # floats, in a legend drawn over the surface unless told not to
    mcmc = xr.concat([ds, ds.isel(scheme=[0]).assign_coords(scheme=["mcmc"])], "scheme")
    for panel in contour_layout(mcmc):
        assert [item for legend in hv.render(panel).legend for item in legend.items] == []


def test_the_slice_opens_through_the_best_cell_of_mcmc_else_of_the_first_method():
    """The row of the argmax: MCMC's when computed (the truth the others are read
    against), else the first method's with a finite value; the middle row if none."""
    from bnlab.ui.surface_plots import best_row
    ls, var = np.geomspace(0.1, 10, 5), np.geomspace(0.1, 100, 6)
    peak = lambda r: -((np.arange(6)[:, None] - r) ** 2 + (np.arange(5)[None, :] - 2.0) ** 2)
    blank = np.full((6, 5), np.nan)

    def ds(schemes, surfaces):
        return xr.Dataset({"log_marginal_per_n": (("scheme", "variance", "lengthscale"),
                                                  np.stack(surfaces))},
                          coords={"scheme": schemes, "variance": var, "lengthscale": ls})
    assert best_row(ds(["vi", "ep", "mcmc"], [peak(1), peak(2), peak(4)])) == 4
    assert best_row(ds(["vi", "ep"], [blank, peak(5)])) == 5
    assert best_row(ds(["vi"], [blank])) == 3


@pytest.mark.parametrize("learner", ["joint ELBO (VI)",
                                     "EP with frozen sites (GPy; Li et al. 2023 Table 1)"])
def test_learning_trajectory_climbs_to_the_exact_evidence_maximum_and_is_drawn(learner):
    """Gaussian regression: the joint-ELBO path and the frozen-site EP path (EP's sites
    are the exact likelihood there, so freezing them loses nothing) over (lengthscale,
    variance) end at the maximum of the exact log marginal likelihood (checked against
    scipy on the numpy formula above), and every surface panel draws them."""
    from scipy.optimize import minimize
    from bnlab.ui.trajectories import learn_trajectories
    s = LabSettings(dataset="regression_1d", lik_scale=0.05, lengthscale=0.5, variance=0.5)
    p = build_problem(s)
    X, y = np.asarray(p.X), np.asarray(p.y)
    paths = learn_trajectories(p, ("variance", "lengthscale"), [learner], damping=1.0)
    t = paths[learner]
    assert t["variance"][0] == pytest.approx(0.5) and t["lengthscale"][0] == pytest.approx(0.5)
    best = minimize(lambda z: -_gp_regression(X, y, X[:1], np.exp(z[1]), np.exp(z[0]), 0.05)[2],
                    np.log([0.5, 0.5]), method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
    np.testing.assert_allclose([np.log(t["variance"][-1]), np.log(t["lengthscale"][-1])],
                               best.x, atol=0.03)
    ls, var = np.geomspace(0.1, 10, 4), np.geomspace(0.1, 10, 3)
    ds = xr.Dataset({"log_marginal_per_n": (("scheme", "variance", "lengthscale"),
                                            np.zeros((2, 3, 4)))},
                    coords={"scheme": ["vi", "ep"], "variance": var, "lengthscale": ls})
    layout = contour_layout(ds, trajectories=paths)
    for panel in layout:
        drawn = [el for el in panel if el.group == "Path"]
        assert len(drawn) == 1
        xy = drawn[0].array()
        np.testing.assert_allclose(xy[[0, -1], 0], np.log10(t["lengthscale"][[0, -1]]))
        np.testing.assert_allclose(xy[[0, -1], 1], np.log10(t["variance"][[0, -1]]))


def test_the_mcmc_surface_says_what_its_error_resolves():
    """The surfaces page states MCMC's standard error per point and the cells where its
    estimate lies below VI's lower bound (the exact log p(y) never does), with a warning
    when one lies more than three standard errors below."""
    from bnlab.ui.mcmc_notes import mcmc_note
    var, ls = np.array([0.5, 1.0]), np.array([0.5, 1.0, 2.0])
    vi = np.array([[-10.0, -9.0, -8.0], [-11.0, -10.0, -9.0]])
    se = np.full((2, 3), 0.5)

    def ds(mcmc, schemes=("vi", "mcmc")):
        surfaces = {"vi": vi, "mcmc": mcmc}
        data = {"log_marginal": np.stack([surfaces[m] for m in schemes]),
                "log_marginal_se": np.stack([se if m == "mcmc" else np.full((2, 3), np.nan)
                                             for m in schemes]),
                "converged": np.ones((len(schemes), 2, 3), bool)}
        return xr.Dataset({k: (("scheme", "variance", "lengthscale"), v) for k, v in data.items()},
                          coords={"scheme": list(schemes), "variance": var, "lengthscale": ls},
                          attrs={"n_train": 50})
    above = mcmc_note(ds(vi + 0.2))
    assert "median 0.0100, largest 0.0100" in above and "below" not in above
    noisy = mcmc_note(ds(vi + np.array([[0.2, -0.5, 0.2], [-0.25, 0.2, 0.2]])))
    assert "At 2 of 6 cells" in noisy and "at most 1.0 standard errors" in noisy
    assert "bn-caption" in noisy
    short = mcmc_note(ds(vi - np.array([[2.0, 0, 0], [0, 0, 0]]) + 0.1))
    assert "bn-warn" in short and "at 1 by more than 3" in short
    assert mcmc_note(ds(vi - 2.0), remedy="compute again").endswith("compute again.</span>")
    assert mcmc_note(ds(vi, schemes=("vi",))) == ""


def test_a_run_stops_as_soon_as_its_page_is_closed():
    """Run on a session whose browser page has gone (its last WebSocket closed; Bokeh
    keeps the session 15 s more) takes no step and ends: the animation used to compute
    and send frames to the closed page until the session was discarded. The same run
    with the page there advances."""
    import time
    from types import SimpleNamespace

    from bokeh.document import Document
    from panel.io.state import set_curdoc

    def run_on(connections):
        live = LiveView(LabSettings(method="vi"), Status())
        assert live.rebuild()
        doc = Document()
        if connections is not None:
            session = SimpleNamespace(connection_count=connections)
            doc._session_context = lambda: SimpleNamespace(session=session)
        with set_curdoc(doc):
            live.run()
        deadline = time.time() + 20
        while live.running and live.runner.snapshot()["status"]["iteration"] == 0 \
                and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        iteration = live.runner.snapshot()["status"]["iteration"]
        running = live.running
        live.pause()
        return iteration, running

    assert run_on(0) == (0, False)
    iteration, _ = run_on(None)
    assert iteration > 0
