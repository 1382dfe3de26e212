"""One OpenBLAS thread per process, unless the user chose a number.

XLA:CPU runs its matrix products on its own thread pool, and its LAPACK custom calls
(the Cholesky, triangular solves) on SciPy's OpenBLAS, whose default is one thread per
core. Those threads then compete with XLA's: measured on a 2-core machine with nothing
else running (benchmarks/README.md, tenth session), a CVI iteration inside
``Engine.run`` took 0.74 / 8.0 / 40 ms at N = 200 / 500 / 1000 with OpenBLAS's default
and 0.55 / 5.4 / 29 ms with one thread, a pl2 step at N = 1000 62 against 45 ms; on a
loaded machine a 281 × 281 Cholesky took 211 ms instead of 1.5 ms. So bnlab sets every
OpenBLAS in the process (SciPy's, and NumPy's, which plain NumPy code in the same
process shares) to one thread, through ``threadpoolctl`` at import — unless
``OPENBLAS_NUM_THREADS`` is set, which is then respected.
"""
from __future__ import annotations

import os


def limit_openblas_threads() -> bool:
    """Set every loaded OpenBLAS to one thread; False (and nothing changed) when
    ``OPENBLAS_NUM_THREADS`` is set."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return False
    import scipy.linalg  # noqa: F401  (loads the OpenBLAS that jaxlib's LAPACK calls use)
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=1, user_api="blas")
    return True
