"""Running a compiled model loads the runtime, not the compiler: a fresh interpreter loads an
artifact of each kind (``cpu`` and ``cpu-int8`` carrying their code for this CPU, ``pyvta
compile --cpu-target host``; ``vta`` on the simulator device) and runs it. Its ``sys.modules``
then holds no ``pyvta.compiler`` / ``pyvta.tuner`` module, and its outputs are the bits of the
same models run in this process (the JIT's kernels; the simulator)."""

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from pyvta import driver
from pyvta.compiler.backend.llvm.target import CpuTarget
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.cpu_cross import cross_compile_cpu
from pyvta.compiler.graph.zoo import float_model
from pyvta.runtime.compiled_model import run_model

SEED = 38
KINDS = ("cpu", "cpu-int8", "vta")

RUN = """
import json, sys
import numpy as np
from pyvta import driver
from pyvta.runtime.compiled_model import CompiledModel, run_model
folder = sys.argv[1]
x = np.load(folder + "/x.npy")
out = {}
for kind in sys.argv[2:]:
    cm = CompiledModel.load(f"{folder}/{kind}.npz")
    device = driver.open("sim", config=cm.hw) if cm.kernels else None
    (out[kind],), _ = run_model(cm, x, device=device)
np.savez(folder + "/out.npz", **out)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pyvta"))))
"""


def small_net(rng) -> onnx.ModelProto:
    """conv 3x3 (3 -> 16) + relu, max pool 2x2, conv 3x3 (16 -> 16) + relu, global average
    pool, flatten, dense (16 -> 10): on 1 x 3 x 16 x 16 float32."""

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["output"], transB=1),
    ]
    inits = {"w1": w(16, 3, 3, 3), "b1": w(16), "w2": w(16, 16, 3, 3), "b2": w(16)}
    inits |= {"w3": w(10, 16), "b3": w(10)}
    return float_model(nodes, {"input": (1, 3, 16, 16)}, {"output": (1, 10)}, inits)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The three artifacts, the input and each model's output run in this process."""
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    folder = tmp_path_factory.mktemp("runtime-loads")
    onnx.save(small_net(rng), folder / "net.onnx")
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(folder / "x.npy", x)
    expected = {}
    for kind in KINDS:
        cm = compile_model(folder / "net.onnx", kind)
        device = driver.open("sim", config=cm.hw) if cm.kernels else None
        (expected[kind],), _ = run_model(cm, x, device=device)
        if not cm.kernels:  # the host CPU's kernels as machine code in the artifact
            cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.host(1))
            assert cm.cpu_code is not None and cm.cpu_code.runs_here()
        cm.save(folder / f"{kind}.npz")
    return folder, expected


def test_running_an_artifact_loads_no_compiler(artifacts):
    folder, expected = artifacts
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(folder), *KINDS],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    print(f"{len(loaded)} pyvta modules loaded by loading and running {', '.join(KINDS)}")
    assert any(m.startswith("pyvta.runtime.") for m in loaded), loaded
    heavy = [m for m in loaded if m.startswith(("pyvta.compiler", "pyvta.tuner"))]
    assert not heavy, heavy
    with np.load(folder / "out.npz") as out:
        for kind in KINDS:
            assert np.array_equal(out[kind], expected[kind]), kind


def test_x86_code_runs_only_on_a_cpu_with_its_features(artifacts):
    """An x86 shared object records the features it was generated with; a CPU without one of
    them does not run it (an AVX-512 kernel faults on an AVX2 host): it is refused here."""
    from pyvta.runtime.compiled_model import CompiledModel

    folder, _ = artifacts
    code = CompiledModel.load(folder / "cpu.npz").cpu_code
    assert code.features and code.runs_here()
    code.features += ",+no-such-feature"
    assert not code.runs_here()


def test_compile_for_the_host_cpu_on_the_command_line(artifacts, capsys):
    """``pyvta compile --target cpu --cpu-target host``: the artifact carries this machine's CPU
    kernels, which run here from the shared object with the JIT's bits."""
    from pyvta.cli import main
    from pyvta.runtime.compiled_model import CompiledModel

    folder, expected = artifacts
    out = folder / "cli-cpu.npz"
    argv = ["compile", str(folder / "net.onnx"), "--target", "cpu", "--cpu-target", "host"]
    assert main([*argv, "-o", str(out)]) == 0
    assert "CPU kernels for" in capsys.readouterr().out
    cm = CompiledModel.load(out)
    assert cm.cpu_code.runs_here()
    (y,), _ = run_model(cm, np.load(folder / "x.npy"))
    assert all(type(m).__name__ == "SharedKernel" for m in cm.cpu_backend().modules.values())
    assert np.array_equal(y, expected["cpu"])
