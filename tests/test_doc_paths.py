"""Every repository path the documentation names exists: the Markdown files, and the
docstrings and comments of the package, tests, benchmarks, assets and apps. A path is
a word with a slash that starts at a top-level folder of the repository (``bnlab/…``,
``tests/…``) or at a folder of the package (``posterior/full.py``); references to other
projects' files start elsewhere and are not checked. Renamed or moved files otherwise
leave the README and the docstrings pointing at nothing."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
PACKAGE = {p.name for p in (ROOT / "bnlab").iterdir() if p.is_dir()}
#: a/b/c.ext, a/b/ (a folder), a/b-*.png (a pattern) or a/module.NAME, not inside a URL
#: or a longer path
PATH = re.compile(r"(?<![\w./:-])((?:[A-Za-z_][\w.-]*/)+(?:[\w.*-]*[\w*])?)(?![\w/])")


def documented_paths():
    """(file, line number, path) for every checked path the documentation names."""
    files = [ROOT / "README.md", *sorted(ROOT.glob("benchmarks/*.md"))]
    for folder in ("bnlab", "tests", "benchmarks", "assets", "apps"):
        files += sorted((ROOT / folder).rglob("*.py")) + sorted((ROOT / folder).rglob("*.sh"))
    for path in files:
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in PATH.findall(re.sub(r"<[\w-]+>", "*", line)):   # tour-<key>.png
                if ref.split("/")[0] in TOP | PACKAGE:
                    yield path.relative_to(ROOT), number, ref


def exists(ref: str) -> bool:
    """Whether ``ref`` names a file or folder, matches a pattern, or is ``module.NAME``
    for a module that exists (NAME itself is not looked up)."""
    head = ref.split("/")[0]
    base = ROOT if head in TOP else ROOT / "bnlab"
    if "*" in ref:
        return any(base.glob(ref))
    module, _, name = ref.rpartition(".")
    return (base / ref).exists() or bool(name.isidentifier() and name not in ("py", "md", "sh")
                                         and (base / (module + ".py")).exists())


def test_every_documented_path_exists():
    missing = [f"{file}:{number}: {ref}" for file, number, ref in documented_paths()
               if not exists(ref)]
    assert missing == []


def test_the_check_sees_paths_and_catches_a_missing_one():
    found = {ref for _, _, ref in documented_paths()}
    assert {"bnlab/_runtime/threads.py", "benchmarks/README.md"} <= found
    assert exists("posterior/full.py") and exists("bnlab/ui/")
    assert exists("assets/tour-*.png") and exists("ui/tours.TABS")
    assert not exists("bnlab/threads.py") and not exists("posterior/gone.py")
    assert not exists("ui/gone.TABS") and not exists("assets/none-*.png")
