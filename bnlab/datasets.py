"""Data sets: synthetic 1-D presets (written by the project), scikit-learn's breast
cancer, and user CSV files, each validated for the likelihood it is meant for. CSV
content is parsed from its bytes (``from_csv_bytes``, ``from_csv``); only ``read_csv``
opens a file, and only when given its path explicitly.

``load(name)`` returns a ``Dataset`` (X, y, X_test, y_test, likelihood name, notes).
Synthetic sets are generated deterministically from a seed, so nothing is downloaded.
"""
from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np

__all__ = ["Dataset", "load", "read_csv", "from_csv", "from_csv_bytes", "SYNTHETIC",
           "train_test_split", "synthetic_probit"]


class Dataset(NamedTuple):
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    likelihood: str       # the likelihood the data are meant for
    description: str


def train_test_split(X, y, test_fraction=0.25, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = idx[:n_test], idx[n_test:]
    return X[train], y[train], X[test], y[test]


def _grid(n, lo, hi, seed):
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(lo, hi, n))[:, None]


def synthetic_probit(n=281, d=10, seed=0):
    """(X, y): d standard-normal inputs, labels ±1 with P(y = 1) = ½(1 + tanh 1.5f),
    f = sin x₁ + ½x₂x₃ + 0.3x₄. The surface benchmark's set (n = 281, the IONOSPHERE
    training size; ``benchmarks/surface.py``) and the tests' small version of it."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.3 * X[:, 3]
    y = np.where(rng.uniform(size=n) < 0.5 * (1 + np.tanh(1.5 * f)), 1.0, -1.0)
    return X, y


def _classification_1d(n=100, seed=0):
    """Probit classification on [−5, 5]: labels from sign(sin(x) + 0.3x + noise)."""
    X = _grid(n, -5, 5, seed)
    rng = np.random.default_rng(seed + 1)
    f = 1.5 * np.sin(1.2 * X[:, 0]) + 0.3 * X[:, 0]
    y = np.where(rng.uniform(size=n) < 0.5 * (1 + np.tanh(1.5 * f)), 1.0, -1.0)
    return X, y


def _separated_1d(n=40, seed=0):
    """Two classes with a gap: −1 on [−5, −0.5], +1 on [0.5, 5]. Perfectly separable,
    so each latent's probit posterior is skewed away from the boundary (its mass
    reaches far past the mode): the case where Laplace's mode-centred Gaussian and EP's
    moment-matched one differ most (Kuss & Rasmussen 2005)."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0.5, 5, n) * rng.choice([-1, 1], n))[:, None]
    return X, np.sign(X[:, 0])


def _counts_1d(n=120, seed=0):
    X = _grid(n, 0, 10, seed)
    rng = np.random.default_rng(seed + 1)
    rate = np.exp(1.0 + np.sin(X[:, 0]))
    return X, rng.poisson(rate).astype(float)


def _robust_1d(n=80, seed=0):
    """Smooth function with 10% gross outliers (for Student-t / Laplace likelihoods)."""
    X = _grid(n, -4, 4, seed)
    rng = np.random.default_rng(seed + 1)
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    out = rng.uniform(size=n) < 0.1
    y[out] += rng.choice([-1, 1], out.sum()) * rng.uniform(2, 4, out.sum())
    return X, y


def _heteroscedastic_1d(n=133, seed=0):
    """Motorcycle-like: the noise level grows and shrinks along x."""
    X = _grid(n, 0, 6, seed)
    rng = np.random.default_rng(seed + 1)
    sd = 0.05 + 0.6 * np.exp(-((X[:, 0] - 3) ** 2))
    return X, np.sin(1.5 * X[:, 0]) + sd * rng.standard_normal(n)


def _product_1d(n=200, seed=0):
    """Amplitude demodulation: a carrier times a slowly varying positive envelope."""
    X = np.linspace(0, 40, n)[:, None]
    rng = np.random.default_rng(seed + 1)
    carrier = np.cos(2 * np.pi * X[:, 0] / 5)
    envelope = np.logaddexp(0, 1.5 * np.sin(X[:, 0] / 6))
    return X, carrier * envelope + 0.1 * rng.standard_normal(n)


def _regression_1d(n=60, seed=0):
    X = _grid(n, -3, 3, seed)
    rng = np.random.default_rng(seed + 1)
    return X, np.sin(2 * X[:, 0]) + 0.2 * rng.standard_normal(n)


def _sparse_regression_1d(n=120, seed=0):
    """The regression set, twice as dense: for a sparse GP with few inducing points,
    where the Power-EP power α matters (VFE at α → 0, FITC at α = 1; Bui et al. 2017)."""
    return _regression_1d(n, seed)


SYNTHETIC = {
    "classification_1d": (_classification_1d, "bernoulli", "1-D probit classification"),
    "separated_1d": (_separated_1d, "bernoulli", "1-D probit classification, separated classes"),
    "counts_1d": (_counts_1d, "poisson", "1-D Poisson counts, log-rate 1 + sin x"),
    "robust_1d": (_robust_1d, "student_t", "1-D regression with 10% outliers"),
    "heteroscedastic_1d": (_heteroscedastic_1d, "heteroscedastic", "1-D input-dependent noise"),
    "product_1d": (_product_1d, "product", "1-D amplitude demodulation"),
    "regression_1d": (_regression_1d, "gaussian", "1-D Gaussian regression"),
    "sparse_regression_1d": (_sparse_regression_1d, "gaussian",
                             "1-D regression for a sparse GP with 6 inducing points: "
                             "VFE (α → 0) and FITC (α = 1) differ"),
}


