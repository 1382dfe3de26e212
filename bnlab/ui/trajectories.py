"""Hyperparameter-learning trajectories for the Surfaces page: each learner
(``bnlab.studies.learning``, ``bnlab.studies.frozen_ep``) optimises the two surface axes from the
sidebar's hyperparameters, and its path is drawn over every surface panel. No maths
here: the learners are the engine's; this module only names them and collects their
paths."""
from __future__ import annotations

import numpy as np

#: label shown in the page → (procedure, method, colour)
LEARNERS = {
    "joint ELBO (VI)": ("joint", "vi", "#ff7f0e"),
    "joint EP energy": ("joint", "ep", "#2ca02c"),
    "joint Laplace": ("joint", "laplace", "#9467bd"),
    "hybrid VI / EP-like (Li et al. 2023)": ("hybrid", None, "#e377c2"),
    "EP with frozen sites (GPy; Li et al. 2023 Table 1)": ("alternated_ep", None, "#17becf"),
}
#: budgets that keep a classroom demo interactive (seconds at n ≈ 100)
JOINT_STEPS = 150
HYBRID_OUTER = 60


class Trajectory(dict):
    """{axis name: values along the path}, plus ``colour`` and ``stop_reason``."""

    def __init__(self, path, colour, stop_reason):
        super().__init__(path)
        self.colour, self.stop_reason = colour, stop_reason


def learn_trajectories(problem, axes, labels, *, damping=0.5, cubature=("gauss_hermite", 20)):
    """Run each learner in ``labels`` over the two ``axes`` (the other hyperparameters
    stay at the sidebar's values); returns {label: Trajectory}. Raises ValueError naming
    an axis that cannot be learned (the PEP power α, say)."""
    from bnlab.studies import frozen_ep, learning
    out = {}
    for label in labels:
        procedure, method, colour = LEARNERS[label]
        common = dict(params=problem.params, learn=list(axes), cubature=cubature)
        if procedure == "joint":
            res = learning.joint(problem.model, problem.X, problem.y, method=method,
                                 damping=damping, steps=JOINT_STEPS, **common)
        elif procedure == "alternated_ep":
            res, _ = frozen_ep.alternated_ep(problem.model, problem.X, problem.y,
                                             damping=damping, **common)
        else:
            res = learning.hybrid(problem.model, problem.X, problem.y, outer=HYBRID_OUTER,
                                  **common)
        path = {a: np.asarray(res.trajectory[a], float).reshape(len(res.objective), -1)[:, 0]
                for a in axes}
        out[label] = Trajectory(path, colour, res.stop_reason)
    return out
