"""Each covariance structure's bound equals an independent dense evaluation of
Challis & Barber (2013) eq. (7) at the structure's own (m, S), and S has the
advertised sparsity. No optimisation here: random parameters."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.gkl import kl_bound, make_prior, make_structure
from bnlab.gkl.structures import COVARIANCES

RANKED = {"banded": {"band": 2}, "chevron": {"rank": 3}, "subspace": {"rank": 2},
          "factor_analysis": {"rank": 2}}


def dense_bound(m, S, mu, Sigma, H, log_lik):
    """eq. (7) in NumPy, site expectations by a 60-point Gauss–Hermite rule."""
    x, w = np.polynomial.hermite.hermgauss(60)
    z, w = np.sqrt(2) * x, w / np.sqrt(np.pi)
    mn, sn = H @ m, np.sqrt(np.einsum("nd,de,ne->n", H, S, H))
    sites = sum(w[k] * log_lik(np.arange(len(mn)), mn + z[k] * sn) for k in range(len(z)))
    Sinv = np.linalg.inv(Sigma)
    return (0.5 * np.linalg.slogdet(2 * np.pi * np.e * S)[1]
            - 0.5 * np.linalg.slogdet(2 * np.pi * Sigma)[1]
            - 0.5 * (m - mu) @ Sinv @ (m - mu) - 0.5 * np.trace(Sinv @ S) + sites.sum())


def random_problem(gp: bool, seed=0):
    rng = np.random.default_rng(seed)
    D = 7
    A = rng.standard_normal((D, D))
    Sigma = A @ A.T / D + 0.5 * np.eye(D)
    mu = rng.standard_normal(D)
    H = None if gp else rng.standard_normal((9, D))
    N = D if gp else 9
    y = np.where(rng.uniform(size=N) < 0.5, 1.0, -1.0)
    return Sigma, mu, H, y


def perturb(tree, seed):
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    return treedef.unflatten([x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


@pytest.mark.parametrize("gp", [True, False])
@pytest.mark.parametrize("name", COVARIANCES)
def test_bound_matches_dense_formula(name, gp):
    Sigma, mu, H, y = random_problem(gp)
    lik = bnlab.likelihoods.Bernoulli("logit")
    prior = make_prior(jnp.asarray(mu), jnp.asarray(Sigma), None if H is None else jnp.asarray(H))
    structure = make_structure(name, **RANKED.get(name, {}))
    aux = structure.setup(prior)
    if structure.outer_steps:                     # a non-trivial subspace basis
        _, aux = structure.refresh(structure.init(prior, aux), prior, aux,
                                   jnp.linspace(0.1, 1.0, prior.num_sites))
    vparams = perturb({"mean": jnp.zeros(prior.dim), "cov": structure.init(prior, aux)}, 1)
    rule = bnlab.cubature.make_rule("gauss_hermite", 60, 1)
    ours = float(kl_bound(vparams, prior, structure, aux, lik, {}, jnp.asarray(y), rule))

    S = np.asarray(structure.covariance(vparams["cov"], prior, aux))
    L = np.asarray(prior.chol)
    m = mu + L @ np.asarray(vparams["mean"])
    Hd = np.eye(len(mu)) if H is None else H
    log_lik = lambda n, f: -np.logaddexp(0, -y[n] * f)
    Sigma_used = L @ L.T                          # the bound uses the (jittered) factor
    assert np.all(np.linalg.eigvalsh(S) > 0)
    assert ours == pytest.approx(dense_bound(m, S, mu, Sigma_used, Hd, log_lik), abs=1e-9)


def test_sparsity_patterns():
    Sigma, mu, _, _ = random_problem(True)
    prior = make_prior(jnp.asarray(mu), jnp.asarray(Sigma))
    D = len(mu)
    gap = np.abs(np.subtract.outer(np.arange(D), np.arange(D)))

    def S_of(name, **kw):
        st = make_structure(name, **kw)
        aux = st.setup(prior)
        return np.asarray(st.covariance(perturb(st.init(prior, aux), 2), prior, aux))

    assert np.all(S_of("banded", band=2)[gap > 2] == 0)
    assert np.any(S_of("banded", band=2)[gap == 2] != 0)
    S_mf = S_of("mean_field")
    assert np.all(S_mf[gap > 0] == 0)
    # chevron: the upper Cholesky factor C of S (S = CᵀC) has K dense rows, then a diagonal
    C = np.linalg.cholesky(S_of("chevron", rank=2)).T
    assert np.allclose(np.triu(C[2:, 2:], 1), 0, atol=1e-12)
    assert np.abs(C[0, 1:]).max() > 1e-3 and np.abs(C[1, 2:]).max() > 1e-3


def test_bad_structure_arguments():
    with pytest.raises(ValueError, match="unknown G-KL covariance"):
        make_structure("tridiagonal")
    with pytest.raises(ValueError, match="band"):
        make_structure("banded")
    with pytest.raises(ValueError, match="rank"):
        make_structure("chevron")
    with pytest.raises(ValueError, match="≥ 0"):
        make_structure("banded", band=-1)


@pytest.mark.parametrize("name", ["full", "banded", "chevron", "mean_field", "subspace"])
def test_midpoint_concavity_for_log_concave_sites(name):
    """[CB] §3.2: B_KL is jointly concave in (m, C) for log-concave sites. Our
    coordinates are linear in (m, C), so B(mid) ≥ mean(B(ends)) for any two points
    whose C has the same diagonal signs (log|C_ii| is concave on each orthant)."""
    Sigma, mu, H, y = random_problem(False, seed=4)
    lik = bnlab.likelihoods.Bernoulli("logit")
    prior = make_prior(jnp.asarray(mu), jnp.asarray(Sigma), jnp.asarray(H))
    structure = make_structure(name, **RANKED.get(name, {}))
    aux = structure.setup(prior)
    rule = bnlab.cubature.make_rule("gauss_hermite", 30, 1)
    B = lambda v: float(kl_bound(v, prior, structure, aux, lik, {}, jnp.asarray(y), rule))
    base = {"mean": jnp.zeros(prior.dim), "cov": structure.init(prior, aux)}
    for seed in range(10):
        a, b = perturb(base, 10 + seed), perturb(base, 100 + seed)
        mid = jax.tree_util.tree_map(lambda u, v: 0.5 * (u + v), a, b)
        assert B(mid) >= 0.5 * (B(a) + B(b)) - 1e-10
