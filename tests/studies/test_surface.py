"""bnlab.surface: equal to bnlab.infer point by point, grid validation, progress/cancel."""
import threading

import numpy as np
import pytest

import bnlab
from bnlab.studies.surfaces import point_params

GRID = {"lengthscale": np.exp(np.linspace(-0.5, 1.5, 3)), "variance": np.exp(np.linspace(-1, 3, 3))}


@pytest.fixture(scope="module")
def problem():
    ds = bnlab.datasets.load("classification_1d", n=32)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    return model, ds


def _infer_grid(model, ds, method, **kw):
    names = tuple(GRID)
    out = np.zeros((2, 3, 3))
    iters = np.zeros((3, 3), int)
    flags = np.zeros((2, 3, 3), bool)
    for i, a in enumerate(GRID[names[0]]):
        for j, b in enumerate(GRID[names[1]]):
            r = bnlab.infer(model, ds.X, ds.y, method=method,
                            params=point_params(model.init_params(), names, (a, b)), **kw)
            out[:, i, j] = r.log_marginal, r.log_predictive(ds.X_test, ds.y_test)
            iters[i, j] = r.n_iters
            flags[:, i, j] = r.converged, r.diverged
    return out, iters, flags


@pytest.fixture(scope="module")
def cold_surface(problem):
    model, ds = problem
    return bnlab.surface(model, ds.X, ds.y, methods=["laplace", "vi", "ep", "ep_like", "pep"],
                         alpha=0.5, grid=GRID, X_test=ds.X_test, y_test=ds.y_test,
                         warm_start=False, chunk_size=3)


