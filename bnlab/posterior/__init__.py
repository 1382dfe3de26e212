"""Global updates: prior × sites → posterior marginals, one module per model structure,
each described by a ``GlobalUpdate`` record (``base.py``)."""
from . import full, markov, sparse
from .base import GlobalUpdate

UPDATES = {
    "full": GlobalUpdate(full.prepare, full.marginals, full.predict,
                         marginals_nonnegative=full.marginals_nonnegative,
                         marginals_mean_only=full.marginals_mean_only,
                         marginals_mean_only_nonnegative=full.marginals_mean_only_nonnegative),
    "sparse": GlobalUpdate(sparse.prepare, sparse.marginals, sparse.predict),
    "markov": GlobalUpdate(markov.prepare, markov.marginals, markov.predict),
}


def global_update(model) -> GlobalUpdate:
    try:
        return UPDATES[model.structure]
    except KeyError:
        raise ValueError(f"no global update for model structure {model.structure!r}") from None
