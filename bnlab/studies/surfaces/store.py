"""A Zarr store of a study's finished blocks, so an interrupted run resumes where it
stopped.

Layout: for every kind of block (one per site-method run of a surface) and every field
of its output, a variable ``<kind>__<field>`` with a leading ``<kind>__unit`` dimension,
one Zarr chunk per block, written with ``xarray.Dataset.to_zarr(region=...)`` as soon
as the block finishes. A block counts as stored only when its completion marker
``<kind>__checksum`` (a SHA-256 digest of the block's arrays, written *after* them)
matches the arrays read back: a block whose writing was cut short, or whose chunks were
damaged, fails that check (or fails to decode) and is computed again, never read as
numbers. The store's attributes hold a fingerprint of everything the values depend on
(data, model, grid, methods, settings); opening it with another fingerprint is an
error naming the entries that differ. Opening is serialised by a lock file beside the
store (``<path>.lock``), so threads or processes opening one new store at once create it
once and then all check it; a path that cannot hold a store is an error naming it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import xarray as xr
from filelock import FileLock

__all__ = ["BlockStore", "fingerprint"]

_ATTR = "bnlab_fingerprint"


def fingerprint(**parts) -> dict[str, str]:
    """name → stable digest of each part (nested dicts/lists/strings/numbers/arrays)."""
    from ..._runtime.disk_cache import make_key
    return {name: make_key(value) for name, value in parts.items()}


def _checksum(arrays: dict) -> int:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return int.from_bytes(h.digest()[:8], "little") >> 1 | 1      # positive, never 0 (unset)


class BlockStore:
    """Blocks of a run in a Zarr store at ``path``. ``layout``: {kind: (number of blocks,
    {field: (shape of one block's array, dtype)})}; ``prints``: ``fingerprint(...)``."""

    def __init__(self, path, prints: dict[str, str], layout: dict):
        self.path, self.layout = str(path), layout
        if not Path(self.path).parent.is_dir():
            raise ValueError(f"store {self.path!r} cannot be opened or created there: its "
                             f"directory {str(Path(self.path).parent)!r} does not exist")
        try:
            with FileLock(f"{self.path}.lock"):
                if Path(self.path).exists():
                    self._check(prints)
                else:
                    self._create(prints)
        except OSError as exc:
            raise ValueError(f"store {self.path!r} cannot be opened or created there "
                             f"({exc.strerror or exc}); choose a path in an existing, "
                             f"writable directory") from None

    def _create(self, prints):
        import dask.array as da
        data = {}
        for kind, (units, fields) in self.layout.items():
            for field, (shape, dtype) in fields.items():
                dims = (f"{kind}__unit",) + tuple(f"{kind}__{field}_{i}" for i in range(len(shape)))
                data[f"{kind}__{field}"] = (dims, da.zeros((units,) + tuple(shape), dtype=dtype,
                                                           chunks=(1,) + tuple(shape)))
            data[f"{kind}__checksum"] = ((f"{kind}__unit",), da.zeros(units, dtype="int64", chunks=1))
        ds = xr.Dataset(data, attrs={_ATTR: json.dumps(prints, sort_keys=True)})
        encoding = {v: {"_FillValue": None} for v in ds.data_vars}
        ds.to_zarr(self.path, mode="w-", compute=False, encoding=encoding, consolidated=False)

    def _check(self, prints):
        try:
            stored = json.loads(self._open().attrs[_ATTR])
        except Exception as exc:   # not a Zarr store, or not one of bnlab's
            raise ValueError(f"store {self.path!r} exists but is not a bnlab surface store "
                             f"({type(exc).__name__}: {exc}); choose another path") from None
        differ = sorted(k for k in set(stored) | set(prints) if stored.get(k) != prints.get(k))
        if differ:
            raise ValueError(f"store {self.path!r} holds a run with different "
                             f"{', '.join(differ)}; use a new store path (or delete this one) "
                             f"to compute with these arguments")
        layout_ok = all(f"{kind}__checksum" in self._open().data_vars
                        for kind in self.layout)
        if not layout_ok:
            raise ValueError(f"store {self.path!r} does not match this run's layout")

    def _open(self):
        # raw values: a masked int64 marker would come back as float64, losing digits
        return xr.open_zarr(self.path, consolidated=False, mask_and_scale=False)

    def load(self) -> dict[str, dict[int, dict]]:
        """{kind: {block: arrays}} of every block whose checksum verifies."""
        ds = self._open()
        found = {}
        for kind, (units, fields) in self.layout.items():
            found[kind] = {}
            marks = ds[f"{kind}__checksum"].values
            for u in np.flatnonzero(marks):
                try:
                    arrays = {f: ds[f"{kind}__{f}"][u].values for f in fields}
                except Exception:       # a chunk that does not decode: recompute the block
                    continue
                if _checksum(arrays) == int(marks[u]):
                    found[kind][int(u)] = arrays
        return found

    def save(self, kind: str, unit: int, arrays: dict) -> None:
        """Write one block's arrays, then its completion marker."""
        units, fields = self.layout[kind]
        arrays = {f: np.asarray(arrays[f], dtype=fields[f][1]).reshape(fields[f][0]) for f in fields}
        dim = f"{kind}__unit"
        region = {dim: slice(unit, unit + 1)}
        data = {f"{kind}__{f}": ((dim,) + tuple(f"{kind}__{f}_{i}" for i in range(a.ndim)), a[None])
                for f, a in arrays.items()}
        xr.Dataset(data).to_zarr(self.path, region=region, consolidated=False)
        xr.Dataset({f"{kind}__checksum": ((dim,), np.array([_checksum(arrays)], "int64"))}
                   ).to_zarr(self.path, region=region, consolidated=False)
