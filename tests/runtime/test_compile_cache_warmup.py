"""``bnlab warmup`` fills the persistent compilation cache: after it, a new process
running the covered work (the lab's opening page, the README's example) compiles
nothing, also in a cache directory chosen for JAX (whose thresholds would keep only
slow programs); its job list is checked, and a cache that is off is refused."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

COVERED = """
import json
from bnlab._runtime.compile_log import CompileLog
with CompileLog() as log:
    import bnlab
    from bnlab.ui.app import Lab
    Lab().start()
    ds = bnlab.datasets.load("breast_cancer")
    model = bnlab.GP(kernel=bnlab.kernels.Matern52(lengthscale=2.0, variance=1.0),
                     likelihood=bnlab.likelihoods.Bernoulli(link="probit"))
    res = bnlab.infer(model, ds.X, ds.y, method="pep", alpha=0.5, damping=0.5)
    res.predict(ds.X_test), res.log_predictive(ds.X_test, ds.y_test)
print(json.dumps({"compiled": log.compiled, "loaded": len(log.loaded)}))
"""


def _env(cache_dir, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "BNLAB_XLA_CACHE")}
    env.update(BNLAB_CACHE_DIR=str(cache_dir), JAX_PLATFORMS="cpu", **extra)
    return env


def _run(args, env):
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)


def test_after_warmup_the_covered_work_compiles_nothing(tmp_path):
    warm = _run(["-m", "bnlab.cli", "warmup", "--only", "lab,readme"], _env(tmp_path))
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert "bnlab warmup" in warm.stderr            # the progress bar
    assert "lab: " in warm.stdout and "readme: " in warm.stdout
    after = _run(["-c", COVERED], _env(tmp_path))
    assert after.returncode == 0, after.stderr[-3000:]
    got = json.loads(after.stdout.strip().splitlines()[-1])
    assert got["compiled"] == [] and got["loaded"] > 0, got


def test_warmup_names_an_unknown_job_and_refuses_a_cache_that_is_off(tmp_path):
    unknown = _run(["-m", "bnlab.cli", "warmup", "--only", "lab,nope"], _env(tmp_path))
    assert unknown.returncode == 2 and "unknown job(s) nope" in unknown.stderr
    off = _run(["-m", "bnlab.cli", "warmup", "--only", "readme"],
               _env(tmp_path, BNLAB_XLA_CACHE="0"))
    assert off.returncode == 2 and "compilation cache is off" in off.stderr


LAB = """
import json
from bnlab._runtime.compile_log import CompileLog
from bnlab.ui.app import Lab
with CompileLog() as log:
    Lab().start()
print(json.dumps({"compiled": log.compiled, "loaded": len(log.loaded)}))
"""


def test_warmup_writes_every_program_into_a_directory_chosen_for_jax(tmp_path):
    env = _env(tmp_path / "bnlab", JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax"))
    warm = _run(["-m", "bnlab.cli", "warmup", "--only", "lab"], env)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert not (tmp_path / "bnlab" / "xla").exists()     # JAX's directory was kept
    after = _run(["-c", LAB], env)
    assert after.returncode == 0, after.stderr[-3000:]
    got = json.loads(after.stdout.strip().splitlines()[-1])
    assert got["compiled"] == [] and got["loaded"] > 0, got
