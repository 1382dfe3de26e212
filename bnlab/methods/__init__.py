"""Site methods: each turns the likelihood and the current marginals into a per-site
gradient J and Hessian-like H (Wilkinson et al. 2023, Table 1); the shared damped update
(``bnlab.sites.damped_update``) and the model's global update do the rest. A method is
one ``Method`` record (``base.py``) in the registry (``registry.py``); a family that
optimises q directly (G-KL) is one ``DirectMethod`` record (``direct.py``) there.

Public (``__all__``): the records (``REGISTRY``: name → ``Method``, ``DIRECT``: name →
``DirectMethod``, ``METHOD_NAMES``: every name ``infer`` accepts, read when used,
``HEURISTIC_BASES``: the methods 'heuristic' may wrap; ``method_names()``: the same
names as a call), ``Method``/``Mixing``/``DirectMethod``,
``register``/``unregister``/``resolve``, ``takes_alpha`` (whether α is a setting of a
method, read from its record) and ``takes_base`` (whether it wraps a base method)."""
from .base import Method, Mixing
from .direct import DirectMethod
from .registry import (DIRECT, HEURISTIC_BASES, REGISTRY, method_names, register, resolve,
                       takes_alpha, takes_base, unregister)

__all__ = ["Method", "Mixing", "DirectMethod", "METHOD_NAMES", "REGISTRY", "DIRECT",
           "HEURISTIC_BASES", "method_names", "register", "unregister", "resolve",
           "takes_alpha", "takes_base"]


def __getattr__(name):
    """``METHOD_NAMES``, read when used (``registry.METHOD_NAMES``)."""
    if name == "METHOD_NAMES":
        return method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
