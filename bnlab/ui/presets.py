"""What choosing a data set also sets: the settings each preset opens with, so that
every preset converges with the method it opens with (checked by the tests).

Regression with outliers (Student-t) and amplitude demodulation (product likelihood)
are not log-concave: VI's and Laplace's first steps give site precisions negative
enough to make the posterior indefinite, while EP's moment-matched sites stay valid,
so those presets open with EP. The sparse regression preset is the α demonstration:
with few inducing points the Power-EP energies from VFE (α → 0) to FITC (α = 1) are
tens of nats apart (Bui, Yan & Turner 2017)."""
from __future__ import annotations

#: data set → the settings it opens with (the others keep their defaults)
PRESETS = {
    "robust_1d": {"method": "ep"},
    "product_1d": {"method": "ep"},
    "sparse_regression_1d": {"model": "sparse", "num_inducing": 6, "method": "pep",
                             "alpha": 0.5, "rho": 1.0, "lik_scale": 0.04},
}


def preset_changes(old: str, new: str, current: dict, defaults: dict, keep=()) -> dict:
    """The settings to change when the data set goes from ``old`` to ``new``: the new
    preset's values, and the defaults back for what the old preset set and the user
    left as it was; nothing named in ``keep`` (set together with the data set, e.g.
    by a link)."""
    out = {k: defaults[k] for k, v in PRESETS.get(old, {}).items() if current.get(k) == v}
    out.update(PRESETS.get(new, {}))
    return {k: v for k, v in out.items() if k not in keep}
