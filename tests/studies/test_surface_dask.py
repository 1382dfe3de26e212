"""bnlab.surface(client=...) on a Dask LocalCluster of two worker processes: the same
Dataset as in-process (every method, AIS with a fixed seed), attrs["workers"], and a
worker killed mid-run has its blocks recomputed elsewhere."""
import os
import signal

import numpy as np
import pytest

import bnlab

distributed = pytest.importorskip("distributed")

GRID = {"lengthscale": np.exp(np.linspace(-0.5, 1.5, 3)), "variance": np.exp(np.linspace(-1, 3, 3))}
MCMC = {"num_temps": 20, "num_chains": 4, "chunk_size": 3, "seed": 3, "use_cache": False}


@pytest.fixture(scope="module")
def problem():
    ds = bnlab.datasets.load("classification_1d", n=20)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    return model, ds


@pytest.fixture(scope="module")
def client():
    import jax                # the workers share the suite's compiled-program cache
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None,
                                       env={"JAX_COMPILATION_CACHE_DIR": jax.config.jax_compilation_cache_dir})
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _surface(problem, methods, **kw):
    model, ds = problem
    return bnlab.surface(model, ds.X, ds.y, methods=methods, grid=GRID, X_test=ds.X_test,
                         y_test=ds.y_test, mcmc_options=MCMC, **kw)


def _assert_close(a, b):
    for name in ("log_marginal", "log_predictive", "log_marginal_se"):
        if name in a:
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=0, atol=1e-8,
                                       err_msg=name)
    for name in ("iterations", "converged", "diverged", "psd"):
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def test_a_cluster_gives_the_in_process_surface(problem, client):
    methods = ["laplace", "vi", "ep", "ep_like", "gkl", "mcmc"]
    local = _surface(problem, methods)
    remote = _surface(problem, methods, client=client)
    assert np.isfinite(remote.log_marginal.values).all()
    _assert_close(remote, local)
    assert remote.attrs["workers"] == 2 and remote.attrs["cancelled"] == 0


def test_a_killed_worker_s_blocks_are_recomputed(problem, client):
    methods = ["laplace", "ep"]
    local = _surface(problem, methods, warm_start=False, chunk_size=1)
    pids = client.run(os.getpid)
    killed = []

    def kill_one(fraction):          # after the first finished block: kill a busy worker
        if killed:
            return
        busy = [w for w, keys in client.processing().items() if keys] or list(pids)
        os.kill(pids[busy[0]], signal.SIGKILL)
        killed.append(busy[0])

    remote = _surface(problem, methods, client=client, warm_start=False, chunk_size=1,
                      progress=kill_one)
    assert killed
    _assert_close(remote, local)
    assert remote.attrs["cancelled"] == 0


def test_the_command_line_sends_blocks_to_a_scheduler(client, tmp_path):
    import pandas as pd
    import xarray as xr
    from bnlab.cli import main
    ds = bnlab.datasets.load("classification_1d", n=20)
    data = tmp_path / "data.csv"
    pd.DataFrame({"x": ds.X[:, 0], "label": ds.y}).to_csv(data, index=False)
    args = ["surface", "--data", str(data), "--likelihood", "probit", "--methods", "laplace",
            "--grid", "lengthscale=-1:1:2", "--grid", "variance=0:1:3",
            "--scheduler", client.scheduler.address, "--store", str(tmp_path / "s.zarr")]
    assert main(args + ["--out", str(tmp_path / "a.nc")]) == 0
    first = xr.load_dataset(tmp_path / "a.nc")
    assert first.attrs["workers"] >= 1 and np.isfinite(first.log_marginal.values).all()
    assert main(args + ["--out", str(tmp_path / "b.nc")]) == 0          # read from the store
    again = xr.load_dataset(tmp_path / "b.nc")
    assert again.attrs["blocks_from_store"] == 3
    np.testing.assert_array_equal(again.log_marginal.values, first.log_marginal.values)


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, capsys):
    import pandas as pd
    from bnlab.cli import main
    ds = bnlab.datasets.load("classification_1d", n=20)
    data = tmp_path / "data.csv"
    pd.DataFrame({"x": ds.X[:, 0], "label": ds.y}).to_csv(data, index=False)
    assert main(["surface", "--data", str(data), "--likelihood", "probit", "--methods", "laplace",
                 "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "s.nc")]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err


def test_a_cluster_gives_the_in_process_batched_surface(problem, client):
    """``batching="vmap"`` on the cluster: each task a batch of blocks, solved by the
    worker's vmapped program; the in-process batched surface, progress once per task."""
    methods = ["laplace", "ep"]
    local = _surface(problem, methods, batching="vmap")
    seen = []
    remote = _surface(problem, methods, batching="vmap", client=client, progress=seen.append)
    assert remote.attrs["batching"] == "vmap" and remote.attrs["cancelled"] == 0
    _assert_close(remote, local)
    # two runs × (the first column, then its three rows as one batch)
    assert len(seen) == 4 and seen[-1] == 1.0