def _breast_cancer(seed=0):
    from sklearn.datasets import load_breast_cancer
    data = load_breast_cancer()
    X = data.data
    X = (X - X.mean(0)) / X.std(0)
    y = np.where(data.target == 1, 1.0, -1.0)
    return X, y


def load(name: str, *, n=None, seed=0, test_fraction=0.25) -> Dataset:
    """A named data set, split into train/test with ``seed``."""
    if name == "breast_cancer":
        X, y = _breast_cancer()
        lik, desc = "bernoulli", "scikit-learn breast cancer (569 × 30, standardised, ±1 labels)"
    elif name in SYNTHETIC:
        make, lik, desc = SYNTHETIC[name]
        X, y = make(seed=seed) if n is None else make(n=n, seed=seed)
    else:
        raise ValueError(f"unknown data set {name!r}; choose 'breast_cancer' or one of "
                         f"{', '.join(SYNTHETIC)}, or load a CSV with read_csv(path)")
    return Dataset(*train_test_split(X, y, test_fraction, seed), lik, desc)


def read_csv(path, *, target=None, test_fraction=0.0, seed=0) -> Dataset:
    """Read a local CSV file (a path; for the command line and scripts). Only the local
    file system is read: a URL is a file name like any other, never fetched."""
    from pathlib import Path
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"could not read the CSV file {str(path)!r}: "
                         f"{exc.strerror or exc}") from exc
    return from_csv_bytes(data, target=target, test_fraction=test_fraction, seed=seed)


def from_csv(content, *, target=None, test_fraction=0.0, seed=0) -> Dataset:
    """Parse CSV *content* (text or bytes; see ``from_csv_bytes``). A string is always
    the CSV itself, never a path or URL: a text that names a file is an error here, so
    data pasted from a user can never make the caller read its files or fetch a URL.
    Read a file with ``read_csv(path)``."""
    if isinstance(content, str):
        content = content.encode("utf-8")
    return from_csv_bytes(content, target=target, test_fraction=test_fraction, seed=seed)


def _data_rows(flags) -> str:
    """The first ten flagged data rows, counted as a person counts them: the row after
    the header is 1 (line 2 of a file without blank lines)."""
    rows = (np.flatnonzero(flags) + 1).tolist()
    return ", ".join(map(str, rows[:10])) + (" …" if len(rows) > 10 else "") + \
        " (the first row after the header is 1)"


def from_csv_bytes(data, *, target=None, test_fraction=0.0, seed=0, max_rows=None,
                   max_columns=None) -> Dataset:
    """Parse the bytes of a CSV file with a header row; the column ``target`` (default:
    the last one) is y, every other column is an input. Only ``bytes`` are accepted (an
    upload's content), so nothing here can open a path or a URL. ``max_rows`` and
    ``max_columns`` bound what is parsed (pandas stops after ``max_rows + 1`` rows).
    Errors name the problem: no data rows, too many rows or columns, non-numeric cells
    (with their rows), empty cells, a missing target column."""
    import pandas as pd
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"from_csv_bytes parses the bytes of a CSV file, not a "
                        f"{type(data).__name__}")
    data = bytes(data)
    if max_columns is not None:
        header = data.lstrip(b"\r\n").split(b"\n", 1)[0]
        if header.count(b",") + 1 > max_columns:
            raise ValueError(f"the CSV header has more than {max_columns} columns, the most "
                             f"read here")
    try:
        frame = pd.read_csv(io.BytesIO(data), compression=None,
                            nrows=None if max_rows is None else max_rows + 1)
    except Exception as exc:  # pandas raises many types for malformed files
        raise ValueError(f"could not read the CSV: {exc}") from exc
    if max_rows is not None and frame.shape[0] > max_rows:
        raise ValueError(f"the CSV has more than {max_rows} data rows, the most read here")
    if frame.shape[0] == 0:
        one_line = b"\n" not in data.strip() and b"\r" not in data.strip()
        raise ValueError("the CSV has no data rows: it needs a header row, then one row per "
                         "data point" + (" (this content is a single line of text: a file "
                                         "path or URL is not read, only CSV content)"
                                         if one_line else ""))
    if frame.shape[1] < 2:
        raise ValueError(f"the CSV needs at least one input column and a target column; "
                         f"it has {frame.shape[1]} column")
    target = frame.columns[-1] if target is None else target
    if target not in frame.columns:
        raise ValueError(f"target column {target!r} not in the CSV columns {list(frame.columns)}")
    numeric = frame.apply(pd.to_numeric, errors="coerce")
    bad = numeric.isna() & frame.notna()
    if bad.values.any():
        rows = _data_rows(bad.values.any(1))
        raise ValueError(f"non-numeric values in CSV data rows {rows} "
                         f"(columns {list(frame.columns[bad.values.any(0)])})")
    missing = numeric.isna().values.any(1)
    if missing.any():
        raise ValueError(f"empty cells in CSV data rows {_data_rows(missing)}")
    y = numeric[target].to_numpy(float)
    X = numeric.drop(columns=[target]).to_numpy(float)
    if test_fraction > 0:
        return Dataset(*train_test_split(X, y, test_fraction, seed), "unknown", "CSV upload")
    return Dataset(X, y, X[:0], y[:0], "unknown", "CSV upload")
