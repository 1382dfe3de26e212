"""On-disk cache for expensive results (MCMC gold standards), so a reopened surface
appears instantly.

Key = SHA-256 of a canonical serialisation of everything the result depends on (data
arrays, model structure, hyperparameters, sampler settings). Values are dicts of numpy
arrays stored as ``<dir>/<kind>/<key>.npz``, written atomically. The directory is
``$BNLAB_CACHE_DIR`` or ``~/.cache/bnlab``.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "make_key", "load", "store"]


def cache_dir() -> Path:
    return Path(os.environ.get("BNLAB_CACHE_DIR") or Path.home() / ".cache" / "bnlab")


def _feed(h, obj):
    if isinstance(obj, dict):
        h.update(b"{")
        for k in sorted(obj, key=str):
            _feed(h, str(k))
            _feed(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for v in obj:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(obj, str):
        h.update(b"s" + obj.encode() + b"\0")
    elif obj is None:
        h.update(b"N")
    else:
        a = np.ascontiguousarray(np.asarray(obj))
        if a.dtype.kind not in "biuf":
            raise TypeError(f"cannot hash {type(obj).__name__} for the cache key")
        a = a.astype(np.float64 if a.dtype.kind == "f" else np.int64)
        h.update(b"a" + str(a.shape).encode() + a.tobytes())


def make_key(*parts) -> str:
    """Stable hex digest of nested dicts / lists / strings / numbers / arrays."""
    h = hashlib.sha256()
    _feed(h, list(parts))
    return h.hexdigest()


def _path(kind: str, key: str) -> Path:
    return cache_dir() / kind / f"{key}.npz"


def load(kind: str, key: str) -> dict | None:
    """The stored arrays, or None when absent or unreadable."""
    path = _path(kind, key)
    if not path.exists():
        return None
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError):
        return None


def store(kind: str, key: str, arrays: dict) -> None:
    path = _path(kind, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
