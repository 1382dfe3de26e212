"""A surface's grid: its two axes (hyperparameters of the model, named as
``bnlab.hyperparameters`` names them, or Power EP's α) and the hyperparameters at one
grid point."""
from __future__ import annotations

import numpy as np

from ... import hyperparameters

__all__ = ["grid_axes", "point_params", "point_alpha"]


def grid_axes(model, grid) -> list[tuple[str, np.ndarray]]:
    """Validate ``grid`` (a dict of exactly two hyperparameter names → 1-D values) and
    return it as [(name, float array), (name, float array)]."""
    if not isinstance(grid, dict):
        raise ValueError(f"grid must be a dict of two hyperparameter names to values, got {type(grid).__name__}")
    if len(grid) != 2:
        raise ValueError(f"grid must have exactly two axes, got {len(grid)}: {list(grid)}")
    known = set(hyperparameters.names(model.init_params())) | set(hyperparameters.METHOD_SETTINGS)
    axes = []
    for name, values in grid.items():
        if name not in known:
            raise ValueError(f"unknown grid parameter {name!r} for {model!r}; "
                             f"choose from {sorted(known)}")
        try:
            v = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"grid axis {name!r} must hold numbers, got {values!r}") from None
        if v.ndim != 1 or v.size == 0:
            raise ValueError(f"grid axis {name!r} must be a non-empty 1-D array, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"grid axis {name!r} has NaN or infinite values")
        if np.any(v <= 0):
            raise ValueError(f"grid axis {name!r} must be positive (it is a scale, variance or "
                             f"power), got minimum {v.min()}")
        if name == "alpha" and np.any(v > 1):
            raise ValueError(f"grid axis 'alpha' (Power-EP power) must lie in (0, 1], got max {v.max()}")
        axes.append((name, v))
    if axes[0][0] == axes[1][0]:
        raise ValueError(f"the two grid axes must differ, got {axes[0][0]!r} twice")
    return axes


def point_params(base, names, theta):
    """``base`` hyperparameters with the grid names set to ``theta`` (traceable;
    ``bnlab.hyperparameters.assign``: a kernel name applies to every latent's kernel,
    "name_i" to latent i's only; an ARD lengthscale becomes isotropic)."""
    return hyperparameters.assign(base, dict(zip(names, theta)))


def point_alpha(names, theta, alpha):
    for name, value in zip(names, theta):
        if name == "alpha":
            return value
    return alpha
