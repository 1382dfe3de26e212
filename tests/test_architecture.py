"""The package's import graph follows the pipeline: every import points down the layers
below (a module may import its own folder and anything in a lower layer, never a higher
one), so the graph has no cycle and ``ls bnlab`` reads bottom to top. And the lab
(``bnlab/ui``) uses only the public face, so everything it needs is public API."""
import ast
import importlib
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bnlab"

#: bottom to top; units in one layer may not import each other
LAYERS = [
    {"_runtime", "special", "linalg", "checks"},
    {"cubature", "kernels", "sites", "inducing", "datasets"},
    {"likelihoods"},
    {"model", "hyperparameters"},     # the model; the names of its hyperparameters
    {"results"},                      # Result, Trace, stop_reason: every family's answer
    {"posterior"},
    {"methods"},
    {"engine", "gkl"},                # the two method families, peers: neither imports the other
    {"infer"},
    {"sparse"},
    {"studies"},
    {"bnlab"},                        # the public face, bnlab/__init__.py
    {"papers"},
    {"ui"},
    {"warmup"},                       # runs the lab's and the scripts' common work
    {"cli"},
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


def _public_object(path: str):
    """(object, None) for a public dotted name ``bnlab.a.b…``, else (None, why not). Public
    (``bnlab/__init__.py``): each part is in the ``__all__`` of the module before it,
    starting from ``bnlab``, and none starts with an underscore."""
    parts = path.split(".")
    obj = importlib.import_module("bnlab")
    for k, part in enumerate(parts[1:], 1):
        owner = ".".join(parts[:k])
        if part.startswith("_"):
            return None, f"{path}: {part!r} is private (leading underscore)"
        if not isinstance(obj, types.ModuleType):
            return obj, None           # an attribute of a public class or object
        if part not in getattr(obj, "__all__", ()):
            return None, f"{path}: {part!r} is not in {owner}.__all__"
        obj = getattr(obj, part)
    return obj, None


def _chain(node):
    """['a', 'b', 'c'] for the expression a.b.c, else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return [node.id] + names[::-1] if isinstance(node, ast.Name) else None


def private_uses(source: str, module: str) -> list[str]:
    """What the code of ``module`` (a dotted name in ``bnlab.ui``) takes from bnlab that is
    not public: each import of a bnlab name (``import``, ``from … import``, relative
    ones resolved), and each attribute read through an imported bnlab module
    (``bnlab.checks.f`` after ``import bnlab``). The UI's own modules are exempt."""
    package = module.split(".")[:-1]
    tree = ast.parse(source)
    found, bound = [], {}                      # bound: local name → dotted bnlab name

    def check(path, local=None):
        if path == "bnlab.ui" or path.startswith("bnlab.ui."):
            return
        obj, why = _public_object(path)
        if why:
            found.append(why)
        elif local and isinstance(obj, types.ModuleType):
            bound[local] = path

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "bnlab" or alias.name.startswith("bnlab."):
                    check(alias.name, alias.asname)
                    if alias.asname is None:
                        bound["bnlab"] = "bnlab"
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []
            if node.level:
                base = package[: len(package) - node.level + 1] + base
            if not base or base[0] != "bnlab":
                continue
            for alias in node.names:
                check(".".join(base + [alias.name]), alias.asname or alias.name)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):                # outermost attribute chains only
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            names = _chain(node)
            if names and names[0] in bound:
                check(".".join([bound[names[0]]] + names[1:]))
    return found


