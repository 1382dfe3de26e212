"""Challis & Barber (2013) §6.2, Table 3: synthetic Bayesian logistic regression with
D = 250 and K = 13. N = 125 is averaged over 10 generated data sets as in the paper
(its standard errors are 0.02, i.e. a per-data-set spread of ≈ 0.06, so one data set
cannot be held to 0.05); N = 1250 uses one (standard errors 0.00).
Slow: run with ``pytest -m slow tests/test_gkl_paper.py``."""
import numpy as np
import pytest

import bnlab
from bnlab.gkl import fit
from bnlab.gkl.synthetic import CB_TABLE3, synthetic_logistic

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
            r = fit(0.0, np.eye(D), p.X, lik, p.y, name, max_iters=3000, tol=1e-10, **kw)
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
                   "optimum on Gaussian targets); see the docstring")
def test_table3_subspace(bounds):
    """Not reproduced. The paper's subspace row sits a constant amount below its banded
    row whatever N: (banded − subspace)·N ≈ 235 nats at K = 13 for both N = 125 and
    1250, ≈ 140–150 at K = 25 (Table 2, D = 500: ≈ 490 and ≈ 290). A worse fit of the
    sites would shrink with the posterior width as N grows; an N-independent offset
    points at the prior/entropy terms of the paper's evaluation. App. B.4.1 prints the
    Gaussian term without its ½ (notes A), but that alone does not explain it:
    optimising the printed expression gives −1.56 / −0.47 (seed 0), not −2.93 / −0.60.
    Here (10 data sets at N = 125, 1 at 1250): subspace −0.997 / −0.411, banded
    −1.063 / −0.416 (paper −1.05 / −0.41)."""
    N, b = bounds
    assert abs(b["subspace"].mean() - CB_TABLE3[(N, K)]["subspace"]) <= 0.05
