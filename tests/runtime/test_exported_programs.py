"""Programs kept as serialised ``jax.export`` modules (``bnlab._runtime.exported``): a
new process runs a surface's block solvers (scan and vmap paths), the engines' runs and
predictions (a full and a Markov GP), G-KL's programs and the MCMC reference's AIS
program without tracing or lowering them, and gets the same bits as the plain
``jax.jit`` path; the stored modules follow the disk cache's trust model (a damaged
entry is recomputed, a directory others can write is refused)."""
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnlab._runtime import disk_cache, executables, exported
from bnlab._runtime.compile_log import CompileLog

ROOT = Path(__file__).resolve().parents[2]

#: a 3 × 3 Laplace surface and an EP inference with its predictions under a log, then
#: (second process only) the same through plain ``jax.jit``; prints the traced and
#: compiled names and the values
SCRIPT = """
import json, os, sys
import numpy as np
from bnlab._runtime.compile_log import CompileLog
import bnlab
X, y = bnlab.datasets.synthetic_probit(n=40)
grid = {"lengthscale": np.exp(np.linspace(-1, 5, 3)), "variance": np.exp(np.linspace(-2, 10, 3))}
logit = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("logit"))
probit = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))

def run():
    surf = bnlab.surface(logit, X, y, methods=["laplace"], grid=grid, damping=1.0)
    res = bnlab.infer(probit, X[:30], y[:30], method="ep")
    mean, var = res.predict(X[30:])
    markov = bnlab.infer(bnlab.MarkovGP(bnlab.kernels.Matern52(), probit.likelihood),
                         X[:, :1], y, method="vi")        # a pytree class in its state
    return {**{k: surf[k].values.ravel().tolist()
               for k in ("log_marginal", "iterations", "converged")},
            "ep": [res.log_marginal, res.n_iters, *np.ravel(mean), *np.ravel(var),
                   *np.ravel(res.log_predictive(X[30:], y[30:], reduce="none"))],
            "markov": [markov.log_marginal, *np.ravel(markov.predict(X[:5, :1])[0])]}

with CompileLog() as log:
    out = {"values": run()}
out.update(traced=log.traced, compiled=log.compiled,
           executables=log.loaded.count("stored_executable"))
if sys.argv[1] == "second":
    os.environ["BNLAB_EXPORT_CACHE"] = "0"
    out["plain"] = run()
print(json.dumps(out, default=float))
"""


#: the vmap path's programs (a warm and a cold surface), G-KL's (a surface's bound and an
#: inference with its predictions) and the MCMC reference's (a surface's AIS chunk and
#: ``bnlab.mcmc.ais``'s single point), as SCRIPT; the plain ``jax.jit`` run is logged too
#: (it must trace the programs the stored ones replace)
SCRIPT_MORE = """
import json, os, sys
import numpy as np
from bnlab._runtime.compile_log import CompileLog
import bnlab
X, y = bnlab.datasets.synthetic_probit(n=24)
grid = {"lengthscale": np.exp(np.linspace(-1, 3, 2)), "variance": np.exp(np.linspace(-2, 4, 2))}
probit = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
AIS = dict(num_temps=8, num_chains=4, posterior_steps=8, use_cache=False)

def run():
    surf = bnlab.surface(probit, X, y, methods=["laplace", "gkl", "mcmc"], grid=grid,
                         batching="vmap", mcmc_options=AIS)
    cold = bnlab.surface(probit, X, y, methods=["laplace"], grid=grid, batching="vmap",
                         warm_start=False)
    res = bnlab.infer(probit, X[:20], y[:20], method="gkl", covariance="banded", band=3)
    mean, var = res.predict(X[20:])
    one = bnlab.mcmc.ais(probit, X[:20], y[:20], **AIS)
    H = np.c_[X[:, :2], np.ones(24)]                     # Bayesian probit regression
    reg = bnlab.gkl.fit(np.zeros(3), np.eye(3), H, probit.likelihood, y, "full")
    return {"surface": surf["log_marginal"].values.ravel().tolist(),
            "mcmc_upper": surf["mcmc_upper"].values.ravel().tolist(),
            "cold": cold["log_marginal"].values.ravel().tolist(),
            "gkl": [res.log_marginal, *np.ravel(mean), *np.ravel(var),
                    *np.ravel(res.log_predictive(X[20:], y[20:], reduce="none"))],
            "ais": [one.log_z, one.log_z_upper, *one.log_weights, *np.ravel(one.samples)],
            "fit": [reg.bound, *reg.mean, *np.ravel(reg.covariance())]}

with CompileLog() as log:
    out = {"values": run()}
out.update(traced=log.traced, compiled=log.compiled,
           executables=log.loaded.count("stored_executable"))
if sys.argv[1] == "second":
    os.environ["BNLAB_EXPORT_CACHE"] = "0"
    with CompileLog() as log:
        out["plain"] = run()
    out["plain_traced"] = log.traced
print(json.dumps(out, default=float))
"""


