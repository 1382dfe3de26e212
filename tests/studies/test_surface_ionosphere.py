"""Li, John & Solin (2023) Fig. 2 on the IONOSPHERE surface split (Matérn-5/2, probit,
7 × 7 coarse version of the 21 × 21 grid over log ℓ, log σ ∈ [−1, 5]). Development data
only (never committed): the test skips when the file is absent.

Checked here: (i) the Laplace and VI surfaces look alike, and differ from the EP-like
one; (ii) EP and EP-like nearly agree wherever both converge; (iii) against MCMC
(AIS, 16 000 temperatures × 16 chains, one ESS step each) on the 4 × 4 block around
the four methods' optima: EP and EP-like resemble it, and their argmax is MCMC's while
VI's and Laplace's are not; (iv) the values per n lie within the paper's −0.8..0
colour band around the optimum.

About (iii): shorter AIS is biased low at large σ (2 000 temperatures read up to 0.03
per n below EP at log σ = 2, 16 000 within 0.01). The top of this surface is a flat
ridge: by AIS the cells (log ℓ, log σ) = (2, 2), (3, 3), (3, 2) lie within 0.003 per n
(≈ 1 nat) of each other, about 1–2 AIS standard errors, so the argmax statement holds
for this seeded run rather than with a wide margin; the resemblance statement holds
with a wide one. AIS results are cached on disk, so the first run takes ≈ 15 minutes
and later runs seconds (benchmarks/README.md, "Surfaces")."""
from pathlib import Path

import numpy as np
import pytest

import bnlab

SPLIT = Path("/work/shared/data/surface-splits/ionosphere.mat")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not SPLIT.exists(), reason="IONOSPHERE split not available")]


GRID = {"lengthscale": np.exp(np.linspace(-1, 5, 7)),
        "variance": np.exp(2 * np.linspace(-1, 5, 7))}
MCMC_CELLS = [(i, j) for i in range(2, 6) for j in range(2, 6)]


@pytest.fixture(scope="module")
def problem():
    from scipy.io import loadmat
    d = loadmat(SPLIT)
    X, y = d["train_X"], d["train_Y"].ravel().astype(float)
    model = bnlab.GP(bnlab.kernels.Matern52(), bnlab.likelihoods.Bernoulli("probit"))
    return model, X, y


@pytest.fixture(scope="module")
def surfaces(problem):
    model, X, y = problem
    s = bnlab.surface(model, X, y, methods=["laplace", "vi", "ep", "ep_like"], grid=GRID,
                      damping={"ep": 0.2}, max_iters={"ep": 1000, "vi": 1000, "ep_like": 1000})
    v = {m: s.log_marginal_per_n.loc[{"scheme": m}].values for m in s["scheme"].values}
    ok = {m: s.converged.loc[{"scheme": m}].values for m in s["scheme"].values}
    return v, ok


def test_ionosphere_surface_findings(surfaces):
    v, ok = surfaces
    # (i) LA ≈ VI, both unlike the EP-like surface
    assert np.mean(np.abs(v["laplace"] - v["vi"])) < 0.5 * np.mean(np.abs(v["ep_like"] - v["vi"]))
    # (ii) EP and EP-like (VI sites, EP energy) agree where both converged — every point
    # since VI's step control and exact ELBO derivatives (before, VI stopped short at 15
    # of the large-σ points even in 1000 steps, and the test saw only the rest): below
    # 1e-3 per n for log σ² ≤ 2, growing with σ² to 0.031 at (log ℓ, log σ²) = (1, 10),
    # where the posterior is least Gaussian. Accurate ("panels") expectations give the
    # same gaps to 5e-4, so they are EP-like's, not the cubature's.
    both = ok["ep"] & ok["ep_like"]
    assert both.sum() >= 45
    gap = np.where(both, np.abs(v["ep"] - v["ep_like"]), np.nan)
    assert np.nanmax(gap[:, :3]) < 1e-3 and np.nanmax(gap) < 0.035
    # the EP-like estimate is above the ELBO where VI converged, and peaks higher
    assert np.all(v["ep_like"][ok["vi"]] >= v["vi"][ok["vi"]] - 1e-6)
    # (iv) the optimum region lies within the paper's colour band
    best = np.nanmax(np.where(ok["ep_like"], v["ep_like"], np.nan))
    assert -0.4 < best < 0


def test_ionosphere_mcmc_comparison(problem, surfaces):
    from bnlab.studies.mcmc import ais_grid
    from bnlab.studies.surfaces import point_params
    model, X, y = problem
    v, ok = surfaces
    argmax = {m: np.unravel_index(np.nanargmax(np.where(ok[m], v[m], np.nan)), v[m].shape)
              for m in v}
    assert all(argmax[m] in MCMC_CELLS for m in v)          # the block holds every optimum
    thetas = [point_params(model.init_params(), ("lengthscale", "variance"),
                           (GRID["lengthscale"][i], GRID["variance"][j])) for i, j in MCMC_CELLS]
    out, _ = ais_grid(model, X, y, thetas, num_temps=16000, num_chains=16)
    mcmc = out["log_z"] / len(y)
    on_cells = {m: np.array([v[m][c] for c in MCMC_CELLS]) for m in v}
    # (iii a) EP and EP-like resemble MCMC; Laplace and VI fall away at large σ
    err = {m: np.mean(np.abs(on_cells[m] - mcmc)) for m in v}
    assert max(err["ep"], err["ep_like"]) < 0.5 * min(err["vi"], err["laplace"]), err
    # (iii b) the optimum: EP's and EP-like's is MCMC's, VI's and Laplace's are not
    best = MCMC_CELLS[int(np.argmax(mcmc))]
    distance = {m: np.hypot(*np.subtract(argmax[m], best)) for m in v}
    assert distance["ep"] == distance["ep_like"] == 0, (best, argmax)
    assert min(distance["vi"], distance["laplace"]) > 0, (best, argmax)
