"""Every site method runs on the Markov GP and follows the full GP's path.

For each method of ``REGISTRY`` (D = 1 with a probit likelihood — logit for vi_gn,
whose probit Gauss–Newton matrix overflows at far sigma points —, D = 2 with the
heteroscedastic likelihood) the Markov engine takes a few damped steps from the same
start. At every iterate its marginals, log_norm and energy must equal, for the same
sites, (a) the exact dense posterior (numpy: C = K(I + Λ̄K)⁻¹, m = Cν̄,
log_norm = ½ν̄ᵀm − ½log|I + KΛ̄|) to 1e-8, (b) the parallel-scan Markov GP to 1e-8 and
(c) the full GP (``bnlab.posterior.full``) to 1e-6 — the full GP adds a jitter of
1e-9·mean(diag K) to K in its Cholesky form (D = 2, or negative site precisions),
which moves its log_norm by up to a few 1e-8 on these iterates.

A method step is a deterministic function of (sites, marginals, aux), so equal
marginals at every iterate mean the full-GP run takes exactly this path (Wilkinson et
al. 2023 §8.3: "the exact same posterior"). Where a step is rejected (a non-PD
posterior: Laplace/EP on the heteroscedastic model) the full-GP run must diverge at the
same iteration. The D = 2 half (20 more engines) is marked ``slow``.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab.engine.energies import energy
from bnlab.engine.loop import get_engine
from bnlab.engine.state import Settings
from bnlab.methods.registry import REGISTRY
from bnlab.posterior import full, markov
from bnlab.sites import Marginals

STEPS = 3
PROBLEMS = {
    1: ("classification_1d", bnlab.kernels.Matern32(0.8, 1.5), bnlab.likelihoods.Bernoulli(),
        ("gauss_hermite", 20)),
    2: ("heteroscedastic_1d", [bnlab.kernels.Matern52(1.0, 1.0), bnlab.kernels.Matern12(1.5, 0.5)],
        bnlab.likelihoods.Heteroscedastic(), ("gauss_hermite", 8)),
}


def _alpha(method):
    return 0.5 if method.startswith("pep") else 1.0


@pytest.fixture(scope="module", params=[1, pytest.param(2, marks=pytest.mark.slow)],
                ids=["D1", "D2"])
def problem(request):
    name, kernel, lik, rule = PROBLEMS[request.param]
    ds = bnlab.datasets.load(name, n=40, seed=2)
    X, y = jnp.asarray(ds.X), jnp.asarray(lik.validate_targets(ds.y))
    gp = bnlab.GP(kernel, lik)
    params = gp.init_params()
    fprior = full.prepare(gp, params, X)
    priors = {p: markov.prepare(bnlab.MarkovGP(kernel, lik, parallel=p), params, X)
              for p in (False, True)}
    # one compiled reference per problem, vmapped over the recorded iterates
    ref = jax.jit(jax.vmap(lambda s: full.marginals(fprior, s)))
    par = jax.jit(jax.vmap(lambda s: markov.marginals(priors[True], s)))
    K = np.asarray(gp.prior_covariance(params, X, X))
    return dict(kernel=kernel, lik=lik, rule=rule, X=X, y=y, params=params, ref=ref, par=par,
                exact=lambda sites: _dense_exact(K, sites))


def _dense_exact(K, sites):
    """Exact posterior marginals for a stack of site sets, in plain numpy."""
    out = []
    for nat1, prec in zip(np.asarray(sites.nat1), np.asarray(sites.prec)):
        N, D = nat1.shape
        Lam = np.zeros((N * D, N * D))
        for n in range(N):
            Lam[n * D:(n + 1) * D, n * D:(n + 1) * D] = prec[n]
        C = K @ np.linalg.inv(np.eye(N * D) + Lam @ K)
        m = C @ nat1.reshape(-1)
        log_norm = 0.5 * nat1.reshape(-1) @ m - 0.5 * np.linalg.slogdet(np.eye(N * D) + K @ Lam)[1]
        blocks = np.stack([C[n * D:(n + 1) * D, n * D:(n + 1) * D] for n in range(N)])
        out.append(Marginals(jnp.asarray(m.reshape(N, D)), jnp.asarray(0.5 * (blocks + np.swapaxes(blocks, 1, 2))),
                             jnp.asarray(log_norm), jnp.asarray(True), jnp.zeros((N, D, D))))
    return _stack(out)


def _stack(trees):
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *trees)


@pytest.mark.parametrize("method", list(REGISTRY))
def test_markov_path_equals_full_gp(problem, method):
    lik = problem["lik"]
    if method == "vi_gn" and isinstance(lik, bnlab.likelihoods.Bernoulli):
        lik = bnlab.likelihoods.Bernoulli(link="logit")
    model = bnlab.MarkovGP(problem["kernel"], lik)
    engine = get_engine(model, method, problem["rule"])
    settings = Settings(jnp.asarray(_alpha(method)), jnp.asarray(0.5), jnp.asarray(1e-12))
    params, X, y = problem["params"], problem["X"], problem["y"]
    state = engine.init(params, X, y, settings)
    states = [state]
    for _ in range(STEPS):
        state, info = engine.step(params, X, y, settings, state)
        if not bool(info.accepted):
            break
        states.append(state)
    if len(states) <= STEPS:
        ref_run = bnlab.infer(bnlab.GP(problem["kernel"], lik), X, y, method=method,
                              alpha=_alpha(method), damping=0.5, max_iters=STEPS, tol=1e-12,
                              cubature=problem["rule"])
        assert ref_run.diverged and ref_run.n_iters == len(states)
    sites = _stack([s.sites for s in states])
    seq = _stack([s.marginals for s in states])
    exact, ref, par = problem["exact"](sites), problem["ref"](sites), problem["par"](sites)
    for other, tol in ((exact, 1e-8), (par, 1e-8), (ref, 1e-6)):
        if other is not exact:
            np.testing.assert_array_equal(np.asarray(other.psd), np.asarray(seq.psd))
        np.testing.assert_allclose(np.asarray(seq.mean), np.asarray(other.mean), atol=tol)
        np.testing.assert_allclose(np.asarray(seq.cov), np.asarray(other.cov), atol=tol)
        np.testing.assert_allclose(np.asarray(seq.log_norm), np.asarray(other.log_norm),
                                   rtol=tol, atol=tol)
    alpha = engine._alpha(settings)
    for i, s in enumerate(states):
        for other, tol in ((exact, 1e-8), (ref, 1e-6)):
            marg_i = jax.tree_util.tree_map(lambda a: a[i], other)
            e_other = energy(engine.method.energy, engine.lik, engine.rule, params["likelihood"],
                             y, marg_i, s.sites, alpha)
            np.testing.assert_allclose(float(s.energy), float(e_other), rtol=tol, atol=tol)
