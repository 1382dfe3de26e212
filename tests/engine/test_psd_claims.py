"""The README's "PSD guaranteed" column, method by method.

- The column agrees with the registry (``Method.psd_guaranteed``: "yes";
  ``Method.nonnegative_if_log_concave`` without it: "if log-concave"; neither: "no"),
  so the text cannot drift from what the tests below check.
- "yes": ``test_engine_psd.test_psd_guaranteed_methods_stay_psd`` (hypothesis, random
  data, kernels, likelihoods — log-concave or not — and ρ) runs every method the
  registry flags.
- "if log-concave": every iterate's site precisions are ≥ 0 and its posterior and
  cavities PD on log-concave likelihoods (hypothesis, below).
- "no", and "if log-concave" off log-concavity: a problem where the method produces
  a non-PD posterior or cavity (below; the flags themselves are checked against
  dense eigenvalues in test_engine_psd.py).
"""
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bnlab
from bnlab.methods.registry import METHOD_NAMES, REGISTRY
from reference import sine_with_outliers

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_psd_column():
    """{method: claim} from the README's methods table (rows may list several methods,
    "a, b" with claims "x / y")."""
    text = README.read_text()
    table = text[text.index("| method | J, H from | PSD guaranteed |"):]
    claims = {}
    for row in table.splitlines()[2:]:
        if not row.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip("|"))]   # not \|
        names = re.findall(r"`(\w+)`", _outside_parentheses(cells[0]))
        values = [v.strip() for v in cells[2].split("/")]
        if len(values) == 1:
            values = values * len(names)
        assert len(values) == len(names), row
        claims.update(zip(names, values))
    return claims


def _outside_parentheses(text):
    """``text`` without its (possibly nested) bracketed parts — the options, which may
    hold intervals like (0, 1]."""
    out, depth = [], 0
    for c in text:
        depth += c in "(["
        if depth == 0:
            out.append(c)
        depth -= c in ")]" and depth > 0
    return "".join(out)


def test_readme_column_is_the_registry():
    claims = readme_psd_column()
    assert set(claims) == set(METHOD_NAMES)
    for name, claim in claims.items():
        if name == "gkl":           # S = CᵀC by construction
            assert claim == "yes"
            continue
        guaranteed = REGISTRY[name].psd_guaranteed
        expected = ("yes" if guaranteed else "if log-concave"
                    if REGISTRY[name].nonnegative_if_log_concave else "no")
        assert claim == expected, (name, claim, expected)


LOG_CONCAVE_ONLY = sorted(n for n, m in REGISTRY.items()
                          if m.nonnegative_if_log_concave and not m.psd_guaranteed)
LOG_CONCAVE = {"probit": lambda: bnlab.likelihoods.Bernoulli("probit"),
               "poisson": bnlab.likelihoods.Poisson}


@pytest.mark.parametrize("method", LOG_CONCAVE_ONLY)
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), lengthscale=st.floats(0.2, 3.0),
       variance=st.floats(0.2, 8.0), likelihood=st.sampled_from(sorted(LOG_CONCAVE)),
       damping=st.floats(0.1, 1.0))
def test_log_concave_claims(method, seed, lengthscale, variance, likelihood, damping):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-3, 3, 12))[:, None]
    lik = LOG_CONCAVE[likelihood]()
    y = lik.sample(lik.init_params(), 1.5 * np.sin(2 * X), rng)
    model = bnlab.GP(bnlab.kernels.Matern52(lengthscale, variance), lik)
    r = bnlab.infer(model, X, y, method=method, damping=damping, alpha=0.5 if method == "pep"
                    else 1.0, max_iters=25, backtracking=False, acceleration=False)
    t = r.trace
    assert not r.diverged and t.psd.all(), (r, t)
    assert np.min(t.min_site_precision) >= -1e-12, t.min_site_precision



def _heteroscedastic(seed, n=20):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 6, n))[:, None]
    sd = 0.05 + 0.6 * np.exp(-((X[:, 0] - 3) ** 2))
    return X, np.sin(1.5 * X[:, 0]) + sd * rng.standard_normal(n)


STUDENT_T = (lambda: bnlab.likelihoods.StudentT(df=3.0, scale=0.05),
             bnlab.kernels.Matern32(0.7, 1.0), sine_with_outliers)
HETEROSCEDASTIC = (bnlab.likelihoods.Heteroscedastic, bnlab.kernels.Matern52(1.0, 1.0),
                   _heteroscedastic)
COUNTEREXAMPLES = {   # method: (problem, options)
    "laplace": (STUDENT_T, {"damping": 1.0}),
    "vi": (STUDENT_T, {"damping": 1.0}),
    "ep": (STUDENT_T, {"damping": 1.0}),
    "pep": (STUDENT_T, {"damping": 1.0, "alpha": 0.5}),
    "ep_like": (STUDENT_T, {"damping": 0.7}),
    "pep_qn": (STUDENT_T, {"damping": 1.0, "alpha": 0.5}),
    "pl2": (HETEROSCEDASTIC, {"damping": 1.0}),
}


def test_every_unguaranteed_method_has_a_counterexample():
    claims = readme_psd_column()
    assert set(COUNTEREXAMPLES) == {n for n, c in claims.items() if c != "yes"}


@pytest.mark.parametrize("method", sorted(COUNTEREXAMPLES))
def test_counterexample(method):
    (make_lik, kernel, data), options = COUNTEREXAMPLES[method]
    model = bnlab.GP(kernel, make_lik())
    failed = []
    for seed in range(8):
        X, y = data(seed)
        r = bnlab.infer(model, X, y, method=method, max_iters=40, backtracking=False,
                        acceleration=False, **options)
        failed.append(not r.trace.psd.all())
        if failed[-1]:
            assert r.diverged and r.stop_reason.startswith("diverged")
            break
    assert any(failed), method
