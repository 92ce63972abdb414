"""The "cpu-int8" target's compiled int8 kernels: every compiled node bit-exact with the numpy
reference (``run_cpu_op``, the accelerator's contract), chosen by the executor, built by the
pipeline."""

from __future__ import annotations

import onnx
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.targets.cpu_int8 import kernels as ck
from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels, compiled_int8
from pyvta.runtime.cpu_llvm import numpy_only
from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.executor import Executor


class NumpyNodes:
    def run(self, node, args):
        return run_cpu_op(node.op, args, node.attrs)


class CheckedNodes:
    """Runs ``backend`` and compares each node it compiled with ``run_cpu_op`` on the same
    inputs."""

    def __init__(self, backend: CpuInt8Kernels) -> None:
        self.backend, self.checked = backend, []

    def run(self, node, args):
        out = self.backend.run(node, args)
        if node.name in self.backend.kernels:
            ref = run_cpu_op(node.op, args, node.attrs)
            assert out.dtype == ref.dtype and (out == ref).all(), node.name
            self.checked.append(node.name)
        return out


@pytest.fixture(scope="module")
def resnet_int8(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=2), path)
    return compile_model(path, "cpu-int8")


def test_resnet_every_compiled_node_is_bit_exact(resnet_int8):
    g = resnet_int8.graph
    x = zoo.sample_inputs(1, 32, seed=3)[0]
    backend = CpuInt8Kernels(g)
    qconvs = [n.name for n in g.nodes if n.op == "qconv2d"]
    assert len(qconvs) == 19 and set(backend.kernels) == set(qconvs)
    checked = CheckedNodes(backend)
    got = Executor(g, backends={"cpu": checked}).run({"input": x})[0]
    assert sorted(checked.checked) == sorted(qconvs)
    want = Executor(g, backends={"cpu": NumpyNodes()}).run({"input": x})[0]
    assert (got[0] == want[0]).all()


def test_executor_and_pipeline_use_the_int8_kernels(resnet_int8, monkeypatch):
    g = resnet_int8.graph
    ex = Executor(g)
    assert isinstance(ex.backends["cpu"], CpuInt8Kernels)
    assert len(ex.backends["cpu"].kernels) == 19
    # compile_model built them: another backend of the graph lowers nothing in this process ...
    from pyvta import compiler

    def no_build(*args, **kwargs):
        raise AssertionError("a kernel was built again")

    with monkeypatch.context() as m:
        m.setattr(compiler, "build", no_build)
        assert len(CpuInt8Kernels(g).kernels) == 19
    # ... and, lowered again, generates no code: the kernels are in the compiler's caches
    monkeypatch.setattr(ck, "_MODULES", {})
    sources = {k.module.from_cache for k in CpuInt8Kernels(g).kernels.values()}
    assert sources and "none" not in sources


def test_board_runtime_falls_back_to_numpy(resnet_int8):
    with numpy_only():
        backend = CpuInt8Kernels(resnet_int8.graph)
    assert backend.kernels == {}


def _model(tmp_path, nodes, inits, shape_in, shape_out):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape_in)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape_out)],
        inits,
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _check_single(path, shape_in, rng, expect_compiled):
    cm = compile_model(path, "cpu-int8", keep_float=())
    backend = CpuInt8Kernels(cm.graph)
    assert sorted(backend.kernels) == sorted(expect_compiled)
    checked = CheckedNodes(backend)
    for _ in range(3):
        x = rng.standard_normal(shape_in).astype("float32")
        Executor(cm.graph, backends={"cpu": checked}).run({"input": x})
    assert len(checked.checked) == 3 * len(expect_compiled)


def test_odd_shaped_conv_and_grouped_fallback(tmp_path, rng):
    """7 -> 12 channels, 3x5 kernel, stride 2x1, asymmetric pads (compiled, scalar tiles); a
    grouped conv after it stays on numpy."""
    from onnx import helper, numpy_helper

    w1 = rng.standard_normal((12, 7, 3, 5)).astype("float32") * 0.2
    w2 = rng.standard_normal((12, 4, 3, 3)).astype("float32") * 0.2
    inits = [
        numpy_helper.from_array(w1, "w1"),
        numpy_helper.from_array(rng.standard_normal(12).astype("float32"), "b1"),
        numpy_helper.from_array(w2, "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], "conv_a", strides=[2, 1],
                         pads=[1, 2, 0, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu_a"),
        helper.make_node("Conv", ["r1", "w2"], ["out"], "conv_b", group=3, pads=[1, 1, 1, 1]),
    ]  # fmt: skip
    path = _model(tmp_path, nodes, inits, [1, 7, 11, 9], None)
    _check_single(path, (1, 7, 11, 9), rng, ["conv_a"])


def test_dense_with_residual(tmp_path, rng):
    """A qdense of 37 -> 20 features plus a residual add (one compiled 1x1 kernel)."""
    from onnx import helper, numpy_helper

    inits = [
        numpy_helper.from_array(rng.standard_normal((37, 20)).astype("float32") * 0.3, "w"),
        numpy_helper.from_array(rng.standard_normal(20).astype("float32"), "b"),
        numpy_helper.from_array(rng.standard_normal((37, 20)).astype("float32") * 0.3, "w2"),
        numpy_helper.from_array(rng.standard_normal(20).astype("float32"), "b2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["input", "w", "b"], ["d1"], "fc_a"),
        helper.make_node("Gemm", ["input", "w2", "b2"], ["d2"], "fc_b"),
        helper.make_node("Add", ["d1", "d2"], ["out"], "add"),
    ]
    path = _model(tmp_path, nodes, inits, [1, 37], None)
    cm = compile_model(path, "cpu-int8", keep_float=())
    dense = [n for n in cm.graph.nodes if n.op == "qdense"]
    assert dense and all(compiled_int8(n, cm.graph) for n in dense)
    _check_single(path, (1, 37), rng, [n.name for n in dense])
