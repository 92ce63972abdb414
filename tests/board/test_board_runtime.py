"""What a board runs, on the board's Python: load an artifact, run it on a device with the CPU
layers in numpy; nothing heavy is imported, and a damaged artifact is refused."""

import sys

import numpy as np
import pytest

from pyvta import driver
from pyvta.compiler.graph.compiled_model import ArtifactError, CompiledModel, run_model

HOST_ONLY = ("onnx", "onnxruntime", "llvmlite", "amaranth", "xgboost", "cocotb", "sklearn")


def test_versions_are_the_boards():
    import numpy

    print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}")
    assert sys.version_info[:2] == (3, 10), "make board-test runs these under Python 3.10"
    assert numpy.__version__.startswith("1.")


def test_host_only_packages_are_absent_and_unimported(fixtures):
    CompiledModel.load(fixtures / "vta.npz")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in HOST_ONLY)
    assert not loaded, f"the board runtime imported {loaded}"
    for name in HOST_ONLY:
        with pytest.raises(ImportError):
            __import__(name)


def test_vta_artifact_on_the_simulator_equals_the_host(fixtures):
    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta.npz")
    vta = cm.accelerator(driver.open("sim", config=cm.hw))
    (y,), table = run_model(cm, expected["x"], backends={"vta": vta})
    assert np.array_equal(y, expected["vta"])
    assert np.array_equal(y, expected["golden"])
    assert sum(r.cycles or 0 for r in table.rows) > 0


def test_float_cpu_layers_in_numpy(fixtures):
    """The float CPU layers of a vta artifact (first conv, pooling, dense) run in numpy here;
    an artifact compiled for the cpu target (compiled kernels) is refused with a clear error."""
    from pyvta.compiler.graph.ir import GraphError

    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta.npz")
    cpu_nodes = {n.op for n in cm.graph.nodes if n.target == "cpu"}
    assert {"conv2d", "max_pool", "dense"} <= cpu_nodes, cpu_nodes
    (y,), _ = run_model(cm, expected["x"])
    assert np.array_equal(y, expected["golden"])
    with pytest.raises(GraphError, match="need llvmlite"):
        run_model(CompiledModel.load(fixtures / "cpu.npz"), expected["x"])


def test_damaged_artifact_is_refused(fixtures, tmp_path):
    data = (fixtures / "vta.npz").read_bytes()
    bad = tmp_path / "cut.npz"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(ArtifactError):
        CompiledModel.load(bad)


def test_pynq_device_on_the_model_board_equals_the_host(fixtures):
    """PynqDevice and the launch routine, as the board runs them, against the model board."""
    from pyvta.testing.board_model import ModelBoard

    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta.npz")
    board = ModelBoard()
    dev = driver.open("pynq", bitstream=fixtures / "bitstream", pynq=board.pynq, config=cm.hw)
    (y,), _ = run_model(cm, expected["x"], device=dev)
    assert np.array_equal(y, expected["vta"])


def test_the_cli_runs_an_artifact_on_the_board_python(fixtures, tmp_path):
    import subprocess

    expected = np.load(fixtures / "expected.npz")
    np.save(tmp_path / "x.npy", expected["x"])
    out = tmp_path / "y.npy"
    cmd = [sys.executable, "-m", "pyvta.cli", "run", str(fixtures / "vta.npz"), "--target"]
    cmd += ["vta", "--device", "sim", "--input", str(tmp_path / "x.npy"), "--save-output", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "kernels onto sim" in proc.stdout
    assert np.array_equal(np.load(out), expected["vta"])
