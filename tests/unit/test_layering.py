"""Imports point one way (STYLE.md): isa <- sim, hw, compiler <- tuner; driver never compiler."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("isa", "sim", "hw", "compiler", "tuner", "driver")
# package -> packages of ours it must not import
FORBIDDEN = {
    "isa": {"sim", "hw", "compiler", "tuner", "driver", "pyvta"},
    "sim": {"hw", "compiler", "tuner", "driver", "pyvta"},
    "hw": {"compiler", "tuner", "driver", "pyvta"},
    "compiler": {"sim", "hw", "tuner", "pyvta"},
    "driver": {"compiler", "tuner", "pyvta"},
    "tuner": {"hw", "pyvta"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        wrong = _imports(path) & FORBIDDEN[package]
        if wrong:
            bad.append(f"{path.relative_to(ROOT)} imports {sorted(wrong)}")
    assert not bad, "\n".join(bad)
