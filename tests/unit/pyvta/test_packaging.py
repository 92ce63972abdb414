"""pyvta installs as one package: ``pyvta.isa``, ``pyvta.sim``, ... and nothing else at the top of
site-packages, from an editable install (this test run's) and from a regular ``pip install .``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from pyvta.testing.checkout import NotACheckout, checkout_files

ROOT = Path(__file__).resolve().parents[3]
SUBPACKAGES = ("isa", "sim", "hw", "compiler", "tuner", "driver", "runtime")


def _env() -> dict[str, str]:
    """This environment without PYTHONPATH: only what is installed can be imported."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _run(cmd: list, cwd: Path | None = None, timeout: float = 300) -> str:
    """Run ``cmd`` in the environment of ``_env``; its output, after checking it succeeded."""
    out = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, f"{cmd[:4]} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def _python(python: str | Path, code: str, cwd: Path) -> dict:
    """The JSON that ``code`` prints last, run by ``python`` in ``cwd``."""
    return json.loads(_run([python, "-c", textwrap.dedent(code)], cwd).strip().splitlines()[-1])


IMPORTS = f"""
    import importlib, importlib.util, json
    names = {SUBPACKAGES!r}
    files = {{n: importlib.import_module("pyvta." + n).__file__ for n in names}}
    bare = [n for n in names if importlib.util.find_spec(n) is not None]
    print(json.dumps({{"files": files, "bare": bare}}))
"""


def _check_imports(found: dict) -> None:
    assert found["bare"] == [], f"importable without the pyvta prefix: {found['bare']}"
    for name, file in found["files"].items():
        assert Path(file).parts[-2:] == (name, "__init__.py"), (name, file)


def test_one_namespace_from_outside_the_checkout(tmp_path):
    found = _python(sys.executable, IMPORTS, cwd=tmp_path)
    _check_imports(found)
    print("imported from", sorted({str(Path(f).parents[1]) for f in found["files"].values()}))


def _tracked_tree(dest: Path) -> list[str]:
    """Copy the checkout's files (tracked, and untracked ones git does not ignore) to ``dest``."""
    try:
        files = checkout_files(ROOT)
    except NotACheckout as exc:
        pytest.skip(f"needs a git checkout to copy the project from: {exc}")
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)
    return files


def test_regular_install_runs_the_demo_from_another_directory(tmp_path):
    """``pip install .`` (a wheel, not editable) into a scratch venv, then ``pyvta demo gemm``
    elsewhere; the wheel holds every module of the six folders under pyvta/ and nothing else."""
    src, env_dir, elsewhere = tmp_path / "src", tmp_path / "venv", tmp_path / "elsewhere"
    for d in (src, elsewhere):
        d.mkdir()
    files = _tracked_tree(src)
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", src], timeout=900)

    found = _python(python, IMPORTS, cwd=elsewhere)
    _check_imports(found)
    for file in found["files"].values():
        assert Path(file).is_relative_to(env_dir), f"{file} is not the installed copy"

    record = _python(
        python,
        """
        import json
        from importlib.metadata import distribution
        print(json.dumps([str(f) for f in distribution("pyvta").files]))
        """,
        cwd=elsewhere,
    )
    top = {Path(f).parts[0] for f in record if not f.startswith("..")}
    assert top == {"pyvta", "pyvta-0.1.0.dist-info"}, top
    # pyvta/x.py installs as itself, isa/x.py as pyvta/isa/x.py (the pretuned logs, their
    # in-network choices and the RTL device's C++ harness too)
    expected = {f for f in files if f.startswith("pyvta/") and f.endswith(".py")}
    expected |= {
        f"pyvta/{f}"
        for f in files
        if f.split("/")[0] in SUBPACKAGES and f.endswith((".py", ".jsonl", ".network.json", ".cpp"))
    }
    missing = sorted(expected - set(record))
    assert not missing, f"not in the installed package: {missing}"

    demo = _run([env_dir / "bin" / "pyvta", "demo", "gemm", "--m", "64", "--k", "32"], elsewhere)
    assert "EXACT MATCH" in demo, demo
