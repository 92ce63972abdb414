"""The "cpu-int8" target's compiled int8 kernels: every compiled node bit-exact with the numpy
reference (``run_cpu_op``, the accelerator's contract), chosen by the executor, built by the
pipeline."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.ops.cpu.int8 import DOTS, sum_dot_form
from pyvta.compiler.targets.cpu_int8 import kernels as ck
from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels
from pyvta.runtime.cpu_llvm import numpy_only
from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.executor import Executor
from pyvta.runtime.int8_kernels import INT8_OPS, compiled_int8


class NumpyNodes:
    """The int8 nodes on numpy (``run_cpu_op``), the float layers on ``fallback`` (the graph's
    compiled float kernels) or numpy."""

    def __init__(self, fallback=None) -> None:
        self.fallback = fallback

    def run(self, node, args):
        if self.fallback is not None and node.op not in INT8_OPS:
            return self.fallback.run(node, args)
        return run_cpu_op(node.op, args, node.attrs)


class CheckedNodes:
    """Runs ``backend`` and compares each node it compiled with ``run_cpu_op`` on the same
    inputs."""

    def __init__(self, backend: CpuInt8Kernels) -> None:
        self.backend, self.checked = backend, []

    def run(self, node, args):
        out = self.backend.run(node, args)
        if node.name in self.backend.kernels or node.name in self.backend.scales:
            ref = run_cpu_op(node.op, args, node.attrs)
            assert out.dtype == ref.dtype and (out == ref).all(), node.name
            self.checked.append(node.name)
        return out


@pytest.fixture(scope="module")
def resnet_int8(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=2), path)
    return compile_model(path, "cpu-int8")


def test_an_int8_inference_on_the_pool_binds_its_caller_to_a_cpu(resnet_int8):
    """The int8 backend holds the same scope as the float one: on 2 threads (a plan binding
    launches of 2) the calling thread runs each node bound to the plan's CPU for it, on 1 it
    keeps its CPUs."""
    import dataclasses
    import os

    from pyvta.compiler.backend.llvm import runtime

    allowed = os.sched_getaffinity(0)
    plan = runtime.cpu_plan(allowed)
    if plan.caller is None:
        pytest.skip(f"binding threads to CPUs needs 2 CPUs or more; this process has {allowed}")
    x = zoo.sample_inputs(1, 32, seed=3)[0]
    prev = runtime.set_cpu_plan(dataclasses.replace(plan, min_threads=2))
    try:
        for threads, want in ((2, {plan.caller}), (1, allowed)):
            backend = CpuInt8Kernels(resnet_int8.graph, num_threads=threads)
            seen: list[set] = []

            def probe(node, args, seen=seen, real=backend.run):
                seen.append(os.sched_getaffinity(0))
                return real(node, args)

            backend.run = probe
            Executor(resnet_int8.graph, None, {"cpu": backend}).run({"input": x})
            assert seen and all(s == want for s in seen)
            assert os.sched_getaffinity(0) == allowed
    finally:
        runtime.set_cpu_plan(prev)


def test_resnet_every_compiled_node_is_bit_exact(resnet_int8):
    g = resnet_int8.graph
    x = zoo.sample_inputs(1, 32, seed=3)[0]
    backend = CpuInt8Kernels(g)
    qconvs = [n.name for n in g.nodes if n.op == "qconv2d"]
    assert len(qconvs) == 19 and set(backend.kernels) == set(qconvs)
    # the (de)quantize between the float and int8 layers: compiled, reading / writing the float
    # layers' blocked layout themselves (fuse_int8_borders: no layout_transform beside them)
    scales = [n for n in g.nodes if n.op in ("quantize", "dequantize")]
    assert set(backend.scales) == {n.name for n in scales}
    assert any(n.attrs.get("src_block") for n in scales)
    assert any(n.attrs.get("dst_block") for n in scales)
    checked = CheckedNodes(backend)
    got = Executor(g, backends={"cpu": checked}).run({"input": x})[0]
    assert sorted(checked.checked) == sorted(qconvs + list(backend.scales))
    want = Executor(g, backends={"cpu": NumpyNodes(backend.fallback)}).run({"input": x})[0]
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
    # ... and, in a fresh process, neither lowers nor generates code: the kernels' lowered
    # functions and code are in the disk cache (``compiler.targets.cpu.builds``)
    from pyvta.compiler.targets.cpu import builds

    def no_lower(*args, **kwargs):
        raise AssertionError("a kernel was lowered again")

    monkeypatch.setattr(builds, "_MODULES", {})
    with monkeypatch.context() as m:
        m.setattr(compiler, "lower", no_lower)
        sources = {k.module.from_cache for k in CpuInt8Kernels(g).kernels.values()}
    assert sources and "none" not in sources


def test_board_runtime_falls_back_to_numpy(resnet_int8):
    """Without llvmlite the int8 nodes run numpy; the float layers of a cpu-int8 graph (its
    first conv, pools, classifier) are compiled float kernels, which need llvmlite (a board
    runs vta artifacts, whose CPU layers are numpy)."""
    from pyvta.compiler.targets.cpu.kernels import CpuKernels
    from pyvta.runtime.ir import GraphError

    with numpy_only():
        backend = CpuInt8Kernels(resnet_int8.graph, fallback=NumpyNodes())
        with pytest.raises(GraphError, match="need llvmlite"):
            CpuKernels(resnet_int8.graph)
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
    assert len(checked.checked) == 3 * len(expect_compiled) + 3 * len(backend.scales)


def test_odd_shaped_grouped_and_dilated_convs(tmp_path, rng):
    """7 -> 12 channels, 3x5 kernel, stride 2x1, asymmetric pads; a grouped conv (3 groups of 4
    channels, each group's outputs padded to 8 on the template); a dilated conv to 13 channels (padded to 16 in the kernel) and a 13 -> 13 conv
    with a residual add of 13 channels: every one compiled, bit-exact."""
    from onnx import helper, numpy_helper

    def arr(shape, name, scale=0.2):
        return numpy_helper.from_array(rng.standard_normal(shape).astype("float32") * scale, name)

    inits = [
        arr((12, 7, 3, 5), "w1"), arr((12,), "b1", 1.0), arr((12, 4, 3, 3), "w2"),
        arr((13, 12, 3, 3), "w3"), arr((13, 13, 1, 1), "w4"),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], "conv_a", strides=[2, 1],
                         pads=[1, 2, 0, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu_a"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], "conv_b", group=3, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], "conv_c", dilations=[2, 2],
                         pads=[2, 2, 2, 2]),
        helper.make_node("Relu", ["c3"], ["r3"], "relu_c"),
        helper.make_node("Conv", ["r3", "w4"], ["c4"], "conv_d"),
        helper.make_node("Add", ["c4", "r3"], ["out"], "add_d"),
    ]  # fmt: skip
    path = _model(tmp_path, nodes, inits, [1, 7, 11, 9], None)
    cm = compile_model(path, "cpu-int8", keep_float=())
    fused = next(n for n in cm.graph.nodes if n.name == "conv_d")
    assert fused.op == "qconv2d" and len(fused.inputs) == 4  # the add is its residual
    grouped = next(n for n in cm.graph.nodes if n.name == "conv_b")
    assert not any(ck.on_depthwise_kernel(grouped, cm.graph, dot) for dot in DOTS)
    _check_single(path, (1, 7, 11, 9), rng, ["conv_a", "conv_b", "conv_c", "conv_d"])


def test_depthwise_convs(tmp_path, rng):
    """Depthwise int8 convs (13 groups: ``on_depthwise_kernel``): stride 2 with asymmetric
    pads, then dilation 2 with a residual add; compiled, bit-exact."""
    from onnx import helper, numpy_helper

    inits = [
        numpy_helper.from_array(rng.standard_normal((13, 1, 3, 3)).astype("float32"), "w1"),
        numpy_helper.from_array(rng.standard_normal((13, 1, 3, 3)).astype("float32"), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["c1"], "dw_a", group=13, strides=[2, 2],
                         pads=[0, 0, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu_a"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], "dw_b", group=13, dilations=[2, 2],
                         pads=[2, 2, 2, 2]),
        helper.make_node("Add", ["c2", "r1"], ["out"], "add_b"),
    ]  # fmt: skip
    path = _model(tmp_path, nodes, inits, [1, 13, 15, 15], None)
    g = compile_model(path, "cpu-int8", keep_float=()).graph
    dws = [n for n in g.nodes if n.op == "qconv2d"]
    assert len(dws) == 2 and all(ck.on_depthwise_kernel(n, g, dot) for n in dws for dot in DOTS)
    _check_single(path, (1, 13, 15, 15), rng, ["dw_a", "dw_b"])


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


def test_unsigned_form_after_a_relu(tmp_path, rng):
    """Without VNNI (``PYVTA_CPU_FEATURES=avx2``) a conv whose input the graph proves
    non-negative (a ReLU, a max pool of one) takes the ``pmaddubsw`` form (``pmaddubsw_x2``
    where its weights are small enough: conv_d's), the others ``pmaddwd``; every one
    bit-exact."""
    from onnx import helper, numpy_helper

    from pyvta.compiler.backend.llvm.target import CpuFeatureError, CpuTarget

    try:
        CpuTarget.host(2, "avx2")
    except CpuFeatureError:
        pytest.skip("needs a CPU that runs the avx2 feature level")

    def arr(shape, name):
        return numpy_helper.from_array(rng.standard_normal(shape).astype("float32") * 0.3, name)

    inits = [arr((16, 8, 3, 3), "w1"), arr((24, 16, 3, 3), "w2"), arr((16, 24, 1, 1), "w3"),
             arr((16, 16, 3, 3), "w4")]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["c1"], "conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu_a"),
        helper.make_node("MaxPool", ["r1"], ["p1"], "pool_a", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], "conv_b", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], "conv_c"),
        helper.make_node("Relu", ["c3"], ["r3"], "relu_c"),
        helper.make_node("Conv", ["r3", "w4"], ["out"], "conv_d", dilations=[2, 2],
                         pads=[2, 2, 2, 2]),
    ]  # fmt: skip
    path = _model(tmp_path, nodes, inits, [2, 8, 14, 14], None)
    g = compile_model(path, "cpu-int8", keep_float=()).graph
    backend = CpuInt8Kernels(g, num_threads=2, features="avx2")
    dots = {name: k.knobs.dot for name, k in backend.kernels.items()}
    nodes = {n.name: n for n in g.nodes}

    def unsigned(name):  # two lanes per step where the weights are proven small enough
        return sum_dot_form("pmaddubsw", g.constants[nodes[name].inputs[1]])

    assert dots == {
        "conv_a": "pmaddwd", "conv_b": unsigned("conv_b"), "conv_c": "pmaddwd",
        "conv_d": unsigned("conv_d"),
    }  # fmt: skip
    assert "pmaddubsw_x2" in dots.values()
    checked = CheckedNodes(backend)
    for _ in range(3):
        x = rng.standard_normal((2, 8, 14, 14)).astype("float32")
        Executor(g, backends={"cpu": checked}).run({"input": x})
    assert {"conv_a", "conv_b", "conv_c", "conv_d"} <= set(checked.checked)


@pytest.mark.parametrize(("scale_b", "requantized"), [(2.0, []), (0.5, ["rb"]), (16.0, ["ra"])])
def test_concat_between_int8_layers_stays_int8(tmp_path, rng, monkeypatch, scale_b, requantized):
    """Two int8 convs (13 and 7 channels, batch 4) concatenated into a third: the quantize of
    the float concat becomes a ``concat`` of the int8 values (fuse_borders.int8_concat), a
    part at another scale than the concat's (``scale_b``: conv_b's weights that much larger;
    ``requantized``: which part's calibrated scale then differs) requantized on its own; the
    output bit-exact with the float concat's graph."""
    from onnx import helper, numpy_helper

    from pyvta.compiler.targets.cpu_int8 import fuse_borders

    def arr(shape, name, scale=0.3):
        return numpy_helper.from_array(rng.standard_normal(shape).astype("float32") * scale, name)

    inits = [arr((13, 5, 3, 3), "wa"), arr((7, 5, 1, 1), "wb", 0.3 * scale_b),
             arr((11, 20, 3, 3), "wc")]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["input", "wa"], ["ca"], "conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["ca"], ["ra"], "relu_a"),
        helper.make_node("Conv", ["input", "wb"], ["cb"], "conv_b"),
        helper.make_node("Relu", ["cb"], ["rb"], "relu_b"),
        helper.make_node("Concat", ["ra", "rb"], ["cat"], "cat", axis=1),
        helper.make_node("Conv", ["cat", "wc"], ["out"], "conv_c", pads=[1, 1, 1, 1]),
    ]  # fmt: skip
    path = _model(tmp_path, nodes, inits, [4, 5, 9, 9], None)
    g = compile_model(path, "cpu-int8", keep_float=()).graph
    cat = next(n for n in g.nodes if n.name == "cat")
    assert cat.op == "concat" and all(g.values[v].dtype == "int8" for v in cat.inputs)
    producers = g.producers()
    assert [v[:2] for v in cat.inputs if producers[v].op == "quantize"] == requantized
    assert not any(n.op == "cpu_concat" for n in g.nodes)
    with monkeypatch.context() as m:
        m.setattr(fuse_borders, "int8_concat", lambda graph: graph)
        g_float = compile_model(path, "cpu-int8", keep_float=()).graph
    assert any(n.op == "cpu_concat" for n in g_float.nodes)
    for _ in range(2):
        x = rng.standard_normal((4, 5, 9, 9)).astype("float32")
        got = Executor(g).run({"input": x})[0][0]
        want = Executor(g_float).run({"input": x})[0][0]
        assert (got == want).all()


def test_small_nodes_run_on_one_thread(tmp_path, rng):
    """A conv of fewer than MIN_PARALLEL_MACS multiply-adds (a 1x1 32 -> 8 on 32x32: 0.26 M),
    or a (de)quantize of fewer than MIN_PARALLEL_VALUES values, is built for one thread; the
    others (a 3x3 16 -> 32: 4.7 M) for the backend's."""
    from onnx import helper, numpy_helper

    inits = [
        numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype("float32"), "w1"),
        numpy_helper.from_array(rng.standard_normal((8, 32, 1, 1)).astype("float32"), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["c1"], "conv_big", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu_a"),
        helper.make_node("Conv", ["r1", "w2"], ["out"], "conv_small"),
    ]
    path = _model(tmp_path, nodes, inits, [1, 16, 32, 32], None)
    g = compile_model(path, "cpu-int8", keep_float=()).graph
    backend = CpuInt8Kernels(g, num_threads=2)
    kernels = {**backend.kernels, **backend.scales}
    threads = {name: k.module.target.num_threads for name, k in kernels.items()}
    assert threads["conv_big"] == 2 and threads["conv_small"] == 1
    for n in g.nodes:
        if n.name in threads and n.op in ("quantize", "dequantize"):
            small = np.prod(g.values[n.inputs[0]].shape) < ck.MIN_PARALLEL_VALUES
            assert threads[n.name] == (1 if small else 2), n.name
