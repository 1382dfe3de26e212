"""Process-wide runtime settings: compiled-program caches, threads, disk caches."""
