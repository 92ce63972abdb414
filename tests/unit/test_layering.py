"""Imports point one way (STYLE.md): isa <- sim, hw, compiler <- tuner; driver never compiler;
the runtime (what a board runs) none of compiler, tuner, sim, hw.
Every import of ours names the one installed package: ``pyvta.sim``, never a bare ``sim``."""

import ast
from pathlib import Path

import pytest

from pyvta.testing.checkout import NotACheckout, checkout_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("isa", "sim", "hw", "compiler", "tuner", "driver", "runtime")
# package -> parts of pyvta it must not import ("pyvta": the command-line tool and pyvta.testing)
FORBIDDEN = {
    "isa": {"sim", "hw", "compiler", "tuner", "driver", "pyvta"},
    "sim": {"hw", "compiler", "tuner", "driver", "pyvta"},
    "hw": {"compiler", "tuner", "driver", "pyvta"},
    "compiler": {"sim", "hw", "tuner", "pyvta"},
    "driver": {"compiler", "tuner", "pyvta"},
    "tuner": {"hw", "pyvta"},
    "runtime": {"compiler", "tuner", "sim", "hw", "pyvta"},
}
# Leaf modules a package may import although their part is forbidden to it: the cycle model's
# constants and formulas (``sim.timing``, which imports nothing of ours) are the hardware's cost,
# and the compiler's estimate reads them instead of keeping a second set (one cost model).
# ``pyvta.cache`` (the one cache root, ``cache`` below) is every package's: all of them keep
# work on disk under it. ``pyvta.host_cpu`` (the host CPU and its x86 feature levels) is every
# package's above isa that generates machine code. ``pyvta.workers`` (a pool of worker processes,
# no import of ours) is the compiler's, which builds a network's kernels in it, and the tuner's,
# which builds and times candidates in it.
ALLOWED_LEAVES = {
    "isa": {"cache"},
    "compiler": {"sim.timing", "cache", "host_cpu", "workers"},
    **{p: {"cache", "host_cpu"} for p in ("sim", "hw", "driver")},
    "tuner": {"cache", "host_cpu", "workers"},
    "runtime": {"cache", "host_cpu"},
}
# what a leaf may import: isa's errors (isa imports nothing of ours, so the leaf stays below
# every package that uses it)
LEAF_MAY_IMPORT = {"isa"}


def _leaf_path(leaf: str) -> Path:
    """The source of a leaf module named below ``pyvta`` (``sim.timing``: sim/timing.py; ``cache``,
    the CLI package's own: pyvta/cache.py)."""
    parts = leaf.split(".")
    folder = [] if parts[0] in PACKAGES else ["pyvta"]
    return ROOT.joinpath(*folder, *parts[:-1], parts[-1] + ".py")


def _part(dotted: str) -> str:
    """The part of pyvta a dotted name below ``pyvta`` belongs to ("pyvta" for the CLI's own)."""
    head = dotted.split(".")[0]
    return head if head in PACKAGES else "pyvta"


def _imports(tree: ast.AST, leaves: frozenset[str] = frozenset()) -> tuple[set[str], list[str]]:
    """(parts of pyvta imported, bare imports of our packages as written); an import of a
    module in ``leaves`` (dotted, below ``pyvta``) counts for no part."""
    parts, bare = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
            if node.module == "pyvta":
                parts |= {_part(a.name) for a in node.names if a.name not in leaves}
                continue
        else:
            continue
        for m in modules:
            if m.split(".")[0] in PACKAGES:
                bare.append(f"line {node.lineno}: {m}")
            elif m.removeprefix("pyvta.") in leaves:
                continue
            elif m.startswith("pyvta."):
                parts.add(_part(m.removeprefix("pyvta.")))
            elif m == "pyvta":
                parts.add("pyvta")
    return parts, bare


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        leaves = frozenset(ALLOWED_LEAVES.get(package, ()))
        parts, _ = _imports(ast.parse(path.read_text(), filename=str(path)), leaves)
        name = str(path.relative_to(ROOT))
        if wrong := parts & FORBIDDEN[package]:
            bad.append(f"{name} imports {sorted(wrong)}")
    assert not bad, "\n".join(bad)


def _tracked(*patterns: str) -> list[Path]:
    try:
        return [ROOT / f for f in checkout_files(ROOT, *patterns)]
    except NotACheckout as exc:
        pytest.skip(f"needs a git checkout to list the project's files: {exc}")


