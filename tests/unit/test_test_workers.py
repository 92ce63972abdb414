"""How ``make test`` spreads the tests over its two pytest-xdist workers (tests/conftest.py):
the hardware tests all on one, the rest wherever a worker is free."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
RECORD = """
import os
import time
from pathlib import Path

def test_{n}():
    Path("{where}").joinpath("{name}_{n}").write_text(os.environ["PYTEST_XDIST_WORKER"])
    time.sleep(0.05)  # long enough that a worker free sooner takes the next ungrouped test
"""


def test_hardware_tests_share_one_worker(tmp_path):
    """A copy of the suite's root conftest over 2 hardware test files and 2 others, run as
    ``make test`` runs (``-n 2 --dist loadgroup``): each test writes the worker it ran on;
    the hardware tests' is one worker, and the run used both. (The others go wherever a worker
    is free: on a loaded machine one worker can take them all while the other runs the
    hardware group, as in one ``make test`` run.)"""
    pytest.importorskip("xdist")
    suite = tmp_path / "suite"
    where = tmp_path / "ran"
    where.mkdir()
    (suite / "tests" / "hw").mkdir(parents=True)
    (suite / "tests" / "unit").mkdir()
    shutil.copy(ROOT_CONFTEST, suite / "tests" / "conftest.py")
    files = {"hw/test_a": "hw_a", "hw/test_b": "hw_b", "unit/test_c": "c", "unit/test_d": "d"}
    for path, name in files.items():
        body = "".join(RECORD.format(n=n, where=where, name=name) for n in range(6))
        (suite / "tests" / f"{path}.py").write_text(body)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "tests"],
        cwd=suite, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    print(done.stdout[-2000:], done.stderr[-2000:])
    assert done.returncode == 0
    ran = {p.name: p.read_text() for p in where.iterdir()}
    assert len(ran) == 24
    hw = {w for n, w in ran.items() if n.startswith("hw_")}
    rest = {w for n, w in ran.items() if not n.startswith("hw_")}
    print(f"hardware tests ran on {sorted(hw)}, the others on {sorted(rest)}")
    assert len(hw) == 1
    assert hw | rest == {"gw0", "gw1"}
