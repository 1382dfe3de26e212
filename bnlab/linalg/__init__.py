"""Linear algebra the global and local updates share: ``small_blocks`` (per-site D×D
helpers) and ``dense`` (blocked triangular algebra for the full GP's N×N systems)."""
