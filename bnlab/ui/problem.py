"""Settings → (model, hyperparameters, data, plotting coordinates).

The app never does maths itself: this module only picks engine objects and arranges
the data for plotting. Inputs with more than one dimension are shown against their
projection on the first principal direction (an "index" axis for the band plots)."""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import numpy as np

import bnlab
from bnlab import datasets

from . import catalog
from .settings import LIKELIHOOD_CONTROLS, LabSettings

GRID_POINTS = 200

#: an upload's bounds, checked on the server before anything is parsed or compiled: a
#: browser is hostile, and one oversized file must not take the server down for everyone
MAX_UPLOAD_BYTES = 8 * 2**20
MAX_UPLOAD_ROWS = 10_000
MAX_UPLOAD_COLUMNS = 1_000
#: the largest n the full GP (and G-KL) is built for: each step factors an n × n matrix
#: (O(n³) time, O(n²) memory), beyond this a step takes seconds; the sparse and Markov
#: models scale linearly in n
FULL_GP_MAX_N = 2_000


class SettingError(ValueError):
    """A user-facing error attached to the control that caused it."""

    def __init__(self, control: str, message: str):
        super().__init__(message)
        self.control = control


class Problem(NamedTuple):
    model: Any
    params: dict
    X: Any                 # (N, d) jnp training inputs
    y: Any                 # (N,) jnp targets
    likelihood: str        # bnlab.likelihoods.LIKELIHOODS key
    description: str
    x_plot: np.ndarray     # (N,) plotting coordinate of each training input
    Xs: Any                # (Ns, d) prediction inputs for the bands
    xs_plot: np.ndarray    # (Ns,) their plotting coordinate
    x_label: str
    input_dim: int


@functools.lru_cache(maxsize=16)
def _load(name: str, n: int):
    return datasets.load(name, n=n or None)


def upload_text(raw) -> str:
    """The text of an uploaded file, from its bytes only (an upload is content, never a
    path or URL to open): SettingError when it is empty, too large, not UTF-8 or not a
    CSV the lab can read. It is parsed here, before it replaces anything: a bad file
    leaves the data in use, and their run, as they were."""
    if not isinstance(raw, bytes):
        raise SettingError("csv", "the upload did not arrive as a file; choose one CSV file")
    if len(raw) > MAX_UPLOAD_BYTES:
        raise SettingError("csv", f"the file is {len(raw) / 2**20:.1f} MB, more than the lab "
                                  f"reads (CSV files up to {MAX_UPLOAD_BYTES // 2**20} MB and "
                                  f"{MAX_UPLOAD_ROWS} rows); upload a subset of the data")
    if not raw.strip():
        raise SettingError("csv", "the file is empty: a CSV needs a header row and at least "
                                  "one data row")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SettingError("csv", "the file is not UTF-8 text; save it as a plain CSV") from None
    try:
        _load_csv(text)
    except ValueError as exc:
        raise SettingError("csv", f"{exc} (this file was not loaded; the data in use "
                                  f"are unchanged)") from None
    return text


@functools.lru_cache(maxsize=4)
def _load_csv(text: str):
    return datasets.from_csv_bytes(text.encode("utf-8"), max_rows=MAX_UPLOAD_ROWS,
                                   max_columns=MAX_UPLOAD_COLUMNS)


def load_data(settings: LabSettings):
    """The Dataset for the current choice (ValueError for a missing / bad CSV)."""
    if settings.dataset == "csv":
        if not settings.csv_text.strip():
            raise ValueError("upload a CSV file (header row; the last column is the target)")
        return _load_csv(settings.csv_text)
    return _load(settings.dataset, int(settings.n))


def make_kernel(settings: LabSettings):
    cls = catalog.KERNELS[settings.kernel]
    if settings.kernel == "periodic":
        return cls(lengthscale=settings.lengthscale, variance=settings.variance,
                   period=settings.period)
    return cls(lengthscale=settings.lengthscale, variance=settings.variance)


