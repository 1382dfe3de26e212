"""Process plumbing, no mathematics: bounded caches of compiled programs (``compiled``),
JAX's persistent compilation cache (``xla_cache``), OpenBLAS threads (``threads``) and the
on-disk result cache (``disk_cache``)."""
