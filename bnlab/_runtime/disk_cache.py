"""On-disk cache for expensive results (MCMC gold standards), so a reopened surface
appears instantly.

Key = SHA-256 of a canonical serialisation of everything the result depends on (data
arrays, model structure, hyperparameters, sampler settings, the producing code's
version). Values are dicts of numeric numpy arrays stored as ``<dir>/<kind>/<key>.npz``,
written atomically (a temporary file in the same directory, then ``os.replace``). The
directory is ``$BNLAB_CACHE_DIR`` or ``~/.cache/bnlab``.

The cache heals rather than fails: every entry carries a SHA-256 of its kind, key and
arrays (names, dtypes, shapes, bytes), and an entry that cannot be read, lacks that
checksum, does not match it, or has other fields, shapes or dtypes than the caller
expects is a miss (with a ``CacheWarning`` naming the file), so it is recomputed and
replaced. A directory that cannot be written means running without the cache (with a
warning), never a lost result.

Trust model: the checksum detects damage, not tampering — whoever can write the cache
directory can plant an entry with its checksum recomputed, and bnlab would serve it as
its own result (and JAX loads and runs the compiled programs of ``xla/`` beside it). So
the cache is trusted exactly as far as its directory is private: ``cache_dir`` creates
it readable and writable by its user only (0700), and a directory (or kind
subdirectory) that another user owns or that group or others can write is refused — no
entry is read from it or written to it, with a ``CacheWarning`` saying why and how to
fix it. ``verify`` checks every entry and ``clear`` removes them
(``bnlab cache verify|clear``).
"""
from __future__ import annotations

import hashlib
import io
import os
import stat
import tempfile
import warnings
from pathlib import Path

import numpy as np

__all__ = ["CacheWarning", "cache_dir", "make_key", "load", "store", "store_newest",
           "unsafe_reason", "verify", "clear"]

#: the field of an entry holding the SHA-256 of the rest (see ``_checksum``)
CHECKSUM = "__sha256__"


class CacheWarning(UserWarning):
    """A cache entry was ignored or could not be written; the result is (re)computed."""


def cache_dir() -> Path:
    """``$BNLAB_CACHE_DIR`` or ``~/.cache/bnlab``, created private to the user (0700) if
    it does not exist yet (one that cannot be created is reported where it is used)."""
    path = Path(os.environ.get("BNLAB_CACHE_DIR") or Path.home() / ".cache" / "bnlab")
    if not path.exists():
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            pass
    return path


def unsafe_reason(path: Path) -> str | None:
    """Why the cache directory ``path`` cannot be trusted (another user owns it, or its
    group or others can write it), or None (also when it does not exist yet)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return (f"{path} can be written by its group or others (mode "
                f"{stat.S_IMODE(st.st_mode):o}), so anyone could plant results there; "
                f"make it private (chmod 700 {path}) or set BNLAB_CACHE_DIR")
    return None


def _refusal(kind: str) -> str | None:
    for path in (cache_dir(), cache_dir() / kind):
        why = unsafe_reason(path)
        if why is not None:
            return why
    return None


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


def _checksum(kind: str, key: str, arrays: dict) -> str:
    """SHA-256 over the entry's kind and key (so a file copied under another key fails)
    and each array's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256(f"{kind}\0{key}\0".encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _decode(raw: bytes, kind: str, key: str, expect) -> dict:
    """The arrays of an entry's bytes; ValueError saying what is wrong with them."""
    data = np.load(io.BytesIO(raw), allow_pickle=False)
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError("not an .npz archive")
    with data:
        arrays = {name: data[name] for name in data.files}
    stored = arrays.pop(CHECKSUM, None)
    if stored is None:
        raise ValueError("no checksum")
    if str(stored) != _checksum(kind, key, arrays):
        raise ValueError("checksum mismatch: the contents were altered")
    if expect is not None:
        if set(arrays) != set(expect):
            raise ValueError(f"fields {sorted(arrays)}, expected {sorted(expect)}")
        for name, (shape, dtype) in expect.items():
            a = arrays[name]
            if a.shape != tuple(shape) or a.dtype.kind != np.dtype(dtype).kind:
                raise ValueError(f"field {name!r} is {a.dtype}{list(a.shape)}, expected "
                                 f"{np.dtype(dtype)}{list(shape)}")
    return arrays


