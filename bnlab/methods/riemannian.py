"""Riemannian-gradient PSD correction and the heuristic PSD fix, as wrappers around a
base method's local update.

Riemannian (Lin et al. 2020; Wilkinson et al. 2023 eq. 58, and eq. 59 rebuilt from
BayesNewton for PEP): with the current site precision Λ̄ and G = Λ̄ + H,

    H ← H − (ρ/2) G Λ̄⁻¹ G,

which makes the damped update Λ̄' = ½Λ̄ + ½(Λ̄ − ρG)Λ̄⁻¹(Λ̄ − ρG): PD whenever Λ̄ is PD,
for any finite H — the base's H may carry cubature error, be PEP's cavity-scaled RH
(sites whose cavity is not PD keep their value) or follow a change of hyperparameters.
From the PD initial sites every iterate's site precisions, and with them the posterior
and every cavity (α ≤ 1), stay PD in exact arithmetic ("PSD guaranteed"). Rounding in
GΛ̄⁻¹G for an ill-conditioned Λ̄ could still break it, so the trace flags it like any
other method.

Heuristic (§4.5.1): the site precision −H loses its off-diagonal entries and negative
diagonal entries become 0.01 — always PSD, but latents become independent per site.
"""
from __future__ import annotations

from ..sites import heuristic_psd
from ..linalg.small_blocks import inv_small, sym
from .base import LocalInput, LocalUpdate

__all__ = ["riemannian_local", "heuristic_local"]


def riemannian_local(base_local):
    def local(inp: LocalInput):
        upd, aux = base_local(inp)
        G = inp.prec + upd.H
        H = sym(upd.H - 0.5 * inp.rho * G @ inv_small(inp.prec) @ G)
        return LocalUpdate(upd.J, H, upd.mean, upd.ok), aux
    return local


def heuristic_local(base_local):
    def local(inp: LocalInput):
        upd, aux = base_local(inp)
        return LocalUpdate(upd.J, -heuristic_psd(-upd.H), upd.mean, upd.ok), aux
    return local
