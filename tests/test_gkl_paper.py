"""Challis & Barber (2013) §6.2, Table 3: synthetic Bayesian logistic regression with
D = 250 and K = 13, one generated data set per N (the paper averages 10; its standard
errors are ≤ 0.02). Slow: run with ``pytest -m slow tests/test_gkl_paper.py``."""
import numpy as np
import pytest

import bnlab
from bnlab.gkl import fit
from bnlab.gkl.synthetic import CB_TABLE3, synthetic_logistic

D, K = 250, 13
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[125, 1250])
def bounds(request):
    N = request.param
    p = synthetic_logistic(D, N, 1, seed=0)
    lik = bnlab.likelihoods.Bernoulli("logit")
    out = {}
    for name, kw in [("full", {}), ("banded", {"band": K}), ("chevron", {"rank": K}),
                     ("factor_analysis", {"rank": K}), ("subspace", {"rank": K})]:
        out[name] = fit(0.0, np.eye(D), p.X, lik, p.y, name, max_iters=3000, tol=1e-10,
                        **kw).bound / N
    return N, out


def test_table3_bounds_and_ordering(bounds):
    N, b = bounds
    paper = CB_TABLE3[(N, K)]
    for name in ("banded", "chevron", "factor_analysis"):
        assert abs(b[name] - paper[name]) <= 0.05, (name, b[name], paper[name])
    assert all(b["full"] >= v for v in b.values())
    if N == 125:     # the paper's gaps exceed its standard errors here
        assert b["banded"] > b["chevron"] and b["banded"] > b["factor_analysis"]
    else:
        assert b["factor_analysis"] > b["banded"]


@pytest.mark.xfail(strict=True, reason="the paper's subspace bounds (−2.93 at N = 125, −0.60 "
                   "at N = 1250) are far below what the optimised subspace family reaches "
                   "here (≈ −1.07, −0.41); our values are verified bounds (dense eq. 7 check)")
def test_table3_subspace(bounds):
    N, b = bounds
    assert abs(b["subspace"] - CB_TABLE3[(N, K)]["subspace"]) <= 0.05
