"""A CPU target's ``features`` are data that reach code generation: a second feature set is
``CpuTarget("cpu-avx2", features="avx2")`` (one file under ``compiler/targets/``), and its
kernels are AVX2 code on any host that runs AVX2, an AVX-512 one included; the schedules its
pipeline picks are sized for 256-bit vectors. Run on this host and with
``PYVTA_CPU_FEATURES=avx2`` (the default target then follows the variable; the variant keeps
its own level either way)."""

import llvmlite.binding as llvm
import numpy as np
import onnx
import pytest
from onnx import helper

from pyvta import host_cpu
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import float_model
from pyvta.compiler.targets import get_target
from pyvta.compiler.targets.cpu import CpuTarget
from pyvta.compiler.targets.cpu.kernels import ConvWorkload, default_conv_schedule
from pyvta.compiler.targets.jit import host_backend
from pyvta.runtime.executor import Executor
from pyvta.runtime.ir import HOST

SEED = 3838


def _net(rng) -> onnx.ModelProto:
    """conv 3x3 (8 -> 32) + relu, conv 3x3 (32 -> 32), global average pool, dense (32 -> 10)."""

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["output"], transB=1),
    ]
    inits = {"w1": w(32, 8, 3, 3), "b1": w(32), "w2": w(32, 32, 3, 3), "b2": w(32)}
    inits |= {"w3": w(10, 32), "b3": w(10)}
    return float_model(nodes, {"input": (1, 8, 12, 12)}, {"output": (1, 10)}, inits)


def _assembly(module) -> str:
    """The machine code of a built kernel, as assembly for the target it was built for."""
    machine = module.target.target_machine()
    return machine.emit_assembly(llvm.parse_assembly(module.jit.ir_text))


@pytest.fixture(params=["host", "avx2"], ids=["host", "PYVTA_CPU_FEATURES=avx2"])
def level(request, monkeypatch):
    monkeypatch.setenv(host_cpu.FEATURES_ENV, request.param)
    return request.param


def test_a_cpu_targets_features_reach_code_generation(level, tmp_path):
    if "avx2" not in host_cpu.levels_met(host_cpu.host("host")[2]):
        pytest.skip("needs an x86 host that runs AVX2")
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}, {host_cpu.FEATURES_ENV}={level}")
    path = tmp_path / "net.onnx"
    onnx.save(_net(rng), path)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    avx2 = CpuTarget("cpu-avx2", features="avx2")
    outs, zmm = {}, {}
    for spec in (get_target("cpu"), avx2):
        cm = compile_model(str(path), spec)
        backend = host_backend(cm.graph, spec)
        assert backend.modules, "no compiled CPU kernel"
        bits = {m.target.vector_bits for m in backend.modules.values()}
        zmm[spec.name] = sum("zmm" in _assembly(m) for m in backend.modules.values())
        (outs[spec.name],), _ = Executor(cm.graph, backends={HOST: backend}).run({"input": x})
        if spec is avx2:
            assert bits == {256}, bits
            for n in cm.graph.nodes:  # the untuned schedules are sized for AVX2 too
                if n.op == "cpu_conv2d" and n.attrs["schedule"]["template"] != "winograd":
                    from pyvta.compiler.targets.cpu.kernels import node_workload

                    wl = node_workload(n, cm.graph.values[n.inputs[0]].shape)
                    assert isinstance(wl, ConvWorkload)
                    assert n.attrs["schedule"] == default_conv_schedule(wl, "avx2"), n.name
    print(f"kernels using zmm registers: {zmm}")
    assert zmm["cpu-avx2"] == 0
    host_is_avx512 = host_cpu.host(None)[2].get("avx512f", False)
    assert (zmm["cpu"] > 0) == host_is_avx512  # the default target follows the host (or env)
    np.testing.assert_allclose(outs["cpu-avx2"], outs["cpu"], rtol=1e-4, atol=1e-5)