def load(kind: str, key: str, expect: dict | None = None) -> dict | None:
    """The stored arrays, or None on a miss. ``expect`` ({name: (shape, dtype)}, dtype
    compared by kind: float, int…) is the exact layout the caller will use; an entry
    that is unreadable, fails its checksum or differs from ``expect`` is a miss too,
    with a ``CacheWarning`` naming the file (the caller's ``store`` then replaces it)."""
    refused = _refusal(kind)
    if refused is not None:
        warnings.warn(f"bnlab cache: not reading {refused}", CacheWarning, stacklevel=2)
        return None
    path = _path(kind, key)
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _ignored(path, f"unreadable: {exc}")
    try:
        return _decode(raw, kind, key, expect)
    except Exception as exc:  # noqa: BLE001 — the bytes are untrusted; any failure to
        # parse them (BadZipFile, EOFError, zlib.error, ValueError…) is a miss
        return _ignored(path, f"{type(exc).__name__}: {exc}")


def _ignored(path, reason):
    warnings.warn(f"bnlab cache: ignoring the damaged entry {path} ({reason}); "
                  f"recomputing it", CacheWarning, stacklevel=3)
    return None


def store(kind: str, key: str, arrays: dict) -> bool:
    """Write ``arrays`` (numeric) with their checksum, atomically. Returns whether the
    entry was written; a directory that cannot be written gives a ``CacheWarning``
    instead of an error, so the computed result is still returned to the caller."""
    arrays = {name: np.asarray(v) for name, v in arrays.items()}
    for name, a in arrays.items():
        if name == CHECKSUM or a.dtype.kind not in "biufc":
            raise TypeError(f"cannot cache field {name!r} of dtype {a.dtype}")
    arrays[CHECKSUM] = np.asarray(_checksum(kind, key, arrays))
    refused = _refusal(kind)
    if refused is not None:
        warnings.warn(f"bnlab cache: not writing, {refused}", CacheWarning, stacklevel=2)
        return False
    path = _path(kind, key)
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
        return True
    except OSError as exc:
        # the directory and the reason only, so a grid of points warns once (the
        # default warning filter shows one message per text and place)
        warnings.warn(f"bnlab cache: cannot write to {path.parent} ({exc.strerror or exc}); "
                      f"running without the disk cache (set BNLAB_CACHE_DIR to a writable "
                      f"directory)", CacheWarning, stacklevel=2)
        return False
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)


def store_newest(kind: str, key: str, arrays: dict, keep: int) -> bool:
    """``store``, then remove all but the ``keep`` most recently written entries of
    ``kind`` (a kind keyed by bnlab's code leaves old entries unused at every edit)."""
    if not store(kind, key, arrays):
        return False
    entries = sorted((cache_dir() / kind).glob("*.npz"), key=_written)
    for old in entries[:-keep]:
        old.unlink(missing_ok=True)
    return True


def _written(path) -> float:
    """When ``path`` was written; 0 if another process removed it since it was listed
    (processes trim a kind side by side)."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _entries():
    """(kind, key, path) of every entry under ``cache_dir()``."""
    root = cache_dir()
    for path in sorted(root.glob("*/*.npz")):
        yield path.parent.name, path.stem, path


def verify() -> dict[str, list]:
    """Check every entry against its checksum: {"ok": [paths], "damaged": [(path, why)]}.
    A directory that fails the trust check (``unsafe_reason``) is a ValueError."""
    for path in {cache_dir(), *(p.parent for _, _, p in _entries())}:
        why = unsafe_reason(path)
        if why is not None:
            raise ValueError(f"the bnlab cache is not trusted: {why}")
    report = {"ok": [], "damaged": []}
    for kind, key, path in _entries():
        try:
            _decode(path.read_bytes(), kind, key, None)
            report["ok"].append(path)
        except Exception as exc:  # noqa: BLE001 — as in ``load``: any failure is damage
            report["damaged"].append((path, f"{type(exc).__name__}: {exc}"))
    return report


def clear() -> int:
    """Remove every entry (and temporary files left by interrupted writes) under
    ``cache_dir()``; JAX's compiled programs in ``xla/`` are left to JAX. Returns how
    many files were removed."""
    removed = 0
    for path in [p for _, _, p in _entries()] + sorted(cache_dir().glob("*/.*.tmp")):
        path.unlink()
        removed += 1
    return removed
