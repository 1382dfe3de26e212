"""What the lab offers: data sets, kernels and model structures with the labels shown
in the controls; methods and likelihoods read from their registries
(``bnlab.methods.REGISTRY``, ``bnlab.likelihoods.LIKELIHOODS``) when a page is built,
labelled by their own records, so one added there needs no edit here."""
from __future__ import annotations


from bnlab import kernels, likelihoods
from bnlab.methods import DIRECT, HEURISTIC_BASES, REGISTRY, method_names

DATASETS = {
    "classification_1d": "Classification (1-D, ±1 labels)",
    "separated_1d": "Separated classes (1-D, ±1 labels)",
    "counts_1d": "Counts (1-D, Poisson)",
    "robust_1d": "Regression with outliers (1-D)",
    "heteroscedastic_1d": "Heteroscedastic noise (1-D)",
    "product_1d": "Amplitude demodulation (1-D, product)",
    "regression_1d": "Gaussian regression (1-D)",
    "sparse_regression_1d": "Sparse regression, 6 inducing points (α matters)",
    "breast_cancer": "Breast cancer (scikit-learn, 30-D)",
    "csv": "My CSV file (upload)",
}

# the likelihood a data set is made for (datasets.Dataset.likelihood → the key the lab
# offers for it): "bernoulli" is probit's other name, and is not offered twice
DATASET_LIKELIHOOD = {"bernoulli": "probit", "unknown": "gaussian"}

KERNELS = {"matern12": kernels.Matern12, "matern32": kernels.Matern32,
           "matern52": kernels.Matern52, "rbf": kernels.RBF, "periodic": kernels.Periodic}
KERNEL_LABELS = {"matern12": "Matérn 1/2", "matern32": "Matérn 3/2", "matern52": "Matérn 5/2",
                 "rbf": "Squared exponential (RBF)", "periodic": "Periodic"}

MODELS = {"full": "Full GP", "sparse": "Sparse GP (inducing points)",
          "markov": "Markov GP (state space, 1-D)"}

BASES = HEURISTIC_BASES


def methods() -> dict:
    """{name: description} of every method ``infer`` accepts now, read from the registry
    when asked: a method added with ``bnlab.methods.register`` is offered by the lab
    built after it, with no UI edit."""
    return {name: REGISTRY[name].description if name in REGISTRY else DIRECT[name].description
            for name in method_names()}


def site_methods() -> list:
    """The methods with a site record (those a ``Runner`` steps), registered ones
    included."""
    return list(REGISTRY)


def likelihood_choices() -> dict:
    """{key: label} of the likelihood control: "auto", then every likelihood in
    ``bnlab.likelihoods.LIKELIHOODS`` now (one added there included), each labelled by
    its own ``label``."""
    return {"auto": "As the data set suggests",
            **{key: make_likelihood(key).label for key in likelihoods.LIKELIHOODS
               if key not in DATASET_LIKELIHOOD}}


def make_likelihood(name: str, **hyperparameters):
    """The likelihood ``name`` (a ``bnlab.likelihoods.LIKELIHOODS`` key, not 'auto'),
    with its defaults or the given hyperparameters (keys of its ``init_params()``)."""
    if name not in likelihoods.LIKELIHOODS:
        raise ValueError(f"unknown likelihood {name!r}; choose one of "
                         f"{', '.join(likelihoods.LIKELIHOODS)}")
    return likelihoods.LIKELIHOODS[name](**hyperparameters)
