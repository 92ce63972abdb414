"""``benchmarks/cpu_int8.py`` runs end to end (a small input, one round): its compiled
``cpu-int8`` run must equal its numpy run bit for bit, which it checks itself. The numpy run
had broken once the float stem conv became a compiled ``cpu_conv2d`` (numpy has no kernel for
it; it now runs compiled there too)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "cpu_int8.py"


def test_the_int8_benchmark_runs_its_compiled_and_numpy_nodes(capsys):
    spec = importlib.util.spec_from_file_location("cpu_int8", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    med = mod.bench_model("resnet18", 32, rounds=1, threads=1, seed=0)
    assert set(med) == {
        "pyvta cpu-int8",
        "onnxruntime int8 QDQ",
        "pyvta cpu-int8 numpy",
        "onnxruntime float",
    }
    assert all(ms > 0 for ms in med.values())
    assert "compiled == numpy bit for bit" in capsys.readouterr().out
