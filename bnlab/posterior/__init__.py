"""Global updates: prior × sites → posterior marginals, one module per model structure.

Each module provides ``prepare(model, params, X) -> prior``, ``marginals(prior, sites)
-> Marginals`` and ``predict(model, params, X, prior, sites, marginals, Xs)``.
"""
from . import full, markov, sparse

STRUCTURES = {"full": full, "sparse": sparse, "markov": markov}


def structure_module(model):
    try:
        return STRUCTURES[model.structure]
    except KeyError:
        raise ValueError(f"no global update for model structure {model.structure!r}") from None