def test_the_lab_uses_only_public_names():
    """Every bnlab name a ``bnlab/ui`` module imports or reads through an imported bnlab
    module is public: what the lab needs, scripts can rely on too."""
    private = []
    for path in sorted((PACKAGE / "ui").rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        private += [f"{module}: {why}" for why in private_uses(path.read_text(), module)]
    assert not private, "the lab uses names that are not public:\n" + "\n".join(private)


@pytest.mark.parametrize("source", [
    "from bnlab._runtime import disk_cache",
    "from bnlab.methods.registry import REGISTRY",
    "from ..methods.registry import REGISTRY",
    "import bnlab.posterior.joint",
    "from bnlab.studies.mcmc import exact_model",
    "import bnlab\nbnlab.checks.real_number",
    "from bnlab import mcmc\nmcmc.exact_model(None, [])",
    "from bnlab.studies import mcmc as m\nm.cache.make_key",
])
def test_private_uses_finds(source):
    """The check sees each way the lab reached past the public face."""
    assert private_uses(source, "bnlab.ui.example"), source


def test_private_uses_passes_public_names():
    """…and passes public names, however imported, and the UI's own modules."""
    source = ("import bnlab\nimport bnlab.studies.mcmc\nfrom bnlab import datasets\n"
              "from bnlab.methods import REGISTRY\nfrom ..gkl import COVARIANCES\n"
              "from . import catalog\nfrom .runner import Runner\n"
              "bnlab.likelihoods.LIKELIHOODS\ndatasets.load\nbnlab.Stepper.predict\n"
              "bnlab.studies.mcmc.posterior_key\ncatalog.anything._private")
    assert private_uses(source, "bnlab.ui.example") == []


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


def _name_comparisons(root, names) -> list[str]:
    """The comparisons under ``root`` with one of ``names`` written as a string literal
    on a side (a constant, or a tuple, list or set of constants), as "line N: source". A
    record's ``.energy`` compared with an energy's name passes: 'laplace', 'pep' and 'ep'
    name energies too."""
    found = []
    for node in ast.walk(root):
        if isinstance(node, ast.Compare):
            sides = (node.left, *node.comparators)
            if any(isinstance(s, ast.Attribute) and s.attr == "energy" for s in sides):
                continue
            for side in sides:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                if any(isinstance(c, ast.Constant) and c.value in names for c in items):
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
                    break
    return found


def _method_names() -> set:
    from bnlab.methods import method_names
    return set(method_names())


def _mentions_alpha(*nodes) -> bool:
    return any("alpha" in ast.unparse(n).lower() or "α" in ast.unparse(n) for n in nodes)


def alpha_name_decisions(source: str) -> list[str]:
    """Comparisons with a method-name literal (``method == "ep"``, ``base == "pep"``,
    ``m in ("pep", "pep_qn")``) that decide something about α: anywhere in a function
    whose name says alpha, or in the condition of an ``if`` or conditional expression
    whose branches mention it. Whether a method takes α is its record's ``uses_alpha``
    (``bnlab.methods.takes_alpha``); a name written here would miss a registered method
    and drift from the record. Names used otherwise (a default, a tour's settings) pass,
    and so does a record's ``.energy`` compared with an energy's name ('pep' and
    'laplace' name energies too)."""
    tree = ast.parse(source)
    decisive = []                                   # nodes whose comparisons decide α
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and "alpha" in node.name.lower():
            decisive.append(node)
        elif isinstance(node, ast.If) and _mentions_alpha(node.test, *node.body, *node.orelse):
            decisive.append(node.test)
        elif isinstance(node, ast.IfExp) and _mentions_alpha(node.body, node.orelse):
            decisive.append(node.test)
    return sorted({where for root in decisive for where in _name_comparisons(root, _method_names())})


#: the packages that read method and likelihood facts from the records, never from names
#: (the records themselves: ``bnlab/methods``, ``bnlab/likelihoods``, ``bnlab/gkl``)
READERS = ("ui", "studies")


def _found_in_readers(check) -> list[str]:
    """What ``check(source)`` finds in every module of ``READERS``, each named."""
    return [f"{path.relative_to(PACKAGE)} {where}"
            for unit in READERS for path in sorted((PACKAGE / unit).rglob("*.py"))
            for where in check(path.read_text())]


def test_the_lab_and_the_studies_ask_the_records_whether_a_method_takes_alpha():
    """No ``bnlab/ui`` or ``bnlab/studies`` module decides α by a method's name: one
    rule, the records'."""
    found = _found_in_readers(alpha_name_decisions)
    assert not found, "α decided by method names, not by Method.uses_alpha:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "def effective_alpha(self):\n    return self.alpha if self.method in ('pep', 'pep_qn') else 1",
    "if not (m in ALPHA_METHODS or (m == 'heuristic' and base == 'pep')):\n"
    "    out['alpha'] = 'only for PEP'",
    "a = 1.0 if run == 'ep' else float(alpha)",
    "def _alpha_cell(method, alpha):\n    return '1 (EP)' if method == 'ep' else f'{alpha:g}'",
])
def test_alpha_name_decisions_finds(source):
    assert alpha_name_decisions(source), source


