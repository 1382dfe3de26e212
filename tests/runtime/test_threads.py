"""bnlab's settings (``bnlab.configure``, applied by the first model a process builds)
leave one OpenBLAS thread per process (bnlab/_runtime/threads.py), unless
OPENBLAS_NUM_THREADS says otherwise. Run in fresh interpreters: the limit is process-wide."""
import json
import os
import subprocess
import sys

PROBE = ("import json, bnlab, threadpoolctl, jax.numpy as jnp;"
         "bnlab.GP(bnlab.kernels.RBF(), bnlab.likelihoods.Gaussian());"
         "jnp.linalg.cholesky(jnp.eye(3)).block_until_ready();"
         "print(json.dumps([(i['filepath'], i['num_threads']) for i in threadpoolctl.threadpool_info()"
         " if i['internal_api'] == 'openblas']))")


def _openblas_threads(env):
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_sets_one_openblas_thread_including_the_one_jaxlib_uses():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    libs = _openblas_threads(env)
    assert any("scipy" in path for path, _ in libs)       # the OpenBLAS of jaxlib's LAPACK calls
    assert all(threads == 1 for _, threads in libs)


def test_an_explicit_openblas_num_threads_is_respected(monkeypatch):
    from bnlab._runtime.threads import limit_openblas_threads
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert limit_openblas_threads() is False
    libs = _openblas_threads(dict(os.environ))
    assert libs and all(threads == min(2, os.cpu_count()) for _, threads in libs)
