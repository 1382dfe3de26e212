"""One OpenBLAS thread per process, unless the user chose a number.

XLA:CPU runs its matrix products on its own thread pool, and its LAPACK custom calls
(the Cholesky, triangular solves) on SciPy's OpenBLAS, whose default is one thread per
core. Those threads then compete with XLA's for the same cores, which slows every
iteration and, on a loaded machine, a single Cholesky by two orders of magnitude
(benchmarks/README.md, "Serving large problems"). So bnlab sets every
OpenBLAS in the process (SciPy's, and NumPy's, which plain NumPy code in the same
process shares) to one thread, through ``threadpoolctl``, when ``bnlab.configure`` runs
(``configure``) — unless ``OPENBLAS_NUM_THREADS`` is set, which is then respected.
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


def set_openblas_threads(count: int) -> int:
    """Set every loaded OpenBLAS to ``count`` threads (``bnlab.configure(blas_threads=)``)."""
    import scipy.linalg  # noqa: F401  (as above)
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=int(count), user_api="blas")
    return int(count)
