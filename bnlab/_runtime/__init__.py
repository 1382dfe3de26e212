"""Process plumbing, no mathematics: bounded caches of compiled programs (``compiled``),
JAX's persistent compilation cache (``xla_cache``) and what was compiled or loaded
(``compile_log``), OpenBLAS threads (``threads``), batched
LAPACK calls that cannot deadlock XLA's thread pool (``lapack_batches``) and the on-disk
result cache (``disk_cache``); xarray without dask.array until a dask array can exist
(``xarray_dask_type``)."""
