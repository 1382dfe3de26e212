"""Sparse (inducing-point) GP objectives outside the site loop: ``bounds`` (the collapsed
Power-EP/VFE/FITC bounds) and ``training`` (minibatch training of q(u))."""
