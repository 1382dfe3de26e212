"""Challis & Barber (2013) §6.2, Table 3: synthetic Bayesian logistic regression with
D = 250 and K = 13. N = 125 is averaged over 10 generated data sets as in the paper
(its standard errors are 0.02, i.e. a per-data-set spread of ≈ 0.06, so one data set
cannot be held to 0.05); N = 1250 uses one (standard errors 0.00).
Slow: run with ``pytest -m slow tests/gkl/test_gkl_paper.py``."""
import jax.numpy as jnp
import numpy as np
import pytest

import bnlab
from bnlab import cubature
from bnlab.gkl import fit
from bnlab.gkl.bound import kl_bound
from bnlab.gkl.structures import Subspace
from bnlab.papers.challis2013 import CB_TABLE3, synthetic_logistic

D, K = 250, 13
SEEDS = {125: 10, 1250: 1}
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[125, 1250])
def bounds(request):
    N = request.param
    lik = bnlab.likelihoods.Bernoulli("logit")
    out = {}
    for seed in range(SEEDS[N]):
        p = synthetic_logistic(D, N, 1, seed=seed)
        for name, kw in [("full", {}), ("banded", {"band": K}), ("chevron", {"rank": K}),
                         ("factor_analysis", {"rank": K}), ("subspace", {"rank": K})]:
            # max_iters counts every iteration: the subspace's 5 basis refreshes share it
            iters = 15000 if name == "subspace" else 3000
            r = fit(0.0, np.eye(D), p.X, lik, p.y, name, max_iters=iters, tol=1e-10, **kw)
            out.setdefault(name, []).append(r.bound / N)
    return N, {name: np.array(v) for name, v in out.items()}


def test_table3_bounds_and_ordering(bounds):
    N, b = bounds
    paper = CB_TABLE3[(N, K)]
    mean = {name: v.mean() for name, v in b.items()}
    for name in ("banded", "chevron", "factor_analysis"):
        assert abs(mean[name] - paper[name]) <= 0.05, (name, mean[name], paper[name])
    for name, v in b.items():                       # per data set: full is the best bound
        assert np.all(b["full"] >= v)
    if N == 125:     # the paper's gaps exceed its standard errors here
        assert mean["banded"] > mean["chevron"] and mean["banded"] > mean["factor_analysis"]
    else:
        assert mean["factor_analysis"] > mean["banded"]


@pytest.mark.xfail(strict=True, reason="the paper's subspace bounds (−2.93 at N = 125, −0.60 "
                   "at N = 1250) are far below what the subspace family reaches here "
                   "(−1.00, −0.41); ours are verified bounds (dense eq. 7 check, family "
                   "optimum on Gaussian targets); the paper's row is explained by an "
                   "entropy miscount, test_table3_subspace_row_is_a_miscounted_entropy")
def test_table3_subspace(bounds):
    """Not reproduced. The paper's subspace row sits a constant amount below its banded
    row whatever N: (banded − subspace)·N ≈ 235 nats at K = 13 for both N = 125 and
    1250, ≈ 140–150 at K = 25 (Table 2, D = 500: ≈ 490 and ≈ 290). A worse fit of the
    sites would shrink with the posterior width as N grows; an N-independent offset
    points at the prior/entropy terms of the paper's evaluation. App. B.4.1 prints the
    Gaussian term without its ½ (notes A), but that alone does not explain it:
    optimising the printed expression gives −1.56 / −0.47 (seed 0), not −2.93 / −0.60.
    Here (10 data sets at N = 125, 1 at 1250): subspace −0.997 / −0.411, banded
    −1.063 / −0.416 (paper −1.05 / −0.41). What the paper's row does match is the
    test below."""
    N, b = bounds
    assert abs(b["subspace"].mean() - CB_TABLE3[(N, K)]["subspace"]) <= 0.05


class _EntropyMiscountSubspace(Subspace):
    """The subspace family with the complement's entropy counted as K log c instead of
    (D − K) log c (App. B.4.1 prints L log c, L = D − K, and ∂/∂c = L/c; a K-for-L
    slip would have to be in the authors' code, which we cannot check)."""
    name = "subspace_entropy_miscount"

    def terms(self, params, prior, aux):
        half_logdet, trace, s2 = super().terms(params, prior, aux)
        K, D = aux[0].shape
        return half_logdet - (D - 2 * K) * jnp.log(jnp.abs(params["c"])), trace, s2


@pytest.mark.parametrize("N, K, seeds, tolerance", [(1250, 13, 1, 0.05), (1250, 25, 1, 0.05),
                                                    (125, 13, 10, 0.1)])
def test_table3_subspace_row_is_a_miscounted_entropy(N, K, seeds, tolerance):
    """The paper's subspace row is reproduced by the *correct* bound (eq. 7) evaluated
    where the miscounted objective above is maximal: c collapses to ≈ √(K/L) of its
    optimum (|c| = 0.037 instead of 0.18 at N = 1250, seed 0), which costs
    ≈ (L/2)(K/L − 1 − log(K/L)) nats whatever N — 232 at K = 13, 147 at K = 25,
    the paper's constant banded − subspace gaps of ≈ 235 and ≈ 145 (a second-order
    estimate). §6.2.2 describes such a collapse ("c will tend to the smallest value of
    the variance … the G-KL bound value will therefore be greatly underestimated").
    Measured (2026-11-23): −0.611 / −0.532 at N = 1250, K = 13 / 25 (paper −0.60 /
    −0.52); at N = 125, K = 13 the mean over the paper's 10 data sets is −3.01 ± 0.02
    against −2.93 (so only within 0.1), and at K = 25 −2.21 against −2.11 (not
    tested). Other Table 2/3 entries (D = 250, N = 250; D = 500, N = 250, 500, 2500)
    agree within 0.06. No other slip tried (the missing ½ of B.4.1, c fixed at 1, the
    complement entropy dropped or doubled, c² counted D times in the trace) comes
    near the row."""
    lik = bnlab.likelihoods.Bernoulli("logit")
    rule = cubature.make_rule("gauss_hermite", 20, 1)
    bounds = []
    for seed in range(seeds):
        p = synthetic_logistic(D, N, 1, seed=seed)
        r = fit(0.0, np.eye(D), p.X, lik, p.y, _EntropyMiscountSubspace(K), max_iters=15000,
                tol=1e-10)
        s = r.solution
        bound = kl_bound(s.vparams, r.prior, Subspace(K), s.aux, lik, lik.init_params(),
                         jnp.asarray(p.y), rule)
        bounds.append(float(bound) / N)
    assert abs(np.mean(bounds) - CB_TABLE3[(N, K)]["subspace"]) <= tolerance, bounds
