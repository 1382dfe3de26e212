"""bnlab — an interactive lab for approximate Bayesian inference in GP models."""
import jax

jax.config.update("jax_enable_x64", True)

from ._runtime.threads import limit_openblas_threads  # noqa: E402

limit_openblas_threads()

from ._runtime.xla_cache import enable_xla_cache  # noqa: E402

enable_xla_cache()

from . import cubature, datasets, kernels, likelihoods  # noqa: E402
from ._runtime.compiled import clear_compiled  # noqa: E402
from .engine.result import Result  # noqa: E402
from .inference import InferenceResult, Stepper, infer  # noqa: E402
from .methods.registry import METHOD_NAMES  # noqa: E402
from .model import GP  # noqa: E402
from .model import SparseGP  # noqa: E402
from .model import MarkovGP  # noqa: E402
from .studies import learning, mcmc  # noqa: E402
from . import gkl  # noqa: E402
from .studies.surfaces import surface  # noqa: E402

__all__ = ["cubature", "datasets", "kernels", "likelihoods", "GP", "SparseGP", "MarkovGP", "infer", "Stepper", "Result", "InferenceResult",
           "METHOD_NAMES", "surface", "mcmc", "learning", "gkl", "clear_compiled"]
