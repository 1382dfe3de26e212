"""Studies built on ``infer``: marginal-likelihood ``surfaces`` over hyperparameter grids
(their ``surface_blocks`` schedule, on every local device (``devices``), on a Dask
cluster (``dask_blocks``), resumable from a Zarr ``store``), the ``mcmc`` gold standard
(annealed importance sampling), hyperparameter ``learning``, the frozen-site EP
baseline (``alternated_ep``) and Power EP's per-point picture (``tilted``).

Public here, for scripts and the lab (``__all__``): ``surface`` and ``tilted_marginal``,
and the modules ``mcmc``, ``learning`` and ``alternated_ep``, whose own ``__all__`` say
what they offer. ``alternated_ep`` is exported as its module, not its function of the
same name: binding the function here would hide the submodule
(``import bnlab.studies.alternated_ep as m`` would give the function). The schedule,
device, Dask and store modules are the surfaces' machinery, not public."""
import importlib

from . import learning, mcmc
from .tilted import tilted_marginal

#: imported on first use, so that ``import bnlab`` stays light: the surfaces bring
#: xarray and pandas, ``alternated_ep`` SciPy's optimisers (together most of the import)
LAZY_MODULES = ("surfaces", "surface_blocks", "devices", "store", "dask_blocks",
                "alternated_ep")

__all__ = ["surface", "tilted_marginal", "mcmc", "learning", "alternated_ep"]


def __getattr__(name):
    """A module of ``LAZY_MODULES``, or ``surface``, imported when first asked for."""
    if name in LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "surface":
        return importlib.import_module(".surfaces", __name__).surface
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
