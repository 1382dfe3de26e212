"""Bounded caches of compiled (jitted) programs, and a way to drop them all.

Every compiled XLA:CPU executable keeps a few memory mappings open until the jitted
function that owns it is garbage collected. Linux allows a process 65 530 mappings
(``vm.max_map_count``); a long-lived process that compiles engines for many (model,
method, likelihood) combinations — the lab's server, or the test suite — would pass that
limit and die with a segmentation fault inside XLA. So every cache of jitted functions
in bnlab is a ``CompiledCache``: least-recently-used entries beyond ``maxsize`` are
dropped (their executables are freed once no user still holds them), and
``clear_compiled()`` empties every cache and JAX's own.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable, Hashable

import jax

from .configure import ensure_configured

__all__ = ["CompiledCache", "clear_compiled"]

_ALL: "weakref.WeakSet[CompiledCache]" = weakref.WeakSet()


class CompiledCache:
    """A thread-safe LRU map key → compiled object, built on first use by ``build()``."""

    def __init__(self, maxsize: int = 64):
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = int(maxsize)
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.RLock()
        _ALL.add(self)

    def get(self, key: Hashable, build: Callable[[], object]):
        ensure_configured()                   # bnlab's settings before its first program
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()                       # compile outside the lock
        with self._lock:
            value = self._items.setdefault(key, value)
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
            return value

    def clear(self):
        with self._lock:
            self._items.clear()

    def __len__(self):
        return len(self._items)

    def __contains__(self, key):
        return key in self._items


def clear_compiled():
    """Drop every compiled program bnlab and JAX hold (they recompile on next use)."""
    for cache in list(_ALL):
        cache.clear()
    jax.clear_caches()