def make_likelihood(settings: LabSettings, name: str):
    """The likelihood ``name`` with each of its hyperparameters (the keys of its
    ``init_params()``) set from its control (``LIKELIHOOD_CONTROLS``); one the lab has
    no control for keeps the likelihood's default (a surface may still vary it)."""
    names = catalog.make_likelihood(name).init_params()
    return catalog.make_likelihood(name, **{n: float(getattr(settings, LIKELIHOOD_CONTROLS[n]))
                                            for n in names if n in LIKELIHOOD_CONTROLS})


def make_model(settings: LabSettings, X: np.ndarray, lik):
    kernel = make_kernel(settings)
    reasons = settings.model_reasons(X.shape[1])
    if settings.model in reasons:
        raise ValueError(reasons[settings.model])
    if settings.model == "sparse":
        M = min(int(settings.num_inducing), X.shape[0])
        return bnlab.SparseGP(kernel=kernel, likelihood=lik, inducing=inducing_inputs(X, M))
    if settings.model == "markov":
        return bnlab.MarkovGP(kernel=kernel, likelihood=lik)
    return bnlab.GP(kernel, lik)


def inducing_inputs(X: np.ndarray, M: int) -> np.ndarray:
    """M inducing inputs: evenly spaced for 1-D inputs, a spread subset of X otherwise."""
    if X.shape[1] == 1:
        return np.linspace(X.min(), X.max(), M)[:, None]
    idx = np.linspace(0, X.shape[0] - 1, M).round().astype(int)
    return X[np.argsort(_projection(X))[idx]]


def _projection(X: np.ndarray) -> np.ndarray:
    Xc = X - X.mean(0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ vt[0]


def check_size(settings: LabSettings, X):
    """SettingError before anything is built when the chosen model is too costly for n."""
    n, d = len(X), (np.shape(X)[1] if np.ndim(X) == 2 else 1)
    if settings.model == "full" and n > FULL_GP_MAX_N:
        scalable = "the sparse model (inducing points)" + (
            " or the Markov model (state space)" if d == 1 else "")
        raise SettingError("model", f"{n} training points are more than the full GP handles "
                                    f"here (at most {FULL_GP_MAX_N}: each step factors an "
                                    f"n × n matrix); {scalable} scales linearly in n: "
                                    f"choose it under Prior → Model")


def build_problem(settings: LabSettings) -> Problem:
    """Everything inference and plotting need; ValueError (with a message for the
    user) when the data do not fit the chosen likelihood or model."""
    try:
        data = load_data(settings)
    except ValueError as exc:
        raise SettingError("csv" if settings.dataset == "csv" else "dataset", str(exc)) from exc
    check_size(settings, data.X)
    lik_name = settings.resolved_likelihood(data.likelihood)
    try:
        lik = make_likelihood(settings, lik_name)
    except ValueError as exc:
        raise SettingError("likelihood", str(exc)) from exc
    X = np.asarray(data.X, float)
    try:
        model = make_model(settings, X if X.ndim == 2 else X[:, None], lik)
    except ValueError as exc:
        raise SettingError("model", str(exc)) from exc
    try:
        Xj, yj = bnlab.validate_data(model, X, data.y)
    except ValueError as exc:
        raise SettingError("likelihood", f"these data do not fit the likelihood: {exc}") from exc
    X = np.asarray(Xj)
    if X.shape[1] == 1:
        x_plot = X[:, 0]
        lo, hi = x_plot.min(), x_plot.max()
        pad = 0.05 * (hi - lo if hi > lo else 1.0)
        xs_plot = np.linspace(lo - pad, hi + pad, GRID_POINTS)
        Xs, label = xs_plot[:, None], "x"
    else:
        x_plot = _projection(X)
        order = np.argsort(x_plot)
        Xs, xs_plot = X[order], x_plot[order]
        # the band is evaluated at the training inputs themselves (no grid in D > 1):
        # neighbours on this axis need not be neighbours in the inputs, hence its jags
        label = (f"the training inputs, by their projection on the first principal "
                 f"direction of the {X.shape[1]}-D inputs")
    return Problem(model, model.init_params(), Xj, yj, lik_name, data.description,
                   x_plot, jax.device_put(Xs), xs_plot, label, X.shape[1])
