"""``import bnlab`` stays light: the heavy parts (Panel, Dask, Zarr, xarray with pandas,
netCDF, SciPy's optimisers and special functions, optax) are imported where they are used, the public names that
need them still resolve, and importing compiles no program."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("panel", "bokeh", "holoviews", "dask", "distributed", "zarr", "xarray", "pandas",
         "netCDF4", "h5netcdf", "scipy.optimize", "scipy.special", "optax")

SCRIPT = """
import json, sys
import bnlab
before = sorted(m for m in %r if m in sys.modules)
names = [bnlab.surface.__name__, bnlab.studies.surface.__name__,
         bnlab.studies.frozen_ep.__name__, bnlab.studies.surfaces.__name__]
print(json.dumps({"imported": before, "names": names}))
""" % (HEAVY,)


def test_import_bnlab_leaves_the_heavy_libraries_out():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["imported"] == [], f"import bnlab imported {got['imported']}"
    assert got["names"] == ["surface", "surface", "bnlab.studies.frozen_ep",
                            "bnlab.studies.surfaces"]


COMPILES = """
import jax
compiled = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, fun_name="?", **_: compiled.append(fun_name)
    if event == "/jax/core/compile/backend_compile_duration" else None)
import bnlab
print(compiled)
"""


def test_import_bnlab_compiles_nothing():
    env = dict(os.environ, BNLAB_XLA_CACHE="0")
    out = subprocess.run([sys.executable, "-c", COMPILES], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", f"import bnlab compiled {out.stdout}"
