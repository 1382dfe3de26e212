"""xarray without importing dask.array before a dask array can exist.

Every xarray Variable built from data asks whether the data is a dask array
(``isinstance(data, array_type("dask"))``), and xarray answers by importing
``dask.array`` the first time, whatever the data: one of the largest imports of a new
process's first surface (benchmarks/README.md, First run). No object can be a dask
array while ``dask.array`` has not been imported (its class is defined there), so
``install`` gives xarray an entry for dask whose array type is empty until then, and
is xarray's own answer from then on (a Dask cluster surface, or a user's dask array,
imports it first). Anything else xarray asks of the entry (its version, whether dask
is available) is xarray's own answer at once.

If xarray's private cache (``xarray.namedarray.pycompat``) is not as expected — a
version that moved it — nothing is changed: xarray is then merely slower to start.
"""
from __future__ import annotations

import sys
import threading

__all__ = ["install"]


class _DaskTypeWhenImported:
    """xarray's ``DuckArrayModule("dask")``, built only when asked for more than its
    array type, or for its type once ``dask.array`` is imported."""

    def __init__(self, duck_array_module):
        self._build = duck_array_module
        self._lock = threading.Lock()
        self._module = None

    def _resolved(self):
        with self._lock:
            if self._module is None:
                self._module = self._build("dask")
            return self._module

    @property
    def type(self):
        if "dask.array" not in sys.modules:
            return ()
        return self._resolved().type

    def __getattr__(self, name):
        return getattr(self._resolved(), name)


def install() -> bool:
    """Give xarray the deferred dask entry unless it has one already; True if it now
    has the deferred one."""
    from xarray.namedarray import pycompat
    cached = getattr(pycompat, "_cached_duck_array_modules", None)
    build = getattr(pycompat, "DuckArrayModule", None)
    if not isinstance(cached, dict) or build is None:
        return False
    cached.setdefault("dask", _DaskTypeWhenImported(build))
    return isinstance(cached["dask"], _DaskTypeWhenImported)
