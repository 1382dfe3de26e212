"""Compiled executables of the exported programs (``exported``), kept on disk, so that a
new process loads a program without lowering it at all.

Calling a stored ``jax.export`` module through ``jax.jit`` still lowers a wrapper in
every new process, and JAX's persistent cache then serialises and hashes that module to
find the binary, reads and decompresses it, all before XLA loads the binary itself.
Here the binary is stored as JAX serialises a ``jax.stages.Compiled``
(``jax.experimental.serialize_executable``), zlib-compressed, under the program's key
(``exported.program_digest``, which names JAX's and jaxlib's versions, the platform
and bnlab's code) and the device it was compiled for, and a new process deserialises it
straight into a ``Compiled``: the argument tree is the call's own, the result tree the
stored export's.

Only with jaxlib 0.10 (``TESTED_JAXLIB``), on a CPU: its two traps are handled and
tested here (``_lapack_ready``, ``cache_hits``), and another version or an accelerator's
runtime may set up other state while lowering that a deserialised executable would miss;
there the export is lowered in each new process instead (the binary from JAX's cache).

Trust: the stored bytes are a pickle holding a machine-code binary, which runs as soon
as it is called, as the persistent cache's binaries do. Entries follow the disk cache's
trust model (``disk_cache``: a directory that another user owns or that group or others
can write is neither read nor written; an entry that fails its checksum is a miss), and
any failure to deserialise one is a miss (``CacheWarning``) that compiles the program
again.
"""
from __future__ import annotations

import threading
import time
import warnings
import zlib

import jax
import numpy as np
from jax.experimental import serialize_executable
from jaxlib import lapack

from . import disk_cache
from .compile_log import CACHE_HIT_EVENT, EXECUTABLE_LOAD_EVENT

__all__ = ["load", "store", "cache_hits", "KIND", "TESTED_JAXLIB"]

KIND = "executable"
#: the jaxlib (major, minor) whose executables are stored and loaded
TESTED_JAXLIB = (0, 10)
_JAXLIB = tuple(int(part) for part in jax.lib.__version__.split(".")[:2])


def _lapack_ready():
    """Point jaxlib's LAPACK kernels at SciPy's LAPACK. JAX does this while lowering a
    linear-algebra operation; a deserialised executable is never lowered, and its first
    Cholesky would call through a null pointer (a segmentation fault, jaxlib 0.10)."""
    lapack.prepare_lapack_call("potrf", np.dtype(np.float64))


_THREAD = threading.local()
_LISTENING = threading.Lock()
_listening = False


def _count_hit(event, **_):
    if event == CACHE_HIT_EVENT:     # reported in the thread whose compile it serves
        _THREAD.hits = getattr(_THREAD, "hits", 0) + 1


def cache_hits() -> int:
    """How many programs this thread has taken from JAX's persistent cache since it
    first asked: ``store`` is for executables XLA compiled, not ones the cache loaded
    (re-serialised, a loaded XLA:CPU executable lacks its kernels' code: "Function
    broadcast_subtract_fusion not found" in the next process, jaxlib 0.10)."""
    global _listening
    with _LISTENING:
        if not _listening:
            jax.monitoring.register_event_listener(_count_hit)
            _listening = True
    return getattr(_THREAD, "hits", 0)


def _usable(device) -> bool:
    """Executables are stored and loaded on a CPU with the tested jaxlib only."""
    return device.platform == "cpu" and _JAXLIB == TESTED_JAXLIB


def _key(digest: str, device) -> str:
    return f"{digest}-{device.platform}{device.id}"


def load(digest: str, device, args, out_tree):
    """The stored executable of program ``digest`` on ``device`` as a ``Compiled``
    taking ``args``' tree, returning ``out_tree``; None if there is none, it does not
    deserialise, or the device or jaxlib is not the tested one (``TESTED_JAXLIB``)."""
    if not _usable(device):
        return None
    start = time.perf_counter()
    arrays = disk_cache.load(KIND, _key(digest, device))
    if arrays is None:
        return None
    try:
        _lapack_ready()
        payload = arrays["executable"]
        if payload.dtype != np.uint8 or payload.ndim != 1:
            raise ValueError("no serialised executable")
        in_tree = jax.tree_util.tree_structure((tuple(args), {}))
        compiled = serialize_executable.deserialize_and_load(
            zlib.decompress(payload.tobytes()), in_tree, out_tree,
            backend=device.client, execution_devices=[device])
    except Exception as exc:  # noqa: BLE001 — bytes from disk: any failure is a miss
        warnings.warn(f"bnlab cache: ignoring the stored executable {digest[:16]}… "
                      f"({type(exc).__name__}: {exc}); compiling it again",
                      disk_cache.CacheWarning, stacklevel=4)
        return None
    jax.monitoring.record_event_duration_secs(EXECUTABLE_LOAD_EVENT,
                                              time.perf_counter() - start,
                                              fun_name="stored_executable")
    return compiled


def store(digest: str, device, compiled, keep: int) -> bool:
    """Store ``compiled`` (program ``digest`` on ``device``, compiled by XLA in this
    process: see ``cache_hits``), keeping the ``keep`` newest executables; False where JAX cannot serialise it (a program with closed-over
    constants), the directory cannot be written, or the device or jaxlib is not the
    tested one (``TESTED_JAXLIB``)."""
    if not _usable(device):
        return False
    try:
        payload, _, _ = serialize_executable.serialize(compiled)
    except (ValueError, NotImplementedError):
        return False
    data = np.frombuffer(zlib.compress(payload, 1), np.uint8)
    return disk_cache.store_newest(KIND, _key(digest, device), {"executable": data}, keep)
