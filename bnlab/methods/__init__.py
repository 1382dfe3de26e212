"""Site methods: each turns the likelihood and the current marginals into a per-site
gradient J and Hessian-like H (Wilkinson et al. 2023, Table 1); the shared damped update
(``bnlab.sites.damped_update``) and the model's global update do the rest. A method is
one ``Method`` record (``base.py``) in the registry (``registry.py``).

Public (``__all__``): the records (``REGISTRY``: name → ``Method``, ``METHOD_NAMES``
with the direct methods such as 'gkl', ``HEURISTIC_BASES``: the methods 'heuristic'
may wrap; ``method_names()``: the names now, registered ones included), ``Method``/
``Mixing``, ``register``/``unregister``/``resolve`` and ``takes_alpha`` (whether α is a
setting of a method, read from its record)."""
from .base import Method, Mixing
from .registry import (HEURISTIC_BASES, METHOD_NAMES, REGISTRY, method_names, register,
                       resolve, takes_alpha, unregister)

__all__ = ["Method", "Mixing", "METHOD_NAMES", "REGISTRY", "HEURISTIC_BASES", "method_names",
           "register", "unregister", "resolve", "takes_alpha"]