def test_alpha_name_decisions_passes_defaults_and_other_decisions():
    source = ("method = param.Selector(default='vi', objects=['vi', 'ep'])\n"
              "value = ['laplace', 'vi', 'ep', 'ep_like']\n"
              "step = {'method': 'pep', 'alpha': 0.5}\n"
              "if self.method != 'heuristic':\n    out['base'] = 'only for the heuristic fix'\n"
              "a = float(alpha) if takes_alpha(method) else 1.0\n"
              "cell = '1 (EP)' if record.energy == 'pep' else f'{alpha:g}'\n"
              "def effective_alpha(self):\n    return self.alpha if self.takes_alpha() else 1.0")
    assert alpha_name_decisions(source) == []


def method_name_decisions(source: str) -> list[str]:
    """Comparisons with a method's name (``bnlab.methods.method_names()``) as a string
    literal (``m in ('vi', 'ep_like')``, ``'vi' in methods``, ``method == 'heuristic'``):
    what a method is and does is its record's (``REGISTRY[m]``'s fields, ``takes_alpha``,
    ``takes_base``), so a method registered beside it is decided the same way. A
    record's ``.energy`` compared with an energy's name passes ('laplace', 'pep' and 'ep'
    name energies too), and so do names used otherwise (defaults, a tour's settings)."""
    return _name_comparisons(ast.parse(source), _method_names())


def test_the_lab_and_the_studies_decide_nothing_by_a_method_s_name():
    found = _found_in_readers(method_name_decisions)
    assert not found, ("method facts decided by name in the lab or the studies:\n"
                       + "\n".join(found))


@pytest.mark.parametrize("source", [
    "share = {'vi', 'ep_like'} <= set(methods)",
    "run = 'ep_like' if share and m in ('vi', 'ep_like') else m",
    "if 'vi' in methods:\n    bound = ds.sel(scheme='vi')",
    "if self.method != 'heuristic':\n    out['base'] = 'only for the heuristic fix'",
])
def test_method_name_decisions_finds(source):
    assert method_name_decisions(source), source


def test_method_name_decisions_passes_records_and_other_uses():
    source = ("method = param.Selector(default='vi', objects=['vi', 'ep'])\n"
              "step = {'method': 'heuristic', 'base': 'pep'}\n"
              "engine = get_engine(model, 'ep_like', cubature)\n"
              "if takes_base(self.method):\n    out = (('base', self.base),)\n"
              "if REGISTRY[m].iteration_of in run:\n    pass\n"
              "cell = '1 (EP)' if record.energy == 'pep' else 'α'\n"
              "others = [m for m in methods if m != 'mcmc']")
    assert method_name_decisions(source) == []


def likelihood_name_decisions(source: str) -> list[str]:
    """Comparisons with a likelihood's name (a ``bnlab.likelihoods.LIKELIHOODS`` key or
    'probit'/'logit') as a string literal: the lab and the studies read a likelihood's
    facts from the likelihood (``init_params()``, ``label``, ``exact_expectations``, its
    class), so a likelihood added there needs no edit in them. A method record's
    ``.energy`` compared with an energy's name passes ('laplace' names an energy too)."""
    import bnlab
    return _name_comparisons(ast.parse(source), set(bnlab.likelihoods.LIKELIHOODS))


