"""Cubature rules for Gaussian expectations E_{N(m, C)}[g(f)].

A rule is a set of unit sigma points x_i (P, D) and weights w_i (P,) with Σ w_i = 1
for the standard normal; the points for N(m, C) are f_i = m + L x_i with L = chol(C)
(the rules of Wilkinson et al. 2023, §8.4). Derivatives with respect to m (and C) are
taken by automatic differentiation *through* the rule, so they are the exact derivatives of
the cubature approximation (as in the BayesNewton code) — except Power EP's
derivatives of log E[p^α] in the mean, which are the rule applied to the exact
derivatives (the Gaussian identities; ``log_expectation_exp_derivatives``).

- Gauss–Hermite: tensor product of the 1-D rule of the caller's order (order^D points).
- Unscented: the 3rd-order (2D + 1 points, cubature-Kalman) and the 5th-order fully
  symmetric rule of McNamee & Stenger (1967) with 2D² + 1 points.
- Panels (one dimension, for likelihoods that bend at known places): composite
  Gauss–Legendre in t = (f − m)/s over [−10, 10], with break points at t = 0, ±5, ±10
  and at the likelihood's bends (f − m)/s. Gauss–Hermite nodes are √v·(node gap)
  apart, so a factor that bends on a unit scale under a wide Gaussian is missed:
  E[log Φ(f)] under N(0, 150²) is off by 0.09 with 20 nodes and by 9 under N(100, 150²);
  the panel rule with 20 nodes per panel is within 1e-9 relative of adaptive quadrature
  there (tests/likelihoods/test_likelihoods.py).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .linalg.small_blocks import chol_small, inv_small, sym

__all__ = ["Rule", "gauss_hermite", "unscented", "make_rule", "expectation",
           "log_expectation_exp", "log_expectation_exp_derivatives", "sigma_points",
           "panel_expectation", "panel_log_expectation_exp"]


class Rule(NamedTuple):
    points: jnp.ndarray   # (P, D) unit sigma points
    weights: jnp.ndarray  # (P,) summing to one


def gauss_hermite(order: int = 20, dim: int = 1) -> Rule:
    """Tensor-product Gauss–Hermite rule for N(0, I_dim), exact for polynomials of
    degree ≤ 2·order − 1 in each coordinate."""
    if not 1 <= order <= 200:
        raise ValueError(f"Gauss–Hermite order must lie in [1, 200], got {order} "
                         "(numpy's nodes overflow beyond that)")
    x, w = np.polynomial.hermite.hermgauss(order)
    x, w = np.sqrt(2.0) * x, w / np.sqrt(np.pi)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    wgrids = np.meshgrid(*([w] * dim), indexing="ij")
    points = np.stack([g.ravel() for g in grids], -1)
    weights = np.prod(np.stack([g.ravel() for g in wgrids], -1), -1)
    return Rule(jax.device_put(points), jax.device_put(weights))


def unscented(order: int = 3, dim: int = 1) -> Rule:
    """Symmetric unscented / sigma-point rules of degree 3 or 5 for N(0, I_dim)."""
    if order == 3:
        eye = np.eye(dim) * np.sqrt(dim)
        points = np.concatenate([eye, -eye])
        weights = np.full(2 * dim, 1.0 / (2 * dim))
        return Rule(jax.device_put(points), jax.device_put(weights))
    if order != 5:
        raise ValueError(f"unscented rule order must be 3 or 5, got {order}")
    # McNamee & Stenger (1967), generators u = √3, I2 = I22 = 1, I4 = 3
    u, I2, I4, I22, D = np.sqrt(3.0), 1.0, 3.0, 1.0, dim
    A0 = 1.0 - D * (I2 / I4) ** 2 * (I4 - 0.5 * (D - 1) * I22)
    A1 = 0.5 * (I2 / I4) ** 2 * (I4 - (D - 1) * I22)
    A2 = 0.25 * (I2 / I4) ** 2 * I22
    pts, wts = [np.zeros(D)], [A0]
    for i in range(D):
        for s in (1, -1):
            p = np.zeros(D)
            p[i] = s * u
            pts.append(p)
            wts.append(A1)
    for i in range(D):
        for j in range(i + 1, D):
            for si in (1, -1):
                for sj in (1, -1):
                    p = np.zeros(D)
                    p[i], p[j] = si * u, sj * u
                    pts.append(p)
                    wts.append(A2)
    return Rule(jnp.asarray(np.array(pts)), jnp.asarray(np.array(wts)))


def make_rule(kind: str = "gauss_hermite", order: int = 20, dim: int = 1) -> Rule:
    """Rule by name: ``"gauss_hermite"`` (any order) or ``"unscented"`` (3 or 5)."""
    if kind == "gauss_hermite":
        return gauss_hermite(order, dim)
    if kind == "unscented":
        return unscented(order, dim)
    raise ValueError(f"unknown cubature rule {kind!r}; use 'gauss_hermite' or 'unscented'")


def sigma_points(rule: Rule, mean, cov):
    """Points f_i = m + L x_i for one D-dimensional Gaussian (mean (D,), cov (D, D))."""
    return mean[None, :] + rule.points @ chol_small(cov).T


def expectation(g, rule: Rule, mean, cov):
    """E_{N(mean, cov)}[g(f)] for g mapping (D,) → array."""
    f = sigma_points(rule, mean, cov)
    vals = jax.vmap(g)(f)
    return jnp.tensordot(rule.weights, vals, axes=1)


def _shifted_log_terms(logg, rule: Rule, f, increasing, bound=None):
    """(log w_i + logg(f_i), c): the summands of log E[exp(logg)] and the shift c that
    keeps every exp(term − c) ≤ 1, held constant under differentiation (log Z does not
    depend on it). With ``increasing`` c is logg — or its upper ``bound`` — at the top
    node plus the largest log weight (``log_expectation_exp``), else the largest
    summand."""
    log_w = jnp.log(rule.weights)
    terms = jax.vmap(logg)(f) + log_w
    if increasing is None:
        c = jnp.max(terms)
    else:
        top = _top_node(rule, f, jnp.asarray(increasing))
        c = (logg if bound is None else bound)(top) + jnp.max(log_w)
    return terms, jax.lax.stop_gradient(c)


def _top_node(rule: Rule, f, u):
    """The node f_i of largest uᵀf_i. In one dimension f_i = m + √v x_i, so it is the
    rule's largest or smallest point by the sign of u, indices known at trace time (the
    rules are built from NumPy): an argmax over the nodes is a reduction that XLA:CPU
    runs as a separate fusion."""
    if f.shape[-1] == 1:
        x = np.asarray(rule.points)[:, 0]
        return jnp.where(u[0] >= 0, f[int(np.argmax(x))], f[int(np.argmin(x))])
    return f[jnp.argmax(f @ u)]


def log_expectation_exp(logg, rule: Rule, mean, cov, increasing=None, bound=None):
    """log E_{N(mean, cov)}[exp(logg(f))] by log-sum-exp (no clamping of small values).

    ``increasing``: a direction u (D,) along which logg increases, when there is one
    (a Bernoulli likelihood's α log p(y|f) increases with y f). Then max_i logg(f_i) is
    logg at the node of largest uᵀf_i, one more evaluation, and the sum is shifted by it
    plus the largest log weight, c, instead of by the maximum of the summands, which
    XLA:CPU computes in a loop of its own that evaluates logg at every node a second
    time. Every summand is then ≤ 1 and the top node's is ≥ w_min/w_max (e⁻⁴⁵
    for Gauss–Hermite-20), so nothing overflows and the sum cannot underflow.

    ``bound`` (with ``increasing``): an upper bound of logg, cheaper to evaluate, taken at
    the top node instead of logg (c cancels exactly from log Z, so it only has to keep
    the summands in range). Every summand stays ≤ 1, and the top node's is ≥
    e^(−gap)·w_min/w_max for a bound within ``gap`` of logg there: for the probit
    link's α log Φ(z) ≤ −½α min(z, 0)², gap ≤ α(1.84 + log(1 + |z|))
    (``Bernoulli.log_prob_bound``), which saves log Φ's evaluation at the top node, a
    string of small XLA:CPU fusions.

    Accuracy caveat: a factor that is sharply peaked relative to the Gaussian (a
    Student-t of scale 0.3 under N(−1, 2)) needs a high order — Gauss–Hermite-20 is
    off by 0.3 in log Z there, order 200 by 4e-4. Centring the rule on a Laplace
    approximation of the tilted density or a two-component mixture of rules did not
    fix the heavy-tailed case, so the rule stays plain and the order is the caller's
    choice; a log-concave factor with a closed-form mode centres its own rule
    (``Poisson._tilted``).
    """
    terms, c = _shifted_log_terms(logg, rule, sigma_points(rule, mean, cov), increasing, bound)
    if increasing is None:
        return logsumexp(terms)
    return c + jnp.log(jnp.sum(jnp.exp(terms - c)))


def log_expectation_exp_derivatives(logg, rule: Rule, mean, cov, increasing=None, bound=None):
    """(log Z, ∇_m log Z, ∇²_m log Z) of Z(m) = E_{N(m, V)}[exp(logg(f))], V = cov,
    from one evaluation of logg per node, by the Gaussian identities
    ∇Z = E[e^logg V⁻¹(f − m)] and ∇²Z = E[e^logg (V⁻¹(f − m)(f − m)ᵀV⁻¹ − V⁻¹)]:
    with the tilted weights s_i ∝ w_i e^logg(f_i) and offsets d_i = f_i − m,

        g = V⁻¹ d̄,   h = V⁻¹ (Σ s_i (d_i − d̄)(d_i − d̄)ᵀ − V) V⁻¹,   d̄ = Σ s_i d_i,

    i.e. the tilted mean shift and covariance change — Power EP's moment matching
    (Wilkinson et al. 2023 App. C), as BayesNewton's ``moment_match_cubature`` computes
    it, here in log-sum-exp weights without its clamp Z ≥ 1e-8. ``increasing`` and
    ``bound`` as in ``log_expectation_exp``.

    Why not autodiff through the rule (the module default): that needs ∇ and ∇² of logg
    at every node (for probit the Mills ratio φ/Φ, an exp and a division more, and XLA
    evaluates erfc in three fusions); and it is the derivative of the rule's sum, which
    is the less accurate of the two: against Gauss–Hermite-150, g and h of Power EP
    (α = 0.5, v ∈ [0.1, 3]) are off by 1.2e-6 and 3.6e-6 through the rule, 2.6e-7 and
    3.3e-7 here; under a wide
    Gaussian, where the nodes straddle the link's bend, the rule's sum is nearly flat
    between nodes and its derivative misses the bend altogether. Neither is the exact
    derivative of the energy the rule evaluates (the site update stands ∂/∂v in for
    ½∂²/∂m², an identity of the integral, not of the sum), and this form is the nearer:
    Power EP's fixed-site hyperparameter gradient at σ² = 20 is off the finite
    difference of converged energies by 5.5e-4 here, 3.8e-3 through the rule
    (tests/studies/test_learning.py). Cancellation: h subtracts V from the tilted covariance,
    so a nearly flat tilt (α → 0) loses relative accuracy ε/α in h and g (2e-10 at
    α = 1e-6). Every rule here is symmetric and exact for quadratics (Σ w_i d_i = 0,
    Σ w_i d_i d_iᵀ = V), so s = w gives h = 0.
    """
    offsets = rule.points @ chol_small(cov).T       # d_i, not (m + d_i) − m: no cancellation
    terms, c = _shifted_log_terms(logg, rule, mean[None, :] + offsets, increasing, bound)
    tilt = jnp.exp(terms - c)
    z = jnp.sum(tilt)
    s = tilt / z
    shift = s @ offsets
    centred = offsets - shift
    tilted_cov = jnp.einsum("p,pa,pb->ab", s, centred, centred)
    precision = inv_small(sym(cov))
    h = precision @ (tilted_cov - cov) @ precision
    return c + jnp.log(z), precision @ shift, 0.5 * (h + h.T)


#: break points of the panel rule in standard units, and its half-width (mass beyond
#: 10 standard deviations is below 1e-22)
_PANEL_BREAKS = np.array([-10.0, -5.0, 0.0, 5.0, 10.0])


def _panel_nodes(mean, sd, bends, order):
    """Standardised nodes t (P,) and weights (P,) of the panel rule, the weights
    including the standard normal density; zero-width panels get zero weight."""
    x, w = np.polynomial.legendre.leggauss(order)
    moved = jnp.clip((jnp.asarray(bends) - mean) / sd, -10.0, 10.0)
    breaks = jnp.sort(jnp.concatenate([jnp.asarray(_PANEL_BREAKS), moved]))
    lo, hi = breaks[:-1, None], breaks[1:, None]
    t = (0.5 * (lo + hi) + 0.5 * (hi - lo) * x[None]).ravel()
    weights = (0.5 * (hi - lo) * w[None]).ravel() * jnp.exp(-0.5 * t**2) / np.sqrt(2 * np.pi)
    return t, weights


def _panel_sd(var):
    return jnp.sqrt(jnp.maximum(var, 1e-300))


def panel_expectation(g, mean, var, bends, order=20):
    """E_{N(mean, var)}[g(f)] for scalar f by the panel rule; ``bends`` are the places
    (in f) where g changes on a scale much shorter than √var could resolve.
    Differentiable in mean and var (the break points move with them)."""
    sd = _panel_sd(var)
    t, weights = _panel_nodes(mean, sd, bends, order)
    return weights @ jax.vmap(g)(mean + sd * t)


def panel_log_expectation_exp(logg, mean, var, bends, order=20):
    """log E_{N(mean, var)}[exp(logg(f))] by the panel rule and log-sum-exp."""
    sd = _panel_sd(var)
    t, weights = _panel_nodes(mean, sd, bends, order)
    return logsumexp(jax.vmap(logg)(mean + sd * t), b=weights)
