"""Every program bnlab compiles goes to the persistent compilation cache, under keys a
new process computes again. ``bnlab warmup`` fills it for the lab's opening page and the
README's example, also in a cache directory chosen for JAX (whose thresholds would keep
only slow programs): a process after it compiles nothing for those, and (in bnlab's own
directory) a second process running them and a small surface compiles nothing at all (counted from JAX's monitoring
events by ``bnlab._runtime.compile_log``), the lab's opening run and the surface's three
block programs loaded as stored executables, neither traced nor lowered, the surface
giving the first process's bits; warmup names an unknown job and refuses a cache that is off.
And an inference compiles its engine's programs only, no eager
operation one by one."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_README = """
with CompileLog() as logs["readme"]:
    import bnlab
    ds = bnlab.datasets.load("breast_cancer")
    model = bnlab.GP(kernel=bnlab.kernels.Matern52(lengthscale=2.0, variance=1.0),
                     likelihood=bnlab.likelihoods.Bernoulli(link="probit"))
    res = bnlab.infer(model, ds.X, ds.y, method="pep", alpha=0.5, damping=0.5)
    res.predict(ds.X_test), res.log_predictive(ds.X_test, ds.y_test)
"""
_SURFACE_AND_LAB = """
with CompileLog() as logs["surface"]:
    import numpy as np
    X, y = bnlab.datasets.synthetic_probit()
    surf = bnlab.surface(model, X[:40], y[:40], methods=["laplace", "vi", "ep"],
                         grid={"lengthscale": np.exp(np.linspace(-1, 5, 3)),
                               "variance": np.exp(np.linspace(-2, 10, 3))})
values["surface"] = surf["log_marginal"].values.ravel().tolist()
with CompileLog() as logs["lab"]:
    from bnlab.ui.app import Lab
    Lab().start()
"""


def _script(*works) -> str:
    """A process running ``works`` (the README's example; a 3 × 3 three-method surface
    and the lab's opening page), each under its own log; it prints what XLA compiled,
    loaded and what JAX traced for each."""
    return ("import json\nfrom bnlab._runtime.compile_log import CompileLog\n"
            "logs, values = {}, {}\n" + "".join(works) +
            'print(json.dumps({k: {"compiled": v.compiled, "loaded": len(v.loaded), '
            '"executables": v.loaded.count("stored_executable"), '
            '"traced": v.traced, "values": values.get(k)} for k, v in logs.items()}))\n')


def _env(cache_dir, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE")}
    env.update(BNLAB_CACHE_DIR=str(cache_dir), JAX_PLATFORMS="cpu", **extra)
    return env


def _run(args, env):
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)


def _compiled_in_a_new_process(env, *works):
    out = _run(["-c", _script(*works)], env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_after_warmup_and_in_a_second_process_nothing_compiles(tmp_path):
    env = _env(tmp_path)
    warm = _run(["-m", "bnlab.cli", "warmup", "--only", "lab,readme"], env)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert "bnlab warmup" in warm.stderr            # the progress bar
    assert "lab: " in warm.stdout and "readme: " in warm.stdout
    first = _compiled_in_a_new_process(env, _README, _SURFACE_AND_LAB)
    for work in ("readme", "lab"):                   # what the warmup covers
        assert first[work]["compiled"] == [] and first[work]["loaded"] > 0, first
    assert first["surface"]["compiled"], first          # not covered: compiled, and cached
    second = _compiled_in_a_new_process(env, _README, _SURFACE_AND_LAB)
    for work, log in second.items():
        assert log["compiled"] == [], f"{work}: compiled again in a second process: {log}"
        assert log["loaded"] > 0, f"{work}: loaded nothing from the cache: {log}"
    # the lab's opening run (its engine's init and step, the band's predictions and
    # predictive moments) and the surface's block programs are stored executables: a
    # second process neither traces nor lowers any of them (the surface: only JAX's
    # one-operation staging of a scalar besides), and the surface has the first
    # process's bits
    assert second["lab"]["traced"] == [], second["lab"]
    assert second["surface"]["traced"] == ["stage"], second["surface"]
    assert second["surface"]["executables"] == 3, second["surface"]
    assert second["surface"]["values"] == first["surface"]["values"]


def test_warmup_writes_every_program_into_a_directory_chosen_for_jax(tmp_path):
    """A directory chosen for JAX keeps JAX's thresholds for a script's own programs
    (``xla_cache``), but warmup writes every program of its jobs there."""
    env = _env(tmp_path / "bnlab", JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax"))
    warm = _run(["-m", "bnlab.cli", "warmup", "--only", "readme"], env)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert not (tmp_path / "bnlab" / "xla").exists()     # JAX's directory was kept
    after = _compiled_in_a_new_process(env, _README)["readme"]
    assert after["compiled"] == [] and after["loaded"] > 0, after


def test_warmup_names_an_unknown_job_and_refuses_a_cache_that_is_off(tmp_path):
    unknown = _run(["-m", "bnlab.cli", "warmup", "--only", "lab,nope"], _env(tmp_path))
    assert unknown.returncode == 2 and "unknown job(s) nope" in unknown.stderr
    off = _run(["-m", "bnlab.cli", "warmup", "--only", "readme"],
               _env(tmp_path, BNLAB_XLA_CACHE="0"))
    assert off.returncode == 2 and "compilation cache is off" in off.stderr


#: a site method's inference with its predictions, and a G-KL inference, in a process
#: whose JAX listener counts every program XLA compiles (no cache)
ONE_PROGRAM_PER_STAGE = """
import json, jax
compiled = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, fun_name="?", **_: compiled.append(fun_name)
    if event == "/jax/core/compile/backend_compile_duration" else None)
import bnlab
ds = bnlab.datasets.load("classification_1d", n=30)
model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
res = bnlab.infer(model, ds.X, ds.y, method="ep")
res.predict(ds.X_test), res.log_predictive(ds.X_test, ds.y_test)
site = list(compiled)
bnlab.infer(model, ds.X, ds.y, method="gkl", covariance="banded", band=3)
print(json.dumps({"site": site, "gkl": compiled[len(site):]}))
"""


def test_inference_compiles_one_program_per_stage_and_no_eager_operation():
    env = dict(os.environ, BNLAB_XLA_CACHE="0", JAX_PLATFORMS="cpu")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", ONE_PROGRAM_PER_STAGE], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["site"] == ["jit(run_pure)", "jit(predict_pure)", "jit(log_predictive_pure)"]
    assert got["gkl"] == ["jit(run)", "jit(summary)"]
