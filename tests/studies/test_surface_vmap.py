"""bnlab.surface(batching="vmap") on the CPU, beyond test_surface's probit GP: the
batched programs of ``bnlab.studies.surfaces.batched`` give the scan path's values (to the
convergence tolerance) and the same converged / diverged flags for a method with
site precisions of either sign, through warm runs that diverge and the iteration cap,
and for a sparse and a Markov model; the batch size follows the memory budget. Small
n and grids: each case is a compilation or two."""
import numpy as np
import pytest

import bnlab
from bnlab.methods.registry import REGISTRY
from bnlab.studies.surfaces import batched
from bnlab.studies.surfaces.site_runs import resolve_batching

#: variances up to e^2.9 ≈ 18: pep_qn runs on probit up to 20 (``Bernoulli.check_method``)
GRID = {"lengthscale": np.exp(np.linspace(-0.5, 1.5, 2)),
        "variance": np.exp(np.linspace(-1, 2.9, 3))}
PROBIT = bnlab.likelihoods.Bernoulli("probit")


@pytest.fixture(scope="module")
def data():
    return bnlab.datasets.load("classification_1d", n=20)


def assert_same(a, b, atol=1e-6):
    """Flags equal; values close at converged points (a diverged point's value is its
    best iterate's, an unconverged one's its last: both carry rounding further);
    iteration counts within one (the last step's test can fall either side of tol)."""
    for name in ("converged", "diverged", "psd"):
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    ok = a.converged.values
    for name in ("log_marginal", "log_predictive"):
        if name in a:
            np.testing.assert_allclose(a[name].values[ok], b[name].values[ok], rtol=1e-7,
                                       atol=atol, err_msg=name)
            np.testing.assert_array_equal(np.isnan(a[name].values), np.isnan(b[name].values))
    assert np.abs(a.iterations.values - b.iterations.values).max() <= 1


def _both(model, X, y, **kw):
    return (bnlab.surface(model, X, y, batching="scan", **kw),
            bnlab.surface(model, X, y, batching="vmap", **kw))


@pytest.mark.slow
def test_signed_site_precisions_batched_equal_scanned(data):
    """pl2: site precisions of either sign, so the signed factorisation (and the
    ``lax.cond`` between the two forms, a select under vmap)."""
    scan, vmap = _both(bnlab.GP(bnlab.kernels.Matern52(), PROBIT), data.X, data.y,
                       methods=["pl2"], grid=GRID, X_test=data.X_test, y_test=data.y_test,
                       warm_start=False)
    assert vmap.converged.values.all() and (vmap.attrs["batching"], scan.attrs["batching"]) \
        == ("vmap", "scan")
    assert_same(vmap, scan)


def test_warm_runs_that_diverge_are_redone_cold_as_on_the_scan_path():
    """Student-t EP at ρ = 0.7 on data with outliers: warm runs whose cavities lose
    positive-definiteness (redone cold in the same loop, diverging again), points at
    the iteration cap and converged ones, rows side by side: the same flags as the scan
    path's walk, and values to the tolerance."""
    ds = bnlab.datasets.load("robust_1d", n=30)
    model = bnlab.GP(bnlab.kernels.Matern52(),
                     bnlab.likelihoods.StudentT(df=4.0, scale=0.1))
    grid = {"variance": np.logspace(-1, 1, 3), "lengthscale": np.logspace(-1, 0.5, 3)}
    scan, vmap = _both(model, ds.X, ds.y, methods=["ep"], grid=grid, max_iters=60,
                       damping=0.7)
    d, c = vmap.diverged.values, vmap.converged.values
    assert d.any() and c.any() and (~c & ~d).any()
    assert_same(vmap, scan)


@pytest.mark.parametrize("kind", ["sparse", "markov"])
def test_sparse_and_markov_models_batched_equal_scanned(data, kind):
    if kind == "sparse":
        model = bnlab.SparseGP(bnlab.kernels.Matern52(), PROBIT,
                               inducing=np.linspace(-3, 3, 5)[:, None])
        methods = ["ep"]
    else:
        model = bnlab.MarkovGP(bnlab.kernels.Matern32(), PROBIT)
        methods = ["laplace"]
    scan, vmap = _both(model, data.X, data.y, methods=methods, grid=GRID, X_test=data.X_test,
                       y_test=data.y_test, warm_start=False)
    assert vmap.converged.values.all()
    assert_same(vmap, scan)


#: test_surface covers laplace, vi, ep, ep_like and pep, the test above pl2
SLOW_METHODS = sorted(set(REGISTRY) - {"laplace", "vi", "ep", "ep_like", "pep", "pl2"}) + ["gkl"]


@pytest.mark.slow
@pytest.mark.parametrize("method", SLOW_METHODS)
def test_every_other_method_batched_equals_scanned(data, method):
    """The rest of the methods a surface offers (two compilations each)."""
    scan, vmap = _both(bnlab.GP(bnlab.kernels.Matern52(), PROBIT), data.X, data.y,
                       methods=[method], grid=GRID, warm_start=False, max_iters=300)
    assert_same(vmap, scan)


def test_batching_is_resolved_and_checked(data):
    import jax
    cpu = jax.devices("cpu")
    assert resolve_batching("auto", cpu) == "scan"
    assert resolve_batching("vmap", cpu) == "vmap"

    class Accelerator:
        platform = "gpu"
    assert resolve_batching("auto", (Accelerator(),)) == "vmap"
    model = bnlab.GP(bnlab.kernels.Matern52(), PROBIT)
    with pytest.raises(ValueError, match="batching"):
        bnlab.surface(model, data.X, data.y, methods=["laplace"], grid=GRID, batching="pmap")
    with pytest.raises(ValueError, match="batch_points"):
        bnlab.surface(model, data.X, data.y, methods=["laplace"], grid=GRID,
                      batching="vmap", batch_points=0)


