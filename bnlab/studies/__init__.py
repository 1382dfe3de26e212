"""Studies built on ``infer``: marginal-likelihood ``surfaces`` over hyperparameter grids
(a package: their schedule, on every local device (``devices``), on a Dask cluster,
resumable from a Zarr store), the ``mcmc`` gold standard
(annealed importance sampling), hyperparameter ``learning``, EP learning with frozen
sites (``frozen_ep``, the papers' GPy baseline) and Power EP's per-point picture
(``tilted``).

Public here, for scripts and the lab (``__all__``): ``surface`` and ``tilted_marginal``,
and the modules ``mcmc``, ``learning`` and ``frozen_ep``, whose own ``__all__`` say
what they offer. The ``surfaces`` package's modules and ``devices`` are the surfaces'
machinery, not public."""
import importlib

from . import learning, mcmc
from .tilted import tilted_marginal

#: imported on first use, so that ``import bnlab`` stays light: the surfaces bring
#: xarray and pandas, ``frozen_ep`` SciPy's optimisers (together most of the import)
LAZY_MODULES = ("surfaces", "devices", "frozen_ep")

__all__ = ["surface", "tilted_marginal", "mcmc", "learning", "frozen_ep"]


def __getattr__(name):
    """A module of ``LAZY_MODULES``, or ``surface``, imported when first asked for."""
    if name in LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "surface":
        return importlib.import_module(".surfaces", __name__).surface
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
