"""``benchmarks/vta_generality.py`` and ``benchmarks/vta_depthwise.py`` run end to end on small
inputs: both had stopped running when ``lower_kernels`` left ``CompiledModel`` (and an
accelerator launch's workload moved into its kernel's info). Each checks its outputs bit for
bit against the golden model itself and returns non-zero if they differ."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    "name, argv, expect",
    [
        (
            "vta_generality",
            ["--count", "1"],
            "bit-exact on the simulator vs the golden model: 1 of 1",
        ),
        ("vta_depthwise", ["--size", "32", "--seed", "0"], "SimDevice vs golden model: True"),
    ],
)
def test_the_vta_benchmark_runs_bit_exact(name, argv, expect, capsys):
    assert _load(name).main(argv) == 0
    assert expect in capsys.readouterr().out
