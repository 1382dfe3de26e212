"""Process plumbing, no mathematics: bounded caches of compiled programs (``compiled``),
OpenBLAS threads (``threads``) and the on-disk result cache (``disk_cache``)."""