def test_the_lab_and_the_studies_read_likelihood_facts_from_the_likelihood():
    found = _found_in_readers(likelihood_name_decisions)
    assert not found, ("likelihood facts decided by name in the lab or the studies:\n"
                       + "\n".join(found))


@pytest.mark.parametrize("source", [
    "if lik in ('gaussian', 'product'):\n    out.append('noise')",
    "if lik != 'student_t':\n    out['df'] = 'Student-t only'",
    "kind = 'probability' if p.likelihood in ('probit', 'logit') else 'y'",
    "unroll = 2 if model.likelihood.name == 'laplace' else 0",
])
def test_likelihood_name_decisions_finds(source):
    assert likelihood_name_decisions(source), source


def test_likelihood_name_decisions_passes_values_and_facts():
    source = ("likelihood = param.Selector(default='auto')\n"
              "step = {'dataset': 'counts_1d', 'likelihood': 'poisson'}\n"
              "if 'df' not in lik.init_params():\n    out['df'] = 'none'\n"
              "if isinstance(lik, Bernoulli):\n    kind = 'probability'\n"
              "if method == 'laplace_gn':\n    pass\n"
              "unroll = 2 if engine.method.energy == 'laplace' else 0")
    assert likelihood_name_decisions(source) == []


def gkl_literals(source: str) -> list[str]:
    """Where ``source`` writes the string ``"gkl"``, other than in an ``__all__`` (where
    it names the subpackage ``bnlab.gkl``). G-KL is recognised by its record
    (``bnlab.methods.DIRECT``, ``bnlab.gkl.GKL``), not by its name: a name written
    elsewhere misses a direct family registered beside it."""
    tree = ast.parse(source)
    exports = {id(c) for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
               for c in ast.walk(node.value)}
    return [f"line {node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value == "gkl" and id(node) not in exports]


def test_gkl_is_named_only_by_its_family_and_the_registry():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("gkl/") or rel == "methods/registry.py":
            continue
        where = gkl_literals(path.read_text())
        if where:
            found.append(f"{rel}: {', '.join(where)}")
    assert not found, "'gkl' written outside bnlab/gkl and the registry:\n" + "\n".join(found)


def test_gkl_literals_finds_names_and_passes_exports():
    assert gkl_literals("if method == 'gkl':\n    pass") == ["line 1"]
    assert gkl_literals("m = [x for x in methods if x not in ('gkl', 'mcmc')]")
    assert gkl_literals("__all__ = ['gkl', 'mcmc']\ns = 'the gkl bound'") == []


def test_a_registered_direct_family_runs_through_infer_and_surface():
    """A direct family is its ``DirectMethod`` record: one registered under a new name
    (here G-KL with a mean-field covariance, fixed) runs through ``bnlab.infer`` and
    ``bnlab.surface`` with no edit there, and gives what G-KL gives with that option."""
    from functools import partial

    import numpy as np

    import bnlab
    from bnlab.gkl import GKL
    from bnlab.methods import DIRECT, DirectMethod, register, unregister
    toy = DirectMethod(name="toy_mean_field", description="G-KL, mean-field",
                       infer=partial(GKL.infer, covariance="mean_field"),
                       bound_at_optimum=partial(GKL.bound_at_optimum, covariance="mean_field"))
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, (10, 1))
    y = np.sign(np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(10))
    model = bnlab.GP(bnlab.kernels.Matern52(0.8, 1.0), bnlab.likelihoods.Bernoulli())
    grid = {"lengthscale": np.array([0.5, 1.0]), "variance": np.array([1.0, 2.0])}
    register(toy)
    try:
        assert "toy_mean_field" in bnlab.METHOD_NAMES and DIRECT["toy_mean_field"] is toy
        got = bnlab.infer(model, X, y, method="toy_mean_field")
        surf = bnlab.surface(model, X, y, methods=["toy_mean_field", "gkl"], grid=grid,
                             method_options={"gkl": {"covariance": "mean_field"}})
    finally:
        unregister("toy_mean_field")
    want = bnlab.infer(model, X, y, method="gkl", covariance="mean_field")
    assert got.log_marginal == want.log_marginal and got.n_iters == want.n_iters
    lml = surf.log_marginal.values
    assert np.all(np.isfinite(lml)) and np.array_equal(lml[0], lml[1])
    assert "toy_mean_field" not in bnlab.METHOD_NAMES