def _process(which, cache, script=SCRIPT):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE", "BNLAB_EXPORT_CACHE")}
    env.update(BNLAB_CACHE_DIR=str(cache), JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script, which], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


#: the programs exported: ``studies.devices``'s block solver (``call``) and the engines'
#: runs, predictions and predictive densities (EP's; the Markov GP's run and predictions)
PROGRAMS = ("call", "run_pure", "predict_pure", "log_predictive_pure")
STORED = 6


def test_a_second_process_runs_solvers_and_engines_untraced_with_the_same_bits(tmp_path):
    first = _process("first", tmp_path)
    assert set(PROGRAMS) <= set(first["traced"]) and first["compiled"], first
    assert len(list((tmp_path / "exported").glob("*.npz"))) == STORED
    second = _process("second", tmp_path)
    # neither traced nor lowered again, and nothing compiled: the stored executables
    assert not set(PROGRAMS) & set(second["traced"]), second["traced"]
    assert "exported_program" not in second["traced"] and second["compiled"] == [], second
    assert second["executables"] == STORED, second
    for k, v in first["values"].items():
        np.testing.assert_array_equal(second["values"][k], v, err_msg=k)
        np.testing.assert_array_equal(second["plain"][k], v, err_msg=k)
    assert all(second["values"]["converged"])


#: the programs SCRIPT_MORE exports: ``studies.devices``'s sharded programs (``call``: the
#: vmap path's warm and cold layouts, the AIS chunks), G-KL's surface bound (``bound``)
#: and its inference's run, predictions, predictive densities and summary, the engine
#: runs of AIS's EP start, and ``bnlab.gkl.fit``'s solver (also ``run``)
PROGRAMS_MORE = ("call", "bound", "run", "predict", "log_predictive", "summary", "run_pure")
#: two vmap layouts, a G-KL bound, two AIS chunk shapes, four G-KL programs, two EP
#: runs, a G-KL fit
STORED_MORE = 12


@pytest.mark.slow       # about 3 min on a 2-core CPU; the test above keeps the scan path's
def test_a_second_process_runs_vmap_gkl_and_mcmc_programs_untraced_with_the_same_bits(
        tmp_path):
    first = _process("first", tmp_path, SCRIPT_MORE)
    assert set(PROGRAMS_MORE) <= set(first["traced"]) and first["compiled"], first
    assert len(list((tmp_path / "exported").glob("*.npz"))) == STORED_MORE
    second = _process("second", tmp_path, SCRIPT_MORE)
    assert not set(PROGRAMS_MORE) & set(second["traced"]), second["traced"]
    assert "exported_program" not in second["traced"] and second["compiled"] == [], second
    assert second["executables"] == STORED_MORE, second
    # the plain path traces what the stored programs replace (what the test checks)
    assert set(PROGRAMS_MORE) <= set(second["plain_traced"]), second["plain_traced"]
    for k, v in first["values"].items():
        np.testing.assert_array_equal(second["values"][k], v, err_msg=k)
        np.testing.assert_array_equal(second["plain"][k], v, err_msg=k)
    assert np.all(np.isfinite(first["values"]["surface"]))
    assert np.all(np.isfinite(first["values"]["ais"]))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "bnlab"
    monkeypatch.setenv("BNLAB_CACHE_DIR", str(root))
    monkeypatch.delenv("BNLAB_EXPORT_CACHE", raising=False)
    exported._PROGRAMS.clear()
    assert exported.enabled()            # the suite's conftest sets a persistent cache
    yield root
    exported._PROGRAMS.clear()