@pytest.mark.parametrize("method", ["laplace", "vi", "ep", "ep_like", "pep"])
def test_cold_surface_equals_infer_exactly(problem, cold_surface, method):
    model, ds = problem
    kw = {"alpha": 0.5} if method == "pep" else {}
    (lml, lpd), iters, (converged, diverged) = _infer_grid(model, ds, method, **kw)
    s = cold_surface.sel(scheme=method)      # not "method": Dataset.sel has that keyword
    np.testing.assert_allclose(s.log_marginal.values, lml, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s.log_predictive.values, lpd, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(s.iterations.values, iters)
    np.testing.assert_allclose(s.log_marginal_per_n.values, lml / len(ds.y))
    np.testing.assert_array_equal(s.converged.values, converged)
    np.testing.assert_array_equal(s.diverged.values, diverged)
    assert s.psd.values[~diverged].all()


@pytest.fixture(scope="module")
def warm_surface(problem):
    model, ds = problem
    return bnlab.surface(model, ds.X, ds.y, methods=["laplace", "vi", "ep", "ep_like"],
                         grid=GRID, X_test=ds.X_test, y_test=ds.y_test, warm_start=True)


def test_warm_started_surface_reaches_the_same_fixed_points(problem, cold_surface, warm_surface):
    warm = warm_surface
    for m in warm.scheme.values:
        a = warm.loc[{"scheme": m}]
        b = cold_surface.loc[{"scheme": m}]
        np.testing.assert_allclose(a.log_marginal.values, b.log_marginal.values, atol=1e-5)
        np.testing.assert_allclose(a.log_predictive.values, b.log_predictive.values, atol=1e-6)
    # the warm start saves iterations after the first row
    assert warm.iterations.values[:, 1:].sum() < cold_surface.iterations.loc[
        {"scheme": ["laplace", "vi", "ep", "ep_like"]}].values[:, 1:].sum()


def test_worker_threads_change_nothing(problem):
    """Rows solved concurrently give bit-for-bit the values of one worker: every block
    depends only on its (finished) source point, never on timing."""
    model, ds = problem
    kw = dict(methods=["laplace", "ep"], grid=GRID, X_test=ds.X_test, y_test=ds.y_test)
    one = bnlab.surface(model, ds.X, ds.y, workers=1, **kw)
    three = bnlab.surface(model, ds.X, ds.y, workers=3, **kw)
    for name in one.data_vars:
        np.testing.assert_array_equal(one[name].values, three[name].values)
    with pytest.raises(ValueError, match="workers"):
        bnlab.surface(model, ds.X, ds.y, workers=0, **kw)


def test_a_method_running_another_s_iteration_says_so_in_its_record():
    """``Method.iteration_of`` is true of the records: such a record is the named one's
    in every field but its name, description and the energy it reports."""
    from dataclasses import fields

    from bnlab.methods import REGISTRY
    twins = {n: m for n, m in REGISTRY.items() if m.iteration_of}
    assert set(twins) == {"ep_like"}
    for m in twins.values():
        base = REGISTRY[m.iteration_of]
        differ = {f.name for f in fields(m) if getattr(m, f.name) != getattr(base, f.name)}
        assert differ == {"name", "description", "energy", "iteration_of"}, differ


def test_a_registered_method_running_vi_s_iteration_shares_vi_s_run(problem):
    """EP-like's record registered under a new name shares one surface run with VI, as
    'ep_like' does (its record's ``iteration_of``, not its name, decides): one engine run
    per cell for the two, on a log-concave likelihood with equal damping and iteration
    limits only, and both surfaces equal their own ``bnlab.infer``."""
    from dataclasses import replace

    from bnlab.methods import REGISTRY, register, unregister
    from bnlab.studies.surfaces import _site_groups
    model, ds = problem
    methods = ["laplace", "vi", "toy_ep_like"]
    same, cap = dict.fromkeys(methods, 0.5), dict.fromkeys(methods, 200)
    register(replace(REGISTRY["ep_like"], name="toy_ep_like"))
    try:
        assert _site_groups(methods, same, cap, True) == {"laplace": ["laplace"],
                                                          "toy_ep_like": ["vi", "toy_ep_like"]}
        apart = {m: [m] for m in methods}
        assert _site_groups(methods, same, cap, False) == apart
        assert _site_groups(methods, {**same, "vi": 0.3}, cap, True) == apart
        grid = {"lengthscale": GRID["lengthscale"][:2], "variance": GRID["variance"][:2]}
        s = bnlab.surface(model, ds.X, ds.y, methods=["vi", "toy_ep_like"], grid=grid,
                          warm_start=False)
        for i, ls in enumerate(grid["lengthscale"]):
            for j, var in enumerate(grid["variance"]):
                p = point_params(model.init_params(), tuple(grid), (ls, var))
                for scheme, m in (("vi", "vi"), ("toy_ep_like", "ep_like")):
                    r = bnlab.infer(model, ds.X, ds.y, method=m, params=p)
                    np.testing.assert_allclose(float(s.log_marginal.sel(scheme=scheme)[i, j]),
                                               r.log_marginal, rtol=1e-7)
    finally:
        unregister("toy_ep_like")


def test_vi_surface_is_vis_own_even_where_the_ep_like_energy_is_undefined():
    """Student-t (not log-concave): at (ℓ, σ²) = (1, e^{7/3}) a VI iterate has a cavity
    that is not PD, so ``infer(method="ep_like")`` stops there as diverged while VI
    converges. The VI surface must still be VI's fixed point (a shared VI / EP-like run
    would report the stopped iterate), and EP-like must equal its own ``infer``."""
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(-3, 3, 40))[:, None]
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_t(2, 40)
    y[::7] += 3
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.StudentT(df=3.0, scale=0.2))
    grid = {"lengthscale": [1.0], "variance": [np.exp(7 / 3), 0.5]}
    kw = dict(damping=0.2, max_iters=500)
    s = bnlab.surface(model, X, y, methods=["vi", "ep_like"], grid=grid, **kw)
    for j, var in enumerate(grid["variance"]):
        p = point_params(model.init_params(), ("lengthscale", "variance"), (1.0, var))
        for m in ("vi", "ep_like"):
            r = bnlab.infer(model, X, y, method=m, params=p, **kw)
            at = s.sel(scheme=m).isel(lengthscale=0, variance=j)
            assert bool(at.converged) == r.converged and bool(at.diverged) == r.diverged
            # a diverging run's last iterate amplifies the rounding differences between
            # the surface's batched products and infer's single ones: 4e-8 relative
            # with the W½ variances' column sums as an einsum, 1.6e-7 as a matrix–vector
            # product (sixteenth session); converged points agree to 1e-7
            rtol = 1e-5 if r.diverged else 1e-7
            np.testing.assert_allclose(float(at.log_marginal), r.log_marginal, rtol=rtol)
    first = s.isel(lengthscale=0, variance=0)
    assert bool(first.converged.sel(scheme="vi")) and bool(first.diverged.sel(scheme="ep_like"))


