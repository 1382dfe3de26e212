"""Site methods: each turns the likelihood and the current marginals into a per-site
gradient J and Hessian-like H (Wilkinson et al. 2023, Table 1); the shared damped update
(``bnlab.sites.damped_update``) and the model's global update do the rest. A method is
one ``Method`` record (``base.py``) in the registry (``registry.py``).

Public (``__all__``): the records (``REGISTRY``: name → ``Method``, ``METHOD_NAMES``
with the direct methods such as 'gkl', ``HEURISTIC_BASES``: the methods 'heuristic'
may wrap), ``Method``/``Mixing`` and ``register``/``resolve``."""
from .base import Method, Mixing
from .registry import HEURISTIC_BASES, METHOD_NAMES, REGISTRY, register, resolve

__all__ = ["Method", "Mixing", "METHOD_NAMES", "REGISTRY", "HEURISTIC_BASES", "register",
           "resolve"]
