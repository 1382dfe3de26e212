"""Covariance functions k(x, x').

Every kernel is a small configuration object holding its *default* hyperparameters;
the numbers themselves travel separately as a dict pytree (``kernel.init_params()``)
so that every computation is a pure function of ``params`` and can be jit-compiled,
differentiated and vmapped over hyperparameter grids.

Parameters (all positive):
- ``lengthscale``: scalar (isotropic) or a vector with one entry per input dimension
  (ARD, automatic relevance determination);
- ``variance``: the signal variance σ² = k(x, x);
- ``period`` (periodic kernel only).

Rasmussen & Williams (2006), eqs. 4.14 (Matérn), 4.9 (RBF), 4.31 (periodic, MacKay).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._runtime.configure import ensure_configured
from .checks import check_keys, positive

__all__ = ["Kernel", "Matern12", "Matern32", "Matern52", "RBF", "Periodic", "KERNELS"]


def _scaled_sqdist(X1, X2, lengthscale):
    """Squared Euclidean distance between rows of X1/ℓ and X2/ℓ (ℓ scalar or ARD),
    from the coordinate differences x_d − x'_d.

    The expansion |a|² + |b|² − 2a·b cancels catastrophically when |x|/ℓ is large
    (raw timestamps, tiny lengthscales): its absolute error is ε(|a|² + |b|²), which
    exceeds the distance itself (even on the diagonal, where it must be 0). The
    differences are exact up to the inputs' own rounding, whatever the offset or ℓ.
    The (N1, D, N2) difference array is reduced over D inside one fused loop (the
    minor axis stays N2, which vectorises); its gradient may hold it in memory.
    """
    inv = jnp.broadcast_to(1.0 / jnp.asarray(lengthscale), X1.shape[-1:])
    diff = (X1[:, :, None] - X2.T[None, :, :]) * inv[None, :, None]
    return jnp.sum(diff**2, 1)


#: a scaled distance beyond which every Matérn correlation is exactly 0 in float64
#: (e^−r underflows below r ≈ 745): distances are capped there, so that inputs far
#: apart on the lengthscale's scale (|x − x'|/ℓ overflowing to inf: ℓ = 1e-300, x ≈
#: 1e160) give 0, not the polynomial's inf times e^−inf = NaN
FAR = 1e3


def _scaled_dist(X1, X2, lengthscale):
    """Euclidean distance r = |x - x'|/ℓ, capped at ``FAR``, with a gradient that is
    finite at r = 0."""
    sq = _scaled_sqdist(X1, X2, lengthscale)
    safe = jnp.where(sq > 1e-30, sq, 1.0)
    return jnp.where(sq > 1e-30, jnp.minimum(jnp.sqrt(safe), FAR), 0.0)


class Kernel:
    """Base class: a stationary kernel with ``lengthscale`` and ``variance``."""

    name = "kernel"
    #: True when the kernel has an exact finite state-space (SDE) form.
    markovian = False

    def __init__(self, lengthscale=1.0, variance=1.0):
        ensure_configured()             # bnlab's settings (float64) before its numerics
        name = type(self).__name__
        self.lengthscale = positive(f"{name} lengthscale", lengthscale, vector=True)
        self.variance = float(positive(f"{name} variance", variance))

    def init_params(self) -> dict:
        return {"lengthscale": jax.device_put(self.lengthscale),
                "variance": jax.device_put(self.variance)}

    def check_params(self, params, width: int, where: str = "params['kernel']"):
        """``params`` (keys as ``init_params()``) for inputs with ``width`` columns:
        every value finite and positive, an ARD lengthscale one entry per column."""
        check_keys(where, params, self.init_params())
        for key, value in params.items():
            arr = positive(f"{where}[{key!r}]", value, vector=key == "lengthscale")
            if arr.ndim == 1 and arr.size != width:
                raise ValueError(f"{where}['lengthscale'] has {arr.size} entries but the inputs "
                                 f"have {width} column(s): give one lengthscale per column "
                                 f"(ARD) or a scalar")

    def check_inputs(self, params, X, where: str = "params['kernel']"):
        """ValueError where float64 cannot evaluate this kernel on the inputs ``X``
        (N, d) at ``params``; nothing by default (the distance kernels are exact at any
        offset and lengthscale: see ``_scaled_sqdist``)."""

    def correlation(self, params, X1, X2):
        """k(x, x') / σ² as an (N1, N2) matrix."""
        raise NotImplementedError

    def __call__(self, params, X1, X2):
        """The covariance matrix K(X1, X2)."""
        return params["variance"] * self.correlation(params, X1, X2)

    def diag(self, params, X):
        """diag K(X, X) — σ² for every stationary kernel here."""
        return jnp.full(X.shape[0], 1.0) * params["variance"]

    def structure_key(self):
        """What fixes the compiled computation: the kernel type and the ARD shape."""
        return (type(self), self.lengthscale.shape)

    def __repr__(self):
        return (f"{type(self).__name__}(lengthscale={self.lengthscale.tolist()}, "
                f"variance={self.variance})")


class Matern12(Kernel):
    """Matérn-1/2 (exponential / Ornstein–Uhlenbeck): σ² exp(−r)."""

    name = "matern12"
    markovian = True

    def correlation(self, params, X1, X2):
        r = _scaled_dist(X1, X2, params["lengthscale"])
        return jnp.exp(-r)


class Matern32(Kernel):
    """Matérn-3/2: σ² (1 + √3 r) exp(−√3 r)."""

    name = "matern32"
    markovian = True

    def correlation(self, params, X1, X2):
        r = jnp.sqrt(3.0) * _scaled_dist(X1, X2, params["lengthscale"])
        return (1.0 + r) * jnp.exp(-r)


class Matern52(Kernel):
    """Matérn-5/2: σ² (1 + √5 r + 5r²/3) exp(−√5 r)."""

    name = "matern52"
    markovian = True

    def correlation(self, params, X1, X2):
        r = jnp.sqrt(5.0) * _scaled_dist(X1, X2, params["lengthscale"])
        return (1.0 + r + r**2 / 3.0) * jnp.exp(-r)


class RBF(Kernel):
    """Squared exponential: σ² exp(−r²/2)."""

    name = "rbf"

    def correlation(self, params, X1, X2):
        return jnp.exp(-0.5 * _scaled_sqdist(X1, X2, params["lengthscale"]))


#: the largest change float64's rounding of the phase may make to a periodic
#: correlation (``Periodic.check_inputs``): at ℓ = 1, 1e8 periods between inputs;
#: log p(y) was within 4e-9 relative at 6e7 periods, 4e-7 at 6e8, 7e-4 at 6e12
PHASE_ROUNDING = 1e-7


def _show(values):
    return f"{float(values):.3g}" if values.ndim == 0 else "[" + ", ".join(
        f"{v:.3g}" for v in values) + "]"


class Periodic(Kernel):
    """MacKay's periodic kernel: σ² exp(−2 Σ_d sin²(π|x_d − x'_d|/p) / ℓ²)."""

    name = "periodic"

    def __init__(self, lengthscale=1.0, variance=1.0, period=1.0):
        super().__init__(lengthscale, variance)
        self.period = float(positive("Periodic period", period))

    def init_params(self):
        return {**super().init_params(), "period": jax.device_put(self.period)}

    def check_inputs(self, params, X, where: str = "params['kernel']"):
        """Refuses a period p and lengthscale ℓ at which float64's rounding of the phase
        moves a correlation by more than ``PHASE_ROUNDING``: the kernel reads only the
        phase of t = (x − x')/p, which float64 knows to δ = ε|t| (and the inputs
        themselves to ε|x|/p), and |∂k/∂t| ≤ min(3.8/ℓ, 2π/ℓ²) (max of 4π s e^{−2s²}/ℓ
        over s = sin(πt)/ℓ, and 2π sin(2πt)/ℓ²). So a tiny ℓ is refused at any period:
        its correlation is 0 except within δ of an exact multiple of the period, which
        the rounding decides."""
        X = np.asarray(X, dtype=float)
        period, ell = float(params["period"]), np.asarray(params["lengthscale"], dtype=float)
        with np.errstate(over="ignore"):
            periods = (X.max(0) - X.min(0)) / period
            slope = np.minimum(3.8 / ell, 2 * np.pi / ell**2)
            change = float(np.max(np.finfo(float).eps * periods * slope, initial=0.0))
        if not change <= PHASE_ROUNDING:
            raise ValueError(
                f"{where}: period {period:.3g} and lengthscale {_show(ell)} against inputs "
                f"spanning {float(np.max(periods)):.3g} periods: float64 rounds the phase "
                f"(x − x')/period by up to {np.finfo(float).eps * float(np.max(periods)):.2g} "
                f"of a period, which moves the correlation by up to {change:.2g} (more than "
                f"{PHASE_ROUNDING:g}); rescale X or choose a longer period or lengthscale")

    def correlation(self, params, X1, X2):
        diff = X1[:, None, :] - X2[None, :, :]
        s = jnp.sin(jnp.pi * diff / params["period"]) / params["lengthscale"]
        return jnp.exp(-2.0 * jnp.sum(s**2, -1))


KERNELS = {k.name: k for k in (Matern12, Matern32, Matern52, RBF, Periodic)}
