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

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from ._runtime.configure import ensure_configured
from .kernels import Kernel
from .likelihoods import Likelihood

__all__ = ["GP", "validate_inputs"]

#: the smallest eigenvalue of the noise-regularised correlation that
#: ``GP.check_conditioning`` accepts, in units of its float64 rounding Nε
CONDITIONING_MARGIN = 1e4
#: the largest ratio of prior variance to Gaussian noise a ``MarkovGP`` accepts
#: (``MarkovGP.check_conditioning``)
MARKOV_MAX_SIGNAL_TO_NOISE = 1e7


def validate_inputs(X, name="X", width=None) -> np.ndarray:
    """X as a float (N, d) array; NaN/inf rows named in the error. ``width``: the d
    required (test inputs need the training inputs' columns)."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (N, d) array, got shape {X.shape}")
    if width is not None and X.shape[1] != width:
        trained = "one-dimensional inputs" if width == 1 else f"inputs with {width} columns"
        raise ValueError(f"{name} has {X.shape[1]} column(s) but the model was trained on {trained}")
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
        ensure_configured()             # bnlab's settings (float64) before its numerics
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

    def check_params(self, params, width: int):
        """``params`` has the form of ``init_params()`` with finite positive values, an
        ARD lengthscale one per input column (``width``); a clear error names the
        entry (in the engine a negative lengthscale would run as its absolute value)."""
        optional = {"inducing"} if self.structure == "sparse" else set()
        form = {"kernel": [sorted(k.init_params()) for k in self.kernels],
                "likelihood": sorted(self.likelihood.init_params())}
        if not isinstance(params, Mapping):
            raise TypeError(f"params must be a dict like model.init_params(), {form}; "
                            f"got {params!r}")
        missing = sorted({"kernel", "likelihood"} - set(params))
        unknown = sorted(set(params) - {"kernel", "likelihood"} - optional, key=str)
        if missing or unknown:
            raise ValueError(f"params must be a dict like model.init_params(), {form}: "
                             f"missing {missing}, unknown {unknown}")
        kernels = params["kernel"]
        if not isinstance(kernels, (list, tuple)) or len(kernels) != len(self.kernels):
            raise ValueError(f"params['kernel'] must be a list of {len(self.kernels)} dict(s), "
                             f"one per latent function, got {kernels!r}")
        for i, (kernel, kp) in enumerate(zip(self.kernels, kernels)):
            kernel.check_params(kp, width, f"params['kernel'][{i}]")
        self.likelihood.check_params(params["likelihood"])
        if "inducing" in params:
            Z = np.asarray(params["inducing"])
            if Z.ndim != 2 or Z.shape[1] != width or not np.all(np.isfinite(Z)):
                raise ValueError(f"params['inducing'] must be a finite (M, {width}) array, as many "
                                 f"columns as the inputs have, got shape {Z.shape}")

    def largest_prior_variance(self, params) -> float:
        """The largest prior variance of any latent: every kernel's diagonal is its
        ``variance``."""
        return max(float(kp["variance"]) for kp in params["kernel"])

    def check_scales(self, params, X, y):
        """ValueError where float64 cannot hold the problem at these hyperparameters
        (``check_inputs`` on the inputs X, ``Likelihood.check_scales`` given the
        largest prior variance, ``check_conditioning``)."""
        self.check_inputs(params, X)
        self.likelihood.check_scales(params["likelihood"], self.largest_prior_variance(params),
                                     np.asarray(y))
        self.check_conditioning(params, X)

    def check_inputs(self, params, X):
        """ValueError where float64 cannot evaluate a kernel between any two rows of X
        (``Kernel.check_inputs``): the training inputs, and with them the test inputs a
        prediction reads."""
        for i, (kernel, kp) in enumerate(zip(self.kernels, params["kernel"])):
            kernel.check_inputs(kp, X, f"params['kernel'][{i}]")

    def check_conditioning(self, params, X):
        """Refuses Gaussian noise σ_n² too small for float64 to resolve the posterior
        with this prior correlation. Every method factors I + K/σ_n², that is C + rI
        with C = D^-½ K D^-½ the correlation and r = σ_n²/σ² (D = diag K), up to a
        scale; C's entries, each rounded to ε relative, move its eigenvalues by up to
        Nε, so where the smallest eigenvalue of C + rI is within
        ``CONDITIONING_MARGIN``·Nε of zero the factorisation fails or its log
        determinant is decided by rounding (a near-constant correlation, ℓ far beyond
        the inputs' span, or near-duplicate inputs, with σ²/σ_n² beyond ≈ 4e11/N:
        NaN and 'diverged' before). As λ_min(C) ≥ 0, that needs r below the margin,
        so the N³ eigenvalue test runs only there. The sparse and Markov models factor
        other matrices and have their own rules (``SparseGP.check_conditioning``,
        ``MarkovGP.check_conditioning``)."""
        noise = self.likelihood.noise_variance(params["likelihood"])
        if noise is None:
            return
        floor = CONDITIONING_MARGIN * len(X) * np.finfo(float).eps
        variance = self.largest_prior_variance(params)
        if noise / variance >= floor:
            return
        K = np.asarray(self.prior_covariance(params, X, X), dtype=float)
        scale = np.sqrt(np.diag(K))
        smallest = np.linalg.eigvalsh(K / scale[:, None] / scale[None, :]
                                      + np.diag(noise / scale ** 2))[0]
        if smallest < floor:
            raise ValueError(
                f"Gaussian noise {noise:.3g} is too small for float64 against a prior variance "
                f"of {variance:.3g} with these inputs: the prior's correlation matrix plus "
                f"noise/variance has smallest eigenvalue {smallest:.2g}, within float64's "
                f"rounding ({floor / CONDITIONING_MARGIN:.2g}) times {CONDITIONING_MARGIN:g} "
                f"of zero, so rounding would decide the posterior (a lengthscale far beyond "
                f"the inputs' span, or near-duplicate inputs); raise the noise above "
                f"{variance * (floor - smallest + noise / variance):.2g}, shorten the "
                f"lengthscale or merge the near-duplicate inputs")

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


class SparseGP(GP):
    """Sparse (pseudo-point) GP: u = f(Z) at M inducing inputs per latent, and
    q(f) = p(f_{≠u} | u) q(u) with q(u) ∝ p(u) Π_n t_n(W_n u), W = K_fu K_uu⁻¹
    (Wilkinson et al. 2023 §8.2, eqs. 62–64; Bui et al. 2017, eq. 6 and App. F.1).

    Z is given (``inducing=Z``), or chosen from the training inputs by
    ``num_inducing=M`` with ``inducing_init`` "kmeans" or "random" (``seed``). Z
    travels in ``params["inducing"]`` so it can be learned like a hyperparameter;
    ``init_params()`` includes it when Z was given, ``init_params(X)`` chooses it
    from X, and otherwise ``prepare`` chooses it from the training inputs.

    ``posterior`` is the structure of q(f | u) = N(K_fu K_uu⁻¹u, D½ M D½) of
    Bui & Titsias (2025): "svgp" (M = I; q(f|u) = p(f|u), which the site methods
    use), "tpep" (M = m I), "diag" (diagonal M) or "block" (block-diagonal M with
    ``block_size`` points per block). The structured forms are Gaussian-regression
    objectives (``bnlab.sparse.bounds``, ``bnlab.sparse.training``).
    """

    structure = "sparse"
    POSTERIORS = ("svgp", "tpep", "diag", "block")

    def __init__(self, kernel, likelihood: Likelihood, inducing=None, num_inducing=None,
                 inducing_init="kmeans", posterior="svgp", block_size=None, seed=0):
        from .inducing import INDUCING_INITS, check_num_inducing
        super().__init__(kernel, likelihood)
        if (inducing is None) == (num_inducing is None):
            raise ValueError("SparseGP needs exactly one of inducing=Z or num_inducing=M")
        if inducing is not None:
            inducing = validate_inputs(inducing, "inducing")
            num_inducing = inducing.shape[0]
        check_num_inducing(num_inducing)
        if inducing_init not in INDUCING_INITS:
            raise ValueError(f"inducing_init must be one of {INDUCING_INITS}, got {inducing_init!r}")
        if posterior not in self.POSTERIORS:
            raise ValueError(f"posterior must be one of {self.POSTERIORS}, got {posterior!r}")
        if posterior == "block":
            if block_size is None or int(block_size) != block_size or block_size < 1:
                raise ValueError(f"posterior='block' needs a positive integer block_size, "
                                 f"got {block_size!r}")
            block_size = int(block_size)
        elif block_size is not None:
            raise ValueError(f"block_size only applies to posterior='block' (got posterior={posterior!r})")
        self.inducing = inducing
        self.num_inducing = int(num_inducing)
        self.inducing_init = inducing_init
        self.posterior = posterior
        self.block_size = block_size
        self.seed = int(seed)

    def initial_inducing(self, X):
        """Z for training inputs X: the given Z, or the ``inducing_init`` choice."""
        if self.inducing is not None:
            return jnp.asarray(self.inducing)
        from .inducing import initial_inducing
        return initial_inducing(jnp.asarray(X), self.num_inducing, self.inducing_init, self.seed)

    def init_params(self, X=None) -> dict:
        params = super().init_params()
        if self.inducing is not None or X is not None:
            params["inducing"] = self.initial_inducing(
                None if X is None else validate_inputs(X))
        return params

    def inducing_inputs(self, params, X):
        """Z used for training inputs X: ``params["inducing"]`` or chosen from X."""
        Z = params["inducing"] if "inducing" in params else self.initial_inducing(X)
        if Z.ndim != 2 or Z.shape[1] != X.shape[1]:
            raise ValueError(f"inducing inputs have shape {Z.shape}; they need "
                             f"{X.shape[1]} columns like X")
        return Z

    def structure_key(self):
        """A given Z is part of the key (its hash): params without "inducing" fall
        back to it inside compiled code."""
        import hashlib
        given = None if self.inducing is None else hashlib.sha1(self.inducing.tobytes()).hexdigest()
        return super().structure_key() + (self.num_inducing, self.inducing_init, self.seed,
                                          self.posterior, self.block_size, given)

    def check_conditioning(self, params, X):
        """Nothing to refuse: the sparse model factors K_uu with a relative jitter
        (``posterior.sparse.JITTER``), which bounds its condition number, not I + K/σ_n²;
        at σ_n² = 1e-14 with ℓ far beyond the inputs (refused for the full GP) its EP
        and VI are FITC's evidence and Titsias' bound in 60-digit arithmetic to 1e-6
        relative (tests/sparse_gp/test_sparse_extremes.py)."""

    def __repr__(self):
        return (f"SparseGP(kernel={self.kernels}, likelihood={self.likelihood!r}, "
                f"num_inducing={self.num_inducing}, posterior={self.posterior!r})")


class MarkovGP(GP):
    """Markovian GP on one-dimensional inputs: each latent's Matérn kernel is written as
    a linear SDE and the global update is a Kalman filter + RTS smoother, O(N)
    (Wilkinson et al. 2023 §8.3, Alg. 3; ``bnlab.posterior.markov``). It gives exactly
    the posterior of ``GP`` with the same kernel and sites.

    ``parallel=True`` runs the filter and smoother as associative (parallel-prefix)
    scans (Särkkä & García-Fernández 2021), O(log N) depth on parallel hardware.
    Only Matérn-1/2, 3/2 and 5/2 kernels have a state-space form here.
    """

    structure = "markov"

    def __init__(self, kernel, likelihood: Likelihood, parallel: bool = False):
        super().__init__(kernel, likelihood)
        for k in self.kernels:
            if not k.markovian:
                raise ValueError(f"MarkovGP needs kernels with a state-space form (Matern12, "
                                 f"Matern32, Matern52); {type(k).__name__} has none — "
                                 f"use bnlab.GP or bnlab.SparseGP")
            if k.lengthscale.size != 1:
                raise ValueError(f"MarkovGP takes one-dimensional inputs, so one lengthscale "
                                 f"per kernel; got lengthscale {k.lengthscale.tolist()}")
        self.parallel = bool(parallel)

    def structure_key(self):
        return super().structure_key() + (self.parallel,)

    def check_conditioning(self, params, X):
        """Refuses Gaussian noise σ_n² below σ²/``MARKOV_MAX_SIGNAL_TO_NOISE``. The Kalman
        filter's update P − PHᵀ(HPHᵀ + σ_n²)⁻¹HP leaves a variance of about σ_n² from
        ones of about σ², keeping about log10(σ_n²/εσ²) of its digits, and the sites'
        cavities, 1/v − λ with both terms about 1/σ_n², lose more. Against the evidence
        in 60 digits (20 points, unit variance) EP returned NaN and 'diverged' from
        σ²/σ_n² = 1e8 (ℓ = 0.1) and 1e10 (ℓ = 1), and VI and Laplace converged 0.3 nats
        off at 1e12; at 1e7 EP was within 1e-4 nats (ℓ from 0.1 to 10; 1e-2 with 100
        points, 0.45 of −4.4e7 with 1000). The full GP, whose factorisation is backward
        stable, solves these problems (``GP.check_conditioning``)."""
        noise = self.likelihood.noise_variance(params["likelihood"])
        if noise is None:
            return
        variance = self.largest_prior_variance(params)
        if variance > MARKOV_MAX_SIGNAL_TO_NOISE * noise:
            raise ValueError(
                f"Gaussian noise {noise:.3g} is too small for the Markov (state-space) GP "
                f"against a prior variance of {variance:.3g}: beyond a variance "
                f"{MARKOV_MAX_SIGNAL_TO_NOISE:g} times the noise, the Kalman filter keeps too few "
                f"digits of the posterior covariance (EP's cavities fail first); raise the "
                f"noise to {variance / MARKOV_MAX_SIGNAL_TO_NOISE:.3g} or more, or use the full "
                f"GP (bnlab.GP)")

    def __repr__(self):
        return (f"MarkovGP(kernel={self.kernels}, likelihood={self.likelihood!r}, "
                f"parallel={self.parallel})")
