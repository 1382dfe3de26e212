"""The names of a model's hyperparameters: one naming for every place that varies or
learns them, the axes of a surface (``bnlab.surface``'s grid), the names learning
optimises (``bnlab.learning``) and the axes the lab's Surfaces page offers.

The names are read from the hyperparameters themselves, the pytree ``init_params()``
returns (``{"kernel": [one dict per latent], "likelihood": {…}}``, built from each
kernel's and the likelihood's own ``init_params()``), so a kernel or likelihood with a
new hyperparameter has its axis, and is learned, with no edit anywhere else.

A kernel hyperparameter is named by its key ("lengthscale"): with several latent
functions that name sets it in every latent's kernel (one value for all), and
"key_i" ("lengthscale_0") in latent i's alone. A likelihood hyperparameter is named by
its key ("noise"). Besides these, a surface may vary a method's setting
(``METHOD_SETTINGS``)."""
from __future__ import annotations

import jax.numpy as jnp

__all__ = ["METHOD_SETTINGS", "locations", "names", "separate_names", "value", "assign"]

#: the method settings a surface may vary besides the model's hyperparameters: Power
#: EP's α (for a method that takes it, ``bnlab.methods.takes_alpha``)
METHOD_SETTINGS = ("alpha",)


def locations(params) -> dict[str, tuple]:
    """{name: the entries of ``params`` it sets}, each entry ("kernel", latent, key) or
    ("likelihood", None, key), in the order of ``params``: kernel names, then (several
    latents) the per-latent names, then the likelihood's. A name that would mean two
    things (a likelihood hyperparameter named as a kernel's) is an error."""
    kernels, likelihood = params["kernel"], params["likelihood"]
    out = {}
    for i, kp in enumerate(kernels):
        for key in kp:
            out[key] = out.get(key, ()) + (("kernel", i, key),)
    if len(kernels) > 1:
        out.update({f"{key}_{i}": (("kernel", i, key),)
                    for i, kp in enumerate(kernels) for key in kp})
    for key in likelihood:
        if key in out:
            raise ValueError(f"the likelihood's hyperparameter {key!r} has the name of a "
                             f"kernel's: rename it (its axis would set both)")
        out[key] = (("likelihood", None, key),)
    return out


def names(params) -> list[str]:
    """Every hyperparameter name of ``params`` (``locations``' keys): the axes a
    surface may have, ``METHOD_SETTINGS`` aside."""
    return list(locations(params))


def separate_names(params) -> list[str]:
    """The names that each set one entry of ``params``, every entry named once: with
    one latent the kernel's keys, with several the per-latent names ("lengthscale_0");
    then the likelihood's. What learning optimises, each at its own value."""
    per_latent = len(params["kernel"]) > 1
    return [name for name, ((part, _, key), *_) in locations(params).items()
            if part == "likelihood" or (name != key) == per_latent]


def _entry(params, where):
    part, i, key = where
    return params["kernel"][i][key] if part == "kernel" else params["likelihood"][key]


def value(params, name):
    """The value ``name`` has in ``params`` (a kernel name over several latents: the
    first latent's)."""
    return _entry(params, locations(params)[name][0])


def assign(params, values: dict) -> dict:
    """The kernel and likelihood parts of ``params`` with each name of ``values`` set to
    its value (traceable; each value broadcast to the entry's shape, so an ARD
    lengthscale becomes isotropic). Other entries (a sparse model's learned inducing
    inputs) are not carried. Names that are not hyperparameters of ``params`` (a method
    setting) are passed over: the callers validate names first."""
    kernels = [dict(kp) for kp in params["kernel"]]
    likelihood = dict(params["likelihood"])
    where = locations(params)
    for name, v in values.items():
        for part, i, key in where.get(name, ()):
            target = kernels[i] if part == "kernel" else likelihood
            target[key] = jnp.broadcast_to(v, jnp.shape(target[key])).astype(float)
    return {"kernel": kernels, "likelihood": likelihood}