def test_two_latent_surface_over_one_latents_hyperparameters():
    """Heteroscedastic noise (two latent GPs): the grid may name one latent's kernel
    hyperparameter as ``bnlab.studies.learning`` does ("lengthscale_0", "variance_1"); each
    point equals ``infer`` with only that latent's value changed."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-3, 3, 30))[:, None]
    y = np.sin(X[:, 0]) + np.exp(0.5 * np.cos(X[:, 0])) * 0.3 * rng.standard_normal(30)
    model = bnlab.GP([bnlab.kernels.Matern52(), bnlab.kernels.Matern32()],
                     bnlab.likelihoods.Heteroscedastic())
    grid = {"lengthscale_0": [0.5, 1.5], "variance_1": [0.3, 0.6]}
    s = bnlab.surface(model, X, y, methods=["vi"], grid=grid, damping=0.3, max_iters=300)
    for i, ls in enumerate(grid["lengthscale_0"]):
        for j, var in enumerate(grid["variance_1"]):
            params = model.init_params()
            params["kernel"][0]["lengthscale"] = np.float64(ls)
            params["kernel"][1]["variance"] = np.float64(var)
            r = bnlab.infer(model, X, y, method="vi", params=params, damping=0.3, max_iters=300)
            assert r.converged
            np.testing.assert_allclose(float(s.log_marginal.sel(scheme="vi")[i, j]),
                                       r.log_marginal, rtol=1e-7)
    with pytest.raises(ValueError, match="lengthscale_2"):
        bnlab.surface(model, X, y, methods=["vi"], grid={"lengthscale_2": [1.0], "variance": [1.0]})
    from bnlab.studies.learning import learnable               # learning paths name the same axes
    names, _, _ = learnable(model, model.init_params())
    for a, b in zip(names, names[1:]):
        bnlab.studies.surfaces.grid_axes(model, {a: [1.0], b: [1.0]})


def test_gaussian_surface_over_likelihood_noise_is_the_exact_evidence():
    from scipy.stats import multivariate_normal
    ds = bnlab.datasets.load("regression_1d", n=15)
    model = bnlab.GP(bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian())
    grid = {"noise": [0.05, 0.2], "lengthscale": [0.5, 1.0, 2.0]}
    s = bnlab.surface(model, ds.X, ds.y, methods=["vi", "ep"], grid=grid, damping=1.0)
    for i, noise in enumerate(grid["noise"]):
        for j, ls in enumerate(grid["lengthscale"]):
            p = point_params(model.init_params(), ("noise", "lengthscale"), (noise, ls))
            K = np.asarray(model.prior_covariance(p, ds.X, ds.X))
            exact = multivariate_normal(np.zeros(len(ds.y)), K + noise * np.eye(len(ds.y))).logpdf(ds.y)
            np.testing.assert_allclose(s.log_marginal.values[:, i, j], exact, rtol=1e-7)


def test_progress_and_cancel(problem):
    model, ds = problem
    seen = []
    stop = threading.Event()

    def progress(fraction):
        seen.append(fraction)
        if len(seen) == 2:
            stop.set()

    # one worker: the first column (block 1), row 0 (block 2), then the cancel
    s = bnlab.surface(model, ds.X, ds.y, methods=["laplace"], grid=GRID, progress=progress,
                      cancel=stop, X_test=ds.X_test, y_test=ds.y_test, workers=1)
    assert s.attrs["cancelled"] == 1
    lml = s.log_marginal.values[0]
    assert np.isfinite(lml[:, 0]).all() and np.isfinite(lml[0]).all()
    assert np.isnan(lml[1:, 1:]).all()
    assert seen == sorted(seen) and 0 < seen[-1] < 1
    full = []
    bnlab.surface(model, ds.X, ds.y, methods=["laplace"], grid=GRID, progress=full.append,
                  cancel=lambda: False, X_test=ds.X_test, y_test=ds.y_test)
    assert full[-1] == 1.0


@pytest.mark.parametrize("grid, message", [
    ({}, "exactly two axes"),
    ({"lengthscale": [1.0]}, "exactly two axes"),
    ({"lengthscale": [1.0], "variance": [1.0], "noise": [1.0]}, "exactly two axes"),
    ({"lengthscale": [], "variance": [1.0]}, "non-empty"),
    ({"lengthscale": [1.0, -2.0], "variance": [1.0]}, "must be positive"),
    ({"lengthscale": [1.0], "variance": [0.0]}, "must be positive"),
    ({"lengthscale": [1.0, np.nan], "variance": [1.0]}, "NaN"),
    ({"lengthscale": [1.0], "colour": [1.0]}, "unknown grid parameter 'colour'"),
    ({"lengthscale": [1.0], "noise": [1.0]}, "unknown grid parameter 'noise'"),
    ({"lengthscale": [[1.0, 2.0]], "variance": [1.0]}, "1-D"),
    ({"alpha": [0.5, 1.5], "variance": [1.0]}, "alpha"),
])
def test_bad_grids_are_rejected(problem, grid, message):
    model, ds = problem
    with pytest.raises(ValueError, match=message):
        bnlab.surface(model, ds.X, ds.y, methods=["laplace"], grid=grid)


def test_bad_methods_are_rejected(problem):
    model, ds = problem
    with pytest.raises(ValueError, match="unknown method"):
        bnlab.surface(model, ds.X, ds.y, methods=["newton"], grid=GRID)
    with pytest.raises(ValueError, match="at least one"):
        bnlab.surface(model, ds.X, ds.y, methods=[], grid=GRID)
    with pytest.raises(ValueError, match="grid is required"):
        bnlab.surface(model, ds.X, ds.y, methods=["vi"])


def test_surface_round_trips_through_netcdf(problem, cold_surface, tmp_path):
    import xarray as xr
    path = tmp_path / "s.nc"
    cold_surface.to_netcdf(path)
    back = xr.load_dataset(path)
    np.testing.assert_array_equal(back.log_marginal.values, cold_surface.log_marginal.values)
    assert back.converged.dtype == bool


def test_gkl_surface_uses_the_pure_bound_and_equals_infer(problem):
    model, ds = problem
    grid = {"lengthscale": [0.7, 2.0], "variance": [1.0, 5.0]}
    s = bnlab.surface(model, ds.X, ds.y, methods=["gkl"], grid=grid,
                      method_options={"gkl": {"covariance": "banded", "band": 3}})
    for i, ls in enumerate(grid["lengthscale"]):
        for j, var in enumerate(grid["variance"]):
            r = bnlab.infer(model, ds.X, ds.y, method="gkl", covariance="banded", band=3,
                            params=point_params(model.init_params(), tuple(grid), (ls, var)))
            assert s.log_marginal.values[0, i, j] == pytest.approx(r.log_marginal, abs=1e-6)


# ---- batching="vmap" (``bnlab.studies.surfaces.batched``; more in test_surface_vmap) ----------
# The same problem, grid and arguments as the surfaces above, so that the scan side's
# programs are compiled once for the module, and the vmapped ones shared between tests.

def assert_same(a, b, rtol=1e-9, atol=1e-9):
    """Flags and iterations equal, values to ``rtol``/``atol``."""
    for name in ("converged", "diverged", "psd", "iterations"):
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    for name in ("log_marginal", "log_predictive"):
        np.testing.assert_allclose(a[name].values, b[name].values, rtol=rtol, atol=atol,
                                   err_msg=name)


@pytest.fixture(scope="module")
def vmap_cold(problem):
    model, ds = problem
    return bnlab.surface(model, ds.X, ds.y, methods=["laplace", "vi", "ep", "ep_like", "pep"],
                         alpha=0.5, grid=GRID, X_test=ds.X_test, y_test=ds.y_test,
                         warm_start=False, chunk_size=3, batching="vmap")


def test_batched_surface_equals_the_scanned_one_for_every_method(cold_surface, vmap_cold):
    """Every grid point in one vmapped program per method: the scan path's values, flags
    and iteration counts (which equal ``bnlab.infer``'s: the test above)."""
    assert vmap_cold.attrs["batching"] == "vmap" and cold_surface.attrs["batching"] == "scan"
    assert vmap_cold.converged.values.all()
    assert_same(vmap_cold, cold_surface)


WARM_VMAP = dict(methods=["laplace"], grid=GRID, batching="vmap", warm_start=True)


@pytest.fixture(scope="module")
def vmap_warm(problem):
    model, ds = problem
    return bnlab.surface(model, ds.X, ds.y, X_test=ds.X_test, y_test=ds.y_test, **WARM_VMAP)


def test_warm_batched_rows_walk_as_the_scan_path(warm_surface, vmap_warm):
    """Rows side by side, each point warm-started from its row's previous one (and the
    first column a chain), as the scan path's walk: the same iterations, values to
    rounding."""
    assert_same(vmap_warm, warm_surface.sel(scheme=["laplace"]))


def test_a_grid_split_into_many_programs_equals_one_program(problem, vmap_cold, vmap_warm):
    """``batch_points=1``, as if memory held one point: cold, each 3-point block is
    split over three programs; warm, every row is a program of its own. The values of
    the unsplit surfaces, progress once per batch."""
    model, ds = problem
    seen = []
    cold = bnlab.surface(model, ds.X, ds.y, methods=["laplace"], grid=GRID, X_test=ds.X_test,
                         y_test=ds.y_test, warm_start=False, chunk_size=3, batching="vmap",
                         batch_points=1, progress=seen.append)
    assert_same(cold, vmap_cold.sel(scheme=["laplace"]), rtol=1e-12, atol=1e-12)
    assert len(seen) == 3 and seen[-1] == 1.0             # one batch per block
    seen.clear()
    warm = bnlab.surface(model, ds.X, ds.y, X_test=ds.X_test, y_test=ds.y_test,
                         batch_points=1, progress=seen.append, **WARM_VMAP)
    assert_same(warm, vmap_warm, rtol=1e-12, atol=1e-12)
    assert len(seen) == 4 and seen[-1] == 1.0             # the column, then each row


def test_the_memory_budget_splits_a_grid_as_batch_points_does(problem, vmap_cold, monkeypatch):
    """No ``batch_points``: the points per program come from the memory budget
    (``batched.CPU_BYTES`` on a CPU, made here to hold two points' iterates), so each
    3-point block is solved as two programs of two points; the unsplit values."""
    from bnlab.engine.loop import get_engine
    from bnlab.studies.surfaces import batched
    model, ds = problem
    engine = get_engine(model, "laplace", ("gauss_hermite", 20), ())
    one = batched.state_bytes(engine, ds.X, ds.y, model.init_params(), tuple(GRID))
    monkeypatch.setattr(batched, "CPU_BYTES", int(2.5 * batched.BYTES_PER_STATE * one))
    sizes = []
    real = batched._sizes
    monkeypatch.setattr(batched, "_sizes", lambda *a: sizes.append(real(*a)) or sizes[-1])
    split = bnlab.surface(model, ds.X, ds.y, methods=["laplace"], grid=GRID, X_test=ds.X_test,
                          y_test=ds.y_test, warm_start=False, chunk_size=3, batching="vmap")
    assert sizes == [(2, 2)] * 3                          # 3 blocks, 2 programs of 2 each
    assert_same(split, vmap_cold.sel(scheme=["laplace"]), rtol=1e-12, atol=1e-12)


def test_a_batched_surface_cancels_and_resumes_from_its_store(problem, tmp_path):
    """A cancel after the first batch keeps it, and its blocks in the store; a rerun reads
    them, computes the rest, and equals the uninterrupted surface."""
    model, ds = problem
    kw = dict(X_test=ds.X_test, y_test=ds.y_test, batch_points=1, workers=1, **WARM_VMAP)
    reference = bnlab.surface(model, ds.X, ds.y, **kw)
    store = tmp_path / "surf.zarr"
    stop, seen = threading.Event(), []

    def progress(fraction):
        seen.append(fraction)
        stop.set()
    first = bnlab.surface(model, ds.X, ds.y, store=store, progress=progress, cancel=stop, **kw)
    lml = first.log_marginal.values[0]
    assert first.attrs["cancelled"] == 1 and len(seen) == 1
    assert np.isfinite(lml[:, 0]).all() and np.isnan(lml[:, 1:]).all()   # the column only
    again = bnlab.surface(model, ds.X, ds.y, store=store, **kw)
    assert again.attrs["blocks_from_store"] == 1 and again.attrs["cancelled"] == 0
    for name in ("log_marginal", "log_predictive", "iterations", "converged", "diverged", "psd"):
        np.testing.assert_array_equal(again[name].values, reference[name].values)
