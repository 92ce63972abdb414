"""``benchmarks/compile_speed.py`` against a revision: the other checkout imported through its
folder of links (not this one's code), its builds timed in fresh processes, and both sides'
kernels JIT-compiled in one process with their outputs compared."""

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "benchmarks" / "compile_speed.py"


def _git_head() -> str:
    if shutil.which("git") is None:
        pytest.skip("needs git (the benchmark checks the other revision out in a worktree)")
    p = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if p.returncode != 0:
        pytest.skip(f"needs a git checkout of the repository: {p.stderr.strip()}")
    return p.stdout.strip()


def test_package_view_imports_the_other_checkout(tmp_path):
    spec = importlib.util.spec_from_file_location("compile_speed", BENCH)
    compile_speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compile_speed)
    view = compile_speed.package_view(ROOT, tmp_path / "view")
    assert compile_speed._subpackages(ROOT) == (
        "isa", "sim", "hw", "compiler", "tuner", "driver", "runtime",
    )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-P", "-c", "import pyvta.compiler as c; print(c.__file__)"],
        env={"PYTHONPATH": str(view), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out.startswith(str(view)), out


def test_compile_speed_against_a_revision_compares_builds_and_kernels():
    head = _git_head()
    p = subprocess.run(
        [sys.executable, "-P", str(BENCH), "--before", head, "--layers", "C8", "--configs", "1"]
        + ["--models", "none", "--kernels", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    text = p.stdout
    assert re.search(r"round 0 +C8 \(1 builds\): .*before / this \d+\.\d+x", text), text
    assert re.search(r"C8 config +\d+: before .* outputs equal", text), text
    assert re.search(r"kernels: before / this \d+\.\d+x geomean of 1", text), text
    worktrees = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert "compile_speed_" not in worktrees  # removed after the run
