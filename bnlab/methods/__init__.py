"""Site methods: each turns the likelihood and the current marginals into a per-site
gradient J and Hessian-like H (Wilkinson et al. 2023, Table 1); the shared damped update
(``bnlab.sites.damped_update``) and the model's global update do the rest."""
from .registry import METHOD_NAMES, build_method

__all__ = ["METHOD_NAMES", "build_method"]
