"""bnlab — an interactive lab for approximate Bayesian inference in GP models.

Importing bnlab changes nothing in the process: its settings (JAX's float64 mode, the
OpenBLAS threads, JAX's persistent compilation cache, the LAPACK slicing of older
jaxlibs) are applied by ``bnlab.configure(...)``, or with their defaults the first time
bnlab's numerics run (``bnlab._runtime.configure``)."""
from ._runtime.configure import configure
from . import cubature, datasets, hyperparameters, kernels, likelihoods, methods
from ._runtime.compiled import clear_compiled
from .results import Result
from .infer import InferenceResult, Stepper, infer, validate_data
from .model import GP
from .model import SparseGP
from .model import MarkovGP
from . import studies
from .studies import learning, mcmc
from . import gkl  # registers G-KL (bnlab.methods.DIRECT)


def __getattr__(name):
    """``surface`` is imported on first use (it brings xarray and pandas; see
    ``bnlab.studies.LAZY_MODULES``); ``METHOD_NAMES`` is read when used
    (``bnlab.methods.method_names()``: the direct families and registered methods
    included)."""
    if name == "surface":
        return studies.surface
    if name == "METHOD_NAMES":
        return methods.method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the public face: these names, and the ``__all__`` of the subpackages and modules among
#: them (``kernels``, ``likelihoods``, ``datasets``, ``cubature``, ``hyperparameters``,
#: ``gkl``, ``methods``, ``studies``, ``mcmc``, ``learning``), followed down; nothing
#: else, and nothing whose name starts with an underscore. The lab (``bnlab.ui``) uses
#: only these (``tests/test_architecture.py``), so what it needs is what scripts can
#: rely on.
__all__ = ["configure", "cubature", "datasets", "hyperparameters", "kernels", "likelihoods",
           "methods", "studies", "GP", "SparseGP", "MarkovGP", "infer", "validate_data",
           "Stepper", "Result", "InferenceResult", "METHOD_NAMES", "surface", "mcmc",
           "learning", "gkl", "clear_compiled"]
