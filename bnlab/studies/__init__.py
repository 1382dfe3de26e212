"""Studies built on ``infer``: marginal-likelihood ``surfaces`` over hyperparameter grids
(and their ``surface_blocks`` schedule), the ``mcmc`` gold standard (annealed importance
sampling), hyperparameter ``learning`` and the frozen-site EP baseline
(``alternated_ep``)."""
