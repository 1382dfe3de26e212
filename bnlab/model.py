"""Model specifications: which prior and likelihood, and their hyperparameters.

``GP`` is the full (dense) Gaussian-process model. A model object only *describes*
the model; its hyperparameters are a dict pytree (``model.init_params()``)

    {"kernel": [ {lengthscale, variance, …} per latent ], "likelihood": {…}}

so that inference is a pure function of them (jit / grad / vmap over grids).
The prior mean is zero. With D latent functions (heteroscedastic and product
likelihoods have D = 2) the latents are independent a priori and ordered
"site-major": f = (f_1(x_1), …, f_D(x_1), f_1(x_2), …), so that the D×D block of
data point n is contiguous (Wilkinson et al. 2023, eq. 1).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .kernels import Kernel
from .likelihoods import Likelihood

__all__ = ["GP", "validate_inputs"]


def validate_inputs(X, name="X") -> np.ndarray:
    """X as a float (N, d) array; NaN/inf rows named in the error."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (N, d) array, got shape {X.shape}")
    bad = ~np.all(np.isfinite(X), axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(f"{name} has NaN or infinite values in rows "
                         f"{rows[:10].tolist()}{' …' if len(rows) > 10 else ''}")
    return X


class GP:
    """Full GP: f ~ GP(0, k) for each latent, y_n | f_n ~ likelihood.

    ``kernel`` is one kernel (shared form, one copy per latent) or a list with one
    kernel per latent function.
    """

    structure = "full"

    def __init__(self, kernel, likelihood: Likelihood):
        if not isinstance(likelihood, Likelihood):
            raise TypeError(f"likelihood must be a bnlab likelihood, got {likelihood!r}")
        D = likelihood.num_latents
        kernels = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel] * D
        if len(kernels) != D or not all(isinstance(k, Kernel) for k in kernels):
            raise ValueError(f"{type(likelihood).__name__} has {D} latent function(s); "
                             f"give one kernel or a list of {D} kernels, got {kernel!r}")
        self.kernels = kernels
        self.likelihood = likelihood

    @property
    def kernel(self):
        return self.kernels[0]

    @property
    def num_latents(self) -> int:
        return self.likelihood.num_latents

    def init_params(self) -> dict:
        return {"kernel": [k.init_params() for k in self.kernels],
                "likelihood": self.likelihood.init_params()}

    def prior_covariance(self, params, X1, X2):
        """Prior covariance between the stacked latents at X1 and X2: (N1·D, N2·D)."""
        D = self.num_latents
        blocks = jnp.stack([k(p, X1, X2) for k, p in zip(self.kernels, params["kernel"])])
        if D == 1:
            return blocks[0]
        full = jnp.einsum("dnm,de->ndme", blocks, jnp.eye(D))
        return full.reshape(X1.shape[0] * D, X2.shape[0] * D)

    def prior_variance(self, params, X):
        """Prior marginal covariance blocks (N, D, D) at X (diagonal: independent latents)."""
        diag = jnp.stack([k.diag(p, X) for k, p in zip(self.kernels, params["kernel"])], -1)
        return diag[..., :, None] * jnp.eye(self.num_latents)

    def structure_key(self):
        """Models with equal keys share compiled inference code (values live in params)."""
        return (type(self), tuple(k.structure_key() for k in self.kernels),
                self.likelihood.structure_key())

    def __repr__(self):
        return f"{type(self).__name__}(kernel={self.kernels}, likelihood={self.likelihood!r})"