#: the lab's views (``bnlab/ui``): each draws its page's model and reacts to it; the
#: models beside ``Runner`` (``live_model``, ``compare_model``, ``alpha_sweep``,
#: ``surfaces_model``) run the engine and the studies
VIEWS = ("app", "live", "live_controls", "compare", "alpha_explorer", "surfaces",
         "surface_stars", "tour_panel")
#: the most lines a view may have (issue 50: its largest under 250)
VIEW_LINES = 250


def view_runs_things(source: str, module: str) -> list[str]:
    """The imports in ``source`` (the code of ``module``, a dotted name in ``bnlab.ui``;
    lazy imports included, relative ones resolved) that reach past the lab into what
    computes: a bnlab module outside ``bnlab.ui`` (a study, the engine, the public
    face that runs them) or JAX."""
    package = module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (package[: len(package) - node.level + 1] if node.level else []) + (
                node.module.split(".") if node.module else [])
            names = [".".join(base + [alias.name]) for alias in node.names] if (
                base == ["bnlab"] or base == package) else [".".join(base)]
        else:
            continue
        for name in names:
            ours = name == "bnlab.ui" or name.startswith("bnlab.ui.")
            if (name.split(".")[0] == "bnlab" and not ours) or name.split(".")[0] == "jax":
                found.append(f"line {node.lineno}: {name}")
    return found


def test_views_only_draw_and_react():
    """A view imports no study, engine or JAX module (what it shows, its page's model
    computes), and stays small."""
    found = []
    for name in VIEWS:
        path = PACKAGE / "ui" / f"{name}.py"
        found += [f"ui/{name}.py {where}"
                  for where in view_runs_things(path.read_text(), f"bnlab.ui.{name}")]
        lines = len(path.read_text().splitlines())
        if lines >= VIEW_LINES:
            found.append(f"ui/{name}.py has {lines} lines (a view: under {VIEW_LINES})")
    assert not found, "views that compute or grew:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import bnlab",
    "from bnlab.studies import learning",
    "from ..studies.surfaces import surface",
    "from .. import engine",
    "from bnlab import infer",
    "import jax.numpy as jnp",
    "def compute():\n    import bnlab\n    return bnlab.surface",
])
def test_view_runs_things_finds(source):
    assert view_runs_things(source, "bnlab.ui.example"), source


def test_view_runs_things_passes_the_labs_own_modules():
    source = ("import panel as pn\nimport param\nfrom . import catalog, markup\n"
              "from .live_model import LiveModel\nfrom bnlab.ui.settings import LabSettings\n"
              "import bnlab.ui.surface_plots\nfrom .. import ui\n")
    assert view_runs_things(source, "bnlab.ui.example") == []


#: the pages' models: Panel-free, so that scripts and tests drive them without a page
MODELS = ("live_model", "compare_model", "alpha_sweep", "surfaces_model")


def draws(source: str) -> list[str]:
    """The imports in ``source`` of a drawing library: Panel, Bokeh, HoloViews."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        found += [f"line {node.lineno}: {n}" for n in names
                  if n.split(".")[0] in ("panel", "bokeh", "holoviews")]
    return found


def test_the_pages_models_do_not_draw():
    found = [f"ui/{name}.py {where}" for name in MODELS
             for where in draws((PACKAGE / "ui" / f"{name}.py").read_text())]
    assert not found, "models that import a drawing library:\n" + "\n".join(found)


@pytest.mark.parametrize("source", ["import panel as pn", "from panel.io.state import set_curdoc",
                                    "import holoviews as hv", "from bokeh.models import Div"])
def test_draws_finds(source):
    assert draws(source) and not draws("import param\nfrom . import markup")
