"""Checks for hyperparameters and numeric settings where they enter bnlab.

Inside the engine a hyperparameter is only ever a number in a pytree: a negative
lengthscale enters as ℓ² (so −1 runs as +1), NaN as an infinite lengthscale, an ARD
vector of the wrong length broadcasts, and a string fails deep inside numpy. So every
public entry (kernel and likelihood constructors, ``infer(params=...)``, surface
grids, numeric settings) checks its values here first, and a bad one is a
``TypeError`` (not a number) or ``ValueError`` (wrong value or shape) that names the
parameter and the value given.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["real_number", "positive", "check_keys"]


def _numeric(value) -> np.ndarray | None:
    """``value`` as a float array, or None when it is not made of real numbers
    (strings, None, booleans, objects)."""
    if isinstance(value, (str, bytes, bool, np.bool_)):
        return None
    try:
        arr = np.asarray(value)
    except Exception:          # ragged sequences, objects numpy cannot hold
        return None
    if arr.dtype.kind not in "iuf":
        return None
    return arr.astype(float)


def real_number(name: str, value) -> float:
    """A real scalar (int, float, numpy or 0-d array) as a float; not a bool or string."""
    arr = _numeric(value)
    if arr is None or arr.ndim != 0:
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(arr)


def positive(name: str, value, *, vector: bool = False) -> np.ndarray:
    """A finite positive scalar — or, with ``vector``, a scalar or a non-empty 1-D
    vector of them (an ARD lengthscale) — as a float array."""
    arr = _numeric(value)
    shape = "a positive number or a 1-D vector of them" if vector else "a positive number"
    if arr is None:
        raise TypeError(f"{name} must be {shape}, got {value!r}")
    if arr.ndim > (1 if vector else 0) or arr.size == 0:
        raise ValueError(f"{name} must be {shape}, got shape {arr.shape}: {value!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if not np.all(arr > 0):
        raise ValueError(f"{name} must be positive, got {value!r}")
    return arr


def check_keys(name: str, given, expected) -> None:
    """``given`` is a mapping with exactly the keys of ``expected``."""
    if not isinstance(given, Mapping):
        raise TypeError(f"{name} must be a dict with keys {sorted(expected)}, got {given!r}")
    missing = sorted(set(expected) - set(given))
    unknown = sorted(set(given) - set(expected), key=str)
    if missing or unknown:
        parts = ([f"missing {missing}"] if missing else []) + ([f"unknown {unknown}"] if unknown else [])
        raise ValueError(f"{name} must have the keys {sorted(expected)}: {', '.join(parts)}")
