"""``import bnlab`` changes nothing in the process; ``bnlab.configure`` applies bnlab's
settings, and the first use of bnlab's numerics applies the defaults when no one called
it, so ``infer`` computes in float64 either way (``bnlab._runtime.configure``). Run in
fresh interpreters: the settings are process-wide (and tests/conftest.py configures
this one)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: the settings before and after ``import bnlab``, after building a model, and what a
#: first ``infer`` computes in
LAZY = """
import json, jax, scipy.linalg, threadpoolctl
def state():
    from bnlab._runtime import lapack_batches
    return {"x64": jax.config.jax_enable_x64, "cache": jax.config.jax_compilation_cache_dir,
            "blas": sorted(i["num_threads"] for i in threadpoolctl.threadpool_info()
                           if i["internal_api"] == "openblas"),
            "sliced": lapack_batches._installed}
before = {"x64": jax.config.jax_enable_x64, "cache": jax.config.jax_compilation_cache_dir}
import bnlab
imported = state()
ds = bnlab.datasets.load("classification_1d", n=20)
res = bnlab.infer(bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli()),
                  ds.X, ds.y, method="ep")
print(json.dumps({"before": before, "imported": imported, "used": state(),
                  "dtypes": [str(res.mean.dtype), str(res.state.energy.dtype),
                             str(res.state.sites.prec.dtype)]}))
"""

#: ``configure`` called before the first model is what stays
EXPLICIT = """
import json, jax, bnlab
got = bnlab.configure(x64=False, blas_threads=None, compile_cache=False, lapack_slicing=False)
bnlab.GP(bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian())
print(json.dumps({"x64": jax.config.jax_enable_x64, "cache": jax.config.jax_compilation_cache_dir,
                  "returned": got._asdict()}))
"""


def _run(script, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE", "JAX_ENABLE_X64",
                        "OPENBLAS_NUM_THREADS")}
    env.update(BNLAB_CACHE_DIR=str(tmp_path), JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_changes_nothing_and_the_first_infer_is_float64(tmp_path):
    got = _run(LAZY, tmp_path)
    assert got["before"] == {"x64": False, "cache": None}
    imported = got["imported"]
    assert imported["x64"] is False and imported["cache"] is None
    assert imported["sliced"] is False
    assert got["used"]["x64"] is True
    assert got["used"]["cache"] == str(tmp_path / "xla")
    assert got["used"]["blas"] and all(n == 1 for n in got["used"]["blas"])
    assert got["dtypes"] == ["float64"] * 3


def test_configure_called_first_is_kept(tmp_path):
    got = _run(EXPLICIT, tmp_path)
    assert got["x64"] is False and got["cache"] is None
    assert got["returned"] == {"x64": False, "blas_threads": None, "compile_cache": None,
                               "lapack_slicing": False}
    assert not (tmp_path / "xla").exists()


@pytest.mark.parametrize("kwargs, error", [
    ({"x64": "yes"}, TypeError), ({"blas_threads": 0}, ValueError),
    ({"blas_threads": True}, ValueError), ({"blas_threads": "two"}, ValueError),
    ({"compile_cache": 3}, TypeError), ({"lapack_slicing": None}, TypeError),
])
def test_configure_rejects_bad_settings(kwargs, error):
    import bnlab
    with pytest.raises(error, match=next(iter(kwargs))):
        bnlab.configure(**kwargs)
