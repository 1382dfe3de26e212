"""The package's import graph follows the pipeline: every import points down the layers
below (a module may import its own folder and anything in a lower layer, never a higher
one), so the graph has no cycle and ``ls bnlab`` reads bottom to top."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bnlab"

#: bottom to top; units in one layer may not import each other
LAYERS = [
    {"_runtime", "special", "linalg", "hyperparameters"},
    {"cubature", "kernels", "sites", "inducing", "datasets"},
    {"likelihoods"},
    {"model"},
    {"posterior"},
    {"methods"},
    {"engine"},
    {"gkl"},
    {"inference"},
    {"sparse"},
    {"studies"},
    {"bnlab"},                        # the public face, bnlab/__init__.py
    {"papers"},
    {"cli"},
    {"ui"},
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _unit(module: str) -> str:
    """The top-level file or folder of ``bnlab`` a dotted module name belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "bnlab"   # "bnlab": the public face


def _imports(path: Path):
    """(unit, imported unit) for every import in ``path``, lazy ones included."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    if package[-1] == "__init__":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("bnlab"):
                continue
            if target == "bnlab":     # from bnlab import cubature / from .. import cubature
                for alias in node.names:   # a module, or a name of the public face
                    own = (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").exists()
                    yield "bnlab." + alias.name if own else "bnlab"
            else:
                yield target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bnlab"):
                    yield alias.name


def test_every_import_points_down_the_layers():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        unit = "bnlab" if rel.parts == ("__init__.py",) else rel.parts[0].removesuffix(".py")
        assert unit in RANK, f"{rel}: bnlab/{unit} is in no layer of this test"
        for target in _imports(path):
            other = _unit(target)
            if other == unit:
                continue
            assert other in RANK, f"{rel} imports {target}, which is in no layer"
            if RANK[other] >= RANK[unit]:
                upward.append(f"{rel} imports {target}")
    assert not upward, "imports that do not point down the layers:\n" + "\n".join(upward)


def test_every_family_returns_the_one_result_type():
    """Site methods and G-KL answer ``infer`` with the same ``Result``: one interface
    for the lab, the surfaces and scripts. Both predict the exact posterior of a
    Gaussian likelihood (G-KL with a full covariance is exact there too) and agree."""
    import numpy as np

    import bnlab
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (12, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.standard_normal(12)
    model = bnlab.GP(bnlab.kernels.RBF(0.7, 1.0), bnlab.likelihoods.Gaussian(noise=0.05))
    Xs = np.linspace(-2, 2, 5)[:, None]
    results = [bnlab.infer(model, X, y, method=m, max_iters=500) for m in ("vi", "gkl")]
    for res in results:
        assert isinstance(res, bnlab.Result), type(res)
        assert res.stop_reason == "converged", res
    (m_vi, v_vi), (m_gkl, v_gkl) = (res.predict(Xs) for res in results)
    np.testing.assert_allclose(m_gkl, m_vi, atol=1e-5)
    np.testing.assert_allclose(v_gkl, v_vi, atol=1e-5)
    assert abs(results[0].log_predictive(Xs, np.sin(2 * Xs[:, 0]))
               - results[1].log_predictive(Xs, np.sin(2 * Xs[:, 0]))) < 1e-5