def _program():
    """A jitted function over a pytree with a loop, and how often it was traced."""
    traces = []

    def f(tree, n):
        traces.append(1)
        x = tree["x"]
        return {"s": jax.lax.fori_loop(0, n, lambda i, a: a * 0.5 + jnp.sin(a), x),
                "t": [jnp.cumsum(x) / tree["scale"], x.sum()]}
    return jax.jit(f), traces


ARGS = ({"x": np.linspace(-2.0, 3.0, 7), "scale": np.float64(3.0)}, np.int32(5))


def _call(jitted, key="test-program"):
    return exported.call(jitted, key, ARGS, jax.devices("cpu")[:1])


def test_a_stored_program_is_run_without_tracing_and_gives_the_same_bits(cache):
    jitted, traces = _program()
    want = jax.tree_util.tree_map(np.asarray, jitted(*ARGS))
    got = _call(jitted)
    assert len(list((cache / "exported").glob("*.npz"))) == 1
    exported._PROGRAMS.clear()                      # as in a new process
    traces.clear()
    again = _call(jitted)
    assert traces == []
    for out in (got, again):
        jax.tree_util.tree_map(np.testing.assert_array_equal, want,
                               jax.tree_util.tree_map(np.asarray, out))


def test_the_key_holds_shapes_dtypes_the_code_and_only_reproducible_descriptions(
        cache, monkeypatch):
    devices = jax.devices("cpu")[:1]
    base = exported.program_digest("p", ARGS, devices)
    assert exported.program_digest("p", ARGS, devices) == base
    wider = ({"x": np.zeros(8), "scale": np.float64(3.0)}, np.int32(5))
    single = ({"x": np.zeros(7, np.float32), "scale": np.float64(3.0)}, np.int32(5))
    weak = ({"x": np.zeros(7), "scale": 3.0}, np.int32(5))
    listed = ([np.zeros(7), np.float64(3.0)], np.int32(5))
    digests = {base, exported.program_digest("q", ARGS, devices)} | {
        exported.program_digest("p", a, devices) for a in (wider, single, weak, listed)}
    # JAX arrays, asked twice (the second answer from this process's memo): their
    # abstract value decides, as a NumPy argument's does
    for _ in range(2):
        same = ({"x": jnp.zeros(7), "scale": jnp.asarray(np.float64(3.0))}, jnp.int32(5))
        assert exported.program_digest("p", same, devices) == base
        weak_jax = ({"x": jnp.zeros(7), "scale": jnp.asarray(3.0)}, jnp.int32(5))
        assert exported.program_digest("p", weak_jax, devices) == \
            exported.program_digest("p", weak, devices)
    monkeypatch.setattr(exported, "source_digest", lambda: "edited code")
    digests.add(exported.program_digest("p", ARGS, devices))
    assert len(digests) == 7
    assert exported.program_digest(object(), ARGS, devices) is None
    jitted, traces = _program()
    _call(jitted, key=("engine", object()))         # an address: run plain, store nothing
    exported.call(jitted, "p", ARGS, devices * 2)   # several devices: plain too
    assert not (cache / "exported").exists()
    assert len(traces) == 1                          # both were the plain jit's program


