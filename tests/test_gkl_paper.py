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
                   "at N = 1250) are far below what the optimised subspace family reaches "
                   "here (≈ −1.10, −0.41); ours are verified bounds (dense eq. 7 check)")
def test_table3_subspace(bounds):
    N, b = bounds
    assert abs(b["subspace"].mean() - CB_TABLE3[(N, K)]["subspace"]) <= 0.05
