"""``bnlab.configure``: the process-wide settings bnlab's numerics need, made explicit.

``import bnlab`` changes nothing in the process. The settings below are applied by
``configure(...)``, or, with their defaults, the first time bnlab's numerics are used —
a kernel or a model built, a likelihood's targets checked, a program compiled — unless
``configure`` was called before (``ensure_configured``). So
``bnlab.infer`` and ``bnlab.surface`` compute in float64 whether or not a script calls
``configure``, and a script that wants other settings calls it first. The lab
(``apps/lab.py``) and the command line (``bnlab.cli``) call it with the defaults.

- ``x64``: JAX's 64-bit mode. bnlab's numerics are float64: the surfaces reach signal
  variances σ² ≈ 2e4, where a float32 Cholesky of B = I + W½KW½ fails, and EP's cavity
  precisions are differences of nearly equal numbers. False leaves JAX in float32, at
  the caller's risk.
- ``blas_threads``: the OpenBLAS threads of the process (``threads``): "auto" sets one,
  unless ``OPENBLAS_NUM_THREADS`` is set, which is then respected; an integer sets that
  many; None leaves them as they are.
- ``compile_cache``: JAX's persistent compilation cache (``xla_cache``): True puts it in
  bnlab's cache directory unless ``BNLAB_XLA_CACHE`` is 0/off or a directory is already
  chosen for JAX; a path uses that directory; False leaves JAX's setting as it is.
- ``lapack_slicing``: the sliced lowering of batched LAPACK calls that keeps older
  jaxlibs from deadlocking (``lapack_batches``; nothing on a jaxlib that does not need
  it). False does not install it (one installed earlier in the process stays).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

import jax

__all__ = ["configure", "ensure_configured", "configuration", "Configuration"]


class Configuration(NamedTuple):
    """The settings ``configure`` applied."""
    x64: bool
    blas_threads: int | None       # the OpenBLAS threads set; None: left as they were
    compile_cache: str | None      # the persistent cache directory in use, or None
    lapack_slicing: bool           # the sliced LAPACK lowering is installed


_lock = threading.RLock()
_current: Configuration | None = None


def configure(*, x64: bool = True, blas_threads="auto", compile_cache=True,
              lapack_slicing: bool = True) -> Configuration:
    """Apply bnlab's process-wide settings (the module docstring says what each does)
    and return them. May be called again: each call applies what it is given."""
    global _current
    if not isinstance(x64, bool):
        raise TypeError(f"x64 must be True or False, got {x64!r}")
    if not isinstance(lapack_slicing, bool):
        raise TypeError(f"lapack_slicing must be True or False, got {lapack_slicing!r}")
    if not (blas_threads is None or blas_threads == "auto"
            or (isinstance(blas_threads, int) and not isinstance(blas_threads, bool)
                and blas_threads >= 1)):
        raise ValueError(f"blas_threads must be 'auto', None or a positive integer, "
                         f"got {blas_threads!r}")
    if not isinstance(compile_cache, (bool, str, os.PathLike)):
        raise TypeError(f"compile_cache must be True, False or a directory, "
                        f"got {compile_cache!r}")
    from . import lapack_batches
    from .threads import limit_openblas_threads, set_openblas_threads
    from .xla_cache import enable_xla_cache
    with _lock:
        jax.config.update("jax_enable_x64", x64)
        threads = None
        if blas_threads == "auto":
            threads = 1 if limit_openblas_threads() else None
        elif blas_threads is not None:
            threads = set_openblas_threads(blas_threads)
        if compile_cache is True:
            enable_xla_cache()
        elif compile_cache is not False:
            enable_xla_cache(Path(compile_cache))
        if lapack_slicing:
            lapack_batches.install()
        cache_dir = jax.config.jax_compilation_cache_dir
        _current = Configuration(x64, threads, str(cache_dir) if cache_dir else None,
                                 lapack_batches._installed)
        return _current


def ensure_configured() -> Configuration:
    """``configure()`` with its defaults, unless it was called already: what bnlab's
    numerics call before they run (a bool check once done)."""
    if _current is not None:
        return _current
    with _lock:
        return _current if _current is not None else configure()


def configuration() -> Configuration | None:
    """The settings ``configure`` last applied, or None before the first call."""
    return _current
