"""JAX's persistent compilation cache under bnlab's cache directory, on by default when
``bnlab.configure`` runs (``configure``).

Every new process would otherwise recompile each engine, surface block solver and AIS
sampler it runs (XLA compilation dominates a small surface's wall time and the lab's
first plot); with the cache a second process loads the compiled executables from disk.
JAX writes by default only programs that took a second or more to compile; bnlab writes
every one (``MIN_COMPILE_SECONDS``), so that a second process compiles nothing at all.

The directory is ``$BNLAB_CACHE_DIR/xla`` (default ``~/.cache/bnlab/xla``, beside the
MCMC results of ``bnlab._runtime.disk_cache``). ``BNLAB_XLA_CACHE=0`` turns it off. A cache directory
already chosen for JAX (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``, e.g. by a test
harness) is left as it is.
"""
from __future__ import annotations

import os
from pathlib import Path

import jax

__all__ = ["enable_xla_cache", "xla_cache_dir", "MIN_COMPILE_SECONDS", "MAX_BYTES"]

#: every program is written, however fast it compiled: a process runs dozens of small
#: ones (predictions, the lab's plot data) whose compilations add up to seconds, while
#: loading a small one costs milliseconds
MIN_COMPILE_SECONDS = 0.0
#: the cache evicts its least recently used entries beyond this size
MAX_BYTES = 4 * 1024 ** 3

_OFF = {"0", "false", "no", "off"}


def xla_cache_dir() -> Path:
    """``$BNLAB_CACHE_DIR/xla`` or ``~/.cache/bnlab/xla``."""
    from .disk_cache import cache_dir
    return cache_dir() / "xla"


def enable_xla_cache(path: Path | None = None) -> Path | None:
    """Point JAX's persistent compilation cache at ``path`` if given, else at
    ``xla_cache_dir()`` unless ``BNLAB_XLA_CACHE`` is 0/false/no/off or a directory is
    already configured; returns the directory in use (None when off). A ``path`` that
    cannot be created is an OSError; the default one is skipped (a read-only home runs
    without the cache)."""
    chosen = path is not None
    if path is None:
        if os.environ.get("BNLAB_XLA_CACHE", "1").strip().lower() in _OFF:
            return None
        current = jax.config.jax_compilation_cache_dir
        if current:
            return Path(current)
        path = xla_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if chosen:
            raise OSError(f"the compilation cache directory {path} cannot be created: "
                          f"{exc}") from exc
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path