def test_a_damaged_entry_is_recomputed(cache):
    jitted, traces = _program()
    want = np.asarray(_call(jitted)["s"])
    [entry] = (cache / "exported").glob("*.npz")
    raw = bytearray(entry.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    entry.write_bytes(bytes(raw))
    exported._PROGRAMS.clear()                      # a new process: traced again
    jitted, traces = _program()
    with pytest.warns(disk_cache.CacheWarning, match="damaged entry"):
        got = np.asarray(_call(jitted)["s"])
    assert traces and np.array_equal(got, want)
    exported._PROGRAMS.clear()
    jitted, traces = _program()
    _call(jitted)                                   # the rewritten entry loads
    assert traces == []


def test_a_directory_others_can_write_is_neither_read_nor_written(cache):
    jitted, traces = _program()
    want = np.asarray(_call(jitted)["s"])
    (cache / "exported").chmod(0o777)
    exported._PROGRAMS.clear()                      # a new process
    jitted, traces = _program()
    with pytest.warns(disk_cache.CacheWarning, match="can be written by its group or others"):
        got = np.asarray(_call(jitted)["s"])
    assert traces, "a planted program must not be loaded from a writable directory"
    assert np.array_equal(got, want)


def test_trimming_tolerates_entries_another_process_removed(tmp_path):
    """Processes trim the stored programs side by side: an entry listed by one and
    removed by another before its time was read failed the listing process's call
    with FileNotFoundError (two surface tests in a full run); it counts as oldest."""
    from bnlab._runtime import exported
    kept = tmp_path / "kept.npz"
    kept.write_bytes(b"x")
    gone = tmp_path / "gone.npz"
    assert disk_cache._written(gone) == 0.0
    assert sorted([kept, gone], key=disk_cache._written) == [gone, kept]


def _unique_program(offset):
    """A jitted program no earlier run left in JAX's persistent cache (``offset`` is
    baked into it), and how often it was traced."""
    traces = []

    def f(tree, n):
        traces.append(1)
        return jax.lax.fori_loop(0, n, lambda i, a: a * 0.5 + jnp.sin(a), tree["x"]) + offset
    return jax.jit(f), traces


@pytest.fixture
def every_program_kept():
    """JAX's persistent cache keeps small programs too (the suite's keeps slow ones)."""
    name = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, name)
    jax.config.update(name, 0.0)
    yield
    jax.config.update(name, before)


def test_an_executable_is_stored_when_compiled_and_loaded_with_the_same_bits(
        cache, every_program_kept):
    offset = float(np.random.default_rng().integers(1, 2 ** 40))
    jitted, traces = _unique_program(offset)
    want = np.asarray(jitted(*ARGS))
    assert np.array_equal(np.asarray(_call(jitted)), want)
    [entry] = sorted((cache / executables.KIND).glob("*.npz"))
    exported._PROGRAMS.clear()                      # as in a new process
    traces.clear()
    with CompileLog() as log:
        got = np.asarray(_call(jitted))
    assert traces == [] and log.traced == [] and log.loaded == ["stored_executable"]
    assert np.array_equal(got, want)
    # a program JAX's persistent cache supplied is not stored (re-serialised, a loaded
    # XLA:CPU executable lacks its kernels' code): the export is lowered, nothing written
    entry.unlink()
    exported._PROGRAMS.clear()
    jax.clear_caches()
    with CompileLog() as log:
        again = np.asarray(_call(jitted))
    assert log.compiled == [] and "exported_program" in log.traced
    assert not list((cache / executables.KIND).glob("*.npz"))
    assert np.array_equal(again, want)


@pytest.mark.parametrize("damage", ["bytes", "payload"])
def test_a_damaged_or_foreign_executable_is_compiled_again(cache, damage):
    offset = float(np.random.default_rng().integers(1, 2 ** 40))
    jitted, _ = _unique_program(offset)
    want = np.asarray(_call(jitted))
    [entry] = sorted((cache / executables.KIND).glob("*.npz"))
    if damage == "bytes":                           # fails its checksum
        raw = bytearray(entry.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        entry.write_bytes(bytes(raw))
        match = "damaged entry"
    else:                                           # a valid entry that is no executable
        disk_cache.store(executables.KIND, entry.stem,
                         {"executable": np.frombuffer(zlib.compress(b"not a pickle"),
                                                      np.uint8)})
        match = "ignoring the stored executable"
    exported._PROGRAMS.clear()
    with pytest.warns(disk_cache.CacheWarning, match=match):
        got = np.asarray(_call(jitted))
    assert np.array_equal(got, want)


def test_another_jaxlib_lowers_the_stored_export_and_stores_no_executable(
        cache, monkeypatch):
    monkeypatch.setattr(executables, "TESTED_JAXLIB", (0, 0))
    offset = float(np.random.default_rng().integers(1, 2 ** 40))
    jitted, traces = _unique_program(offset)
    want = np.asarray(jitted(*ARGS))
    assert np.array_equal(np.asarray(_call(jitted)), want)
    exported._PROGRAMS.clear()
    traces.clear()
    with CompileLog() as log:
        again = np.asarray(_call(jitted))
    assert traces == [] and "exported_program" in log.traced    # the export, lowered
    assert not (cache / executables.KIND).exists()
    assert len(list((cache / exported.KIND).glob("*.npz"))) == 1
    assert np.array_equal(again, want)