def test_every_import_names_the_pyvta_package():
    """Code, tests, benchmarks and docs: no bare ``import sim`` (the READMEs' examples run from
    outside the checkout in test_docs.py, where a bare import fails)."""
    bad, paths = [], _tracked("*.py")
    for path in paths:
        _, bare = _imports(ast.parse(path.read_text(), filename=str(path)))
        bad += [f"{path.relative_to(ROOT)} {b}" for b in bare]
    assert len(paths) > 200, f"only {len(paths)} Python files found under {ROOT}"
    assert not bad, "bare imports of our packages (write pyvta.<name>):\n" + "\n".join(bad)


def test_the_layering_check_sees_every_import_form():
    src = (
        "import pyvta.sim.program\nfrom pyvta import hw, __version__\nfrom pyvta.cli import main\n"
    )
    src += "import compiler\nfrom isa.config import HwConfig\n"
    parts, bare = _imports(ast.parse(src))
    assert parts == {"sim", "hw", "pyvta"}
    assert bare == ["line 4: compiler", "line 5: isa.config"]


@pytest.mark.parametrize("leaf", sorted({m for ms in ALLOWED_LEAVES.values() for m in ms}))
def test_allowed_leaf_modules_import_nothing_of_ours(leaf):
    """...but isa (``LEAF_MAY_IMPORT``), which imports nothing of ours."""
    path = _leaf_path(leaf)
    parts, bare = _imports(ast.parse(path.read_text(), filename=str(path)))
    wrong = parts - LEAF_MAY_IMPORT
    assert not wrong and not bare, f"{leaf} imports {sorted(wrong)} {bare}: it is no leaf"


def test_a_leaf_exception_covers_only_that_module():
    src = "from pyvta.sim.timing import Timing\nimport pyvta.sim.cycle\n"
    assert _imports(ast.parse(src), frozenset({"sim.timing"}))[0] == {"sim"}
    assert _imports(ast.parse(src.splitlines()[0]), frozenset({"sim.timing"}))[0] == set()
    src = "from pyvta import cache, cli\n"
    assert _imports(ast.parse(src), frozenset({"cache"}))[0] == {"pyvta"}
    assert _imports(ast.parse("from pyvta import cache\n"), frozenset({"cache"}))[0] == set()


_LOAD_ALL = """
import importlib, json, pkgutil, sys
package = importlib.import_module("pyvta." + sys.argv[1])
failed = []
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    try:
        importlib.import_module(info.name)
    except ImportError as e:  # an optional dependency (dask, cocotb, ...) this install lacks
        if (e.name or "").startswith("pyvta"):
            raise
        failed.append(info.name)
print(json.dumps([sorted(sys.modules), failed]))
"""


def _loaded_parts(modules: list[str], leaves: set[str]) -> dict[str, str]:
    """Part of pyvta -> a module of it in ``modules``; a leaf and its packages' ``__init__``
    (``pyvta.sim`` for ``sim.timing``: loading the leaf runs it) count for no part."""
    exempt = {"pyvta"}
    for leaf in leaves:
        parts = leaf.split(".")
        exempt |= {"pyvta." + ".".join(parts[: i + 1]) for i in range(len(parts))}
    out: dict[str, str] = {}
    for m in modules:
        if m.startswith("pyvta.") and m not in exempt:
            out.setdefault(_part(m.removeprefix("pyvta.")), m)
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_a_package_loads_no_forbidden_part(package):
    """Transitively: every module of ``package`` imported in a fresh interpreter (through the
    packages' ``__init__``s, e.g. the compiler's ``driver.kernel`` runs ``driver/__init__``)
    loads no module of a part it must not import."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-P", "-c", _LOAD_ALL, package],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    modules, failed = json.loads(done.stdout.splitlines()[-1])
    print(f"{package}: {len(modules)} modules loaded; not importable here: {failed}")
    loaded = _loaded_parts(modules, set(ALLOWED_LEAVES.get(package, ())))
    wrong = {part: m for part, m in loaded.items() if part in FORBIDDEN[package]}
    assert not wrong, f"importing {package} loads {wrong}"


def test_the_transitive_check_sees_a_forbidden_load():
    loaded = _loaded_parts(["pyvta", "pyvta.sim", "pyvta.sim.timing"], {"sim.timing"})
    assert loaded == {}
    loaded = _loaded_parts(["pyvta.sim", "pyvta.sim.timing", "pyvta.sim.functional"], set())
    assert loaded == {"sim": "pyvta.sim"}
