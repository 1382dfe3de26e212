"""bnlab turns on JAX's persistent compilation cache under its cache directory: a second
process loads the compiled programs the first one wrote (JAX's cache-hit events), the
switch BNLAB_XLA_CACHE=0 turns it off, and a directory chosen beforehand is kept."""
import json
import os
import subprocess
import sys
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, jax
hits, misses = [], []
def listen(event, **kw):
    if event == "/jax/compilation_cache/cache_hits": hits.append(1)
    if event == "/jax/compilation_cache/cache_misses": misses.append(1)
jax.monitoring.register_event_listener(listen)
import bnlab
ds = bnlab.datasets.load("classification_1d", n=24)
model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
r = bnlab.infer(model, ds.X, ds.y, method="ep")
print(json.dumps({"hits": len(hits), "misses": len(misses), "lml": float(r.log_marginal),
                  "dir": jax.config.jax_compilation_cache_dir}))
"""


def _run(tmp_path, **env):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE")}
    environ.update(BNLAB_CACHE_DIR=str(tmp_path), JAX_PLATFORMS="cpu", **env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environ,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_compiled_programs_from_the_cache(tmp_path):
    # the programs as jax.jit compiles them (not bnlab's stored exports and executables,
    # which a second process loads without asking this cache: test_exported_programs)
    first = _run(tmp_path, BNLAB_EXPORT_CACHE="0")
    assert first["dir"] == str(tmp_path / "xla")
    assert first["misses"] > 0    # (a program the process builds twice is a hit the 2nd time)
    written = [p for p in (tmp_path / "xla").iterdir() if p.name.endswith("-cache")]
    assert written, "the first process wrote no compiled program"
    second = _run(tmp_path, BNLAB_EXPORT_CACHE="0")
    assert second["hits"] >= len(written) and second["misses"] == 0
    assert second["lml"] == first["lml"]


def test_the_cache_can_be_turned_off(tmp_path):
    out = _run(tmp_path, BNLAB_XLA_CACHE="0")
    assert out["dir"] is None and out["hits"] == 0
    assert not (tmp_path / "xla").exists()


def test_a_cache_directory_chosen_before_import_is_kept():
    # tests/conftest.py chose the suite's own directory before bnlab was imported
    import bnlab  # noqa: F401
    assert jax.config.jax_compilation_cache_dir == os.environ.get(
        "BNLAB_TEST_XLA_CACHE", str(Path(__import__("tempfile").gettempdir()) / "bnlab-test-xla-cache"))
