"""Studies built on ``infer``: marginal-likelihood ``surfaces`` over hyperparameter grids
(their ``surface_blocks`` schedule, on every local device (``devices``), on a Dask
cluster (``dask_blocks``), resumable from a Zarr ``store``), the ``mcmc`` gold standard
(annealed importance sampling), hyperparameter ``learning`` and the frozen-site EP
baseline (``alternated_ep``)."""
