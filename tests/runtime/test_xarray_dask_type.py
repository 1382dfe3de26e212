"""A surface's Dataset leaves dask.array unimported (a third of a second in a new
process), and xarray still knows a dask array for one once dask.array is imported."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
import numpy as np
import bnlab
X = np.linspace(-1, 1, 12)[:, None]
y = np.sign(np.sin(4 * X[:, 0]) + 0.1)
model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
ds = bnlab.surface(model, X, y, methods=["laplace"],
                   grid={"lengthscale": [0.3, 1.0], "variance": [1.0, 2.0]})
deferred = "dask.array" not in sys.modules
import dask.array as da
import xarray as xr
from xarray.namedarray.pycompat import array_type
chunked = ds.chunk({"lengthscale": 1})
lazy = xr.DataArray(da.ones((4, 2), chunks=2), dims=("a", "b"))
print(json.dumps({"deferred": deferred,
                  "type": [t.__name__ for t in array_type("dask")],
                  "chunked": isinstance(chunked["log_marginal"].data, da.Array),
                  "lazy_chunks": [list(c) for c in lazy.chunks],
                  "same": bool(np.array_equal(chunked["log_marginal"].values,
                                              ds["log_marginal"].values, equal_nan=True))}))
"""


def test_a_surface_does_not_import_dask_array_and_dask_arrays_still_work(tmp_path):
    env = dict(os.environ, BNLAB_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["deferred"], "building the surface's Dataset imported dask.array"
    assert got["type"] == ["Array"]
    assert got["chunked"] and got["same"]
    assert got["lazy_chunks"] == [[2, 2], [2]]