def test_points_per_program_follow_the_memory_budget():
    import jax
    cpu = jax.devices("cpu")
    per_point = 10 << 20                                # 10 MiB
    expected = batched.CPU_BYTES // int(batched.BYTES_PER_STATE * per_point)
    assert batched.points_per_program(per_point, cpu) == expected
    assert batched.points_per_program(per_point, cpu, workers=2) == expected // 2
    assert batched.points_per_program(batched.CPU_BYTES, cpu) == 1   # never 0

    class Device:
        def memory_stats(self):
            return {"bytes_limit": 80 << 30, "bytes_in_use": 20 << 30}
    assert batched.free_bytes(Device()) == int(batched.DEVICE_FRACTION * (60 << 30))
    assert batched._sizes(21, 1000, 21, 1) == (1, 21)
    assert batched._sizes(5, 1000, 21, 1) == (1, 21)     # a last batch reuses the program
    assert batched._sizes(21, 8, 21, 1) == (3, 8)
    assert batched._sizes(21, 8, 21, 2) == (3, 8)
    assert batched._sizes(3, 1000, 1, 2) == (1, 4)       # a multiple of the devices


def test_the_engine_s_branches_stay_branches_in_a_batch():
    """``engine.batch_axis.cond`` under ``vmap``: the values of ``lax.cond`` point by
    point, inactive points ignored in the decision, and a ``cond`` in the program (one
    branch for the batch) where plain ``lax.cond`` becomes a select of both."""
    import jax
    import jax.numpy as jnp
    from bnlab.engine import batch_axis

    def f(x, active, per_batch=True):
        def branch(x):
            return batch_axis.cond(x > 0, lambda v: 2 * v, lambda v: v - 1, x)
        if not per_batch:
            return jax.lax.cond(x > 0, lambda v: 2 * v, lambda v: v - 1, x)
        with batch_axis.over("points", active):
            return branch(x)

    x = jnp.array([-1.0, 2.0, 3.0])
    for active in ([True, True, True], [False, True, True], [True, False, False]):
        out = jax.vmap(f, axis_name="points")(x, jnp.array(active))
        np.testing.assert_array_equal(out[np.array(active)],             # kept results
                                      jnp.where(x > 0, 2 * x, x - 1)[np.array(active)])
    text = str(jax.make_jaxpr(jax.vmap(f, axis_name="points"))(x, jnp.ones(3, bool)))
    plain = str(jax.make_jaxpr(jax.vmap(lambda v, a: f(v, a, False)))(x, jnp.ones(3, bool)))
    assert "cond[" in text and "cond[" not in plain and "select_n" in plain
    assert batch_axis.current() is None
    assert float(batch_axis.cond(jnp.asarray(True), lambda: 1.0, lambda: 0.0)) == 1.0


AIS = {"num_temps": 20, "num_chains": 4, "posterior_steps": 8, "seed": 3, "use_cache": False}


def test_batched_ais_overlay_equals_the_per_point_one(data, monkeypatch):
    """AIS under ``batching="vmap"``: every grid point with its chains in one program
    (``chunk_size="memory"``), or in programs of two when the memory budget holds two;
    each point's random stream comes from its own key, so the same draws as one program
    per point (``chunk_size=1``): the same bounds, standard errors, diagnostics and
    predictive, to rounding."""
    from bnlab.studies import mcmc
    model = bnlab.GP(bnlab.kernels.Matern52(), PROBIT)
    kw = dict(methods=["mcmc"], grid=GRID, X_test=data.X_test, y_test=data.y_test)
    per_point = bnlab.surface(model, data.X, data.y, batching="scan",
                              mcmc_options=dict(AIS, chunk_size=1), **kw)
    programs = []
    real = mcmc.ais_chunks

    def spy(model, settings, with_test, params, *rest):
        programs.append(params["kernel"][0]["lengthscale"].shape[:2])
        return real(model, settings, with_test, params, *rest)
    monkeypatch.setattr(mcmc, "ais_chunks", spy)
    one = bnlab.surface(model, data.X, data.y, batching="vmap", mcmc_options=AIS, **kw)
    assert programs == [(1, 6)] and one.attrs["batching"] == "vmap"
    programs.clear()
    two = mcmc.ais_point_bytes(data.X.shape[0], AIS["num_temps"], AIS["num_chains"],
                               AIS["posterior_steps"])
    monkeypatch.setattr(batched, "CPU_BYTES", int(2.5 * two))
    split = bnlab.surface(model, data.X, data.y, batching="vmap", mcmc_options=AIS, **kw)
    assert programs == [(1, 2)] * 3
    for batched_surface in (one, split):
        for name in ("log_marginal", "log_predictive", "mcmc_lower", "mcmc_upper",
                     "mcmc_lower_se", "mcmc_upper_se"):
            np.testing.assert_allclose(batched_surface[name].values, per_point[name].values,
                                       rtol=1e-9, atol=1e-9, err_msg=name)
        # R̂ and bulk ESS are rank statistics (of |draw − median| for R̂'s tail): a rounding
        # difference between the two programs that swaps two nearly equal draws moves them
        # by a step (0.2 % at one cell on CI's processor), not by rounding
        for name in ("mcmc_rhat", "mcmc_bulk_ess"):
            np.testing.assert_allclose(batched_surface[name].values, per_point[name].values,
                                       rtol=0.02, err_msg=name)
        assert np.isfinite(batched_surface.mcmc_upper.values).all()
    with pytest.raises(ValueError, match="chunk_size"):
        mcmc.ais_grid(model, data.X, data.y, [model.init_params()], chunk_size="all")
