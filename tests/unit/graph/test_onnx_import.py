"""ONNX import of each supported op, checked against onnxruntime (float32, tight tolerance)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from pyvta.compiler.graph.onnx_import import SUPPORTED_OPS, OnnxImportError, import_onnx
from pyvta.compiler.graph.reference import run_onnxruntime
from pyvta.compiler.graph.zoo import float_model
from pyvta.runtime.executor import Executor
from pyvta.runtime.ir import check_graph


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _cases(rng):
    """(id, nodes, inputs, outputs, initializers) for every supported op."""
    x4 = {"x": (2, 4, 7, 7)}
    w = _f32(rng, 6, 4, 3, 3)
    cases = [
        ("conv", [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2, 2],
                                   pads=[1, 0, 2, 1])],
         x4, {"y": None}, {"w": w, "b": _f32(rng, 6)}),
        ("conv_group_dilation", [helper.make_node("Conv", ["x", "w"], ["y"], group=2,
                                                  dilations=[2, 2], pads=[2, 2, 2, 2])],
         x4, {"y": None}, {"w": _f32(rng, 6, 2, 3, 3)}),
        ("conv_depthwise_valid", [helper.make_node("Conv", ["x", "w"], ["y"], group=4,
                                                   auto_pad="VALID")],
         x4, {"y": None}, {"w": _f32(rng, 4, 1, 3, 3)}),
        ("gemm", [helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0,
                                   transB=1)],
         {"a": (3, 5)}, {"y": None}, {"b": _f32(rng, 4, 5), "c": _f32(rng, 4)}),
        ("gemm_notrans", [helper.make_node("Gemm", ["a", "b"], ["y"])],
         {"a": (3, 5)}, {"y": None}, {"b": _f32(rng, 5, 4)}),
        ("matmul_const", [helper.make_node("MatMul", ["a", "b"], ["y"])],
         {"a": (3, 5)}, {"y": None}, {"b": _f32(rng, 5, 4)}),
        ("matmul", [helper.make_node("MatMul", ["a", "b"], ["y"])],
         {"a": (2, 3, 5), "b": (2, 5, 4)}, {"y": None}, {}),
        ("relu", [helper.make_node("Relu", ["x"], ["y"])], x4, {"y": None}, {}),
        ("clip", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], x4, {"y": None},
         {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}),
        ("clip_max_only", [helper.make_node("Clip", ["x", "", "hi"], ["y"])], x4, {"y": None},
         {"hi": np.array(0.2, np.float32)}),
        ("add_broadcast", [helper.make_node("Add", ["x", "c"], ["y"])], x4, {"y": None},
         {"c": _f32(rng, 4, 1, 1)}),
        ("add", [helper.make_node("Add", ["x", "z"], ["y"])], {**x4, "z": (2, 4, 7, 7)},
         {"y": None}, {}),
        ("mul", [helper.make_node("Mul", ["x", "c"], ["y"])], x4, {"y": None},
         {"c": _f32(rng, 1, 4, 1, 1)}),
        ("batchnorm", [helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"],
                                        epsilon=1e-3)],
         x4, {"y": None}, {"s": _f32(rng, 4), "bb": _f32(rng, 4), "m": _f32(rng, 4),
                           "v": np.abs(_f32(rng, 4)) + 0.5}),
        ("maxpool", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3],
                                      strides=[2, 2], pads=[1, 1, 1, 1])],
         x4, {"y": None}, {}),
        ("avgpool_pad", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                                          strides=[2, 2], pads=[1, 1, 1, 1])],
         x4, {"y": None}, {}),
        ("avgpool_count_pad", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                                                pads=[1, 0, 0, 1], count_include_pad=1)],
         x4, {"y": None}, {}),
        ("globalavgpool", [helper.make_node("GlobalAveragePool", ["x"], ["y"])], x4,
         {"y": None}, {}),
        ("flatten", [helper.make_node("Flatten", ["x"], ["y"], axis=2)], x4, {"y": None}, {}),
        ("reshape", [helper.make_node("Reshape", ["x", "s"], ["y"])], x4, {"y": None},
         {"s": np.array([0, -1, 7], np.int64)}),
        ("concat", [helper.make_node("Concat", ["x", "z"], ["y"], axis=1)],
         {**x4, "z": (2, 3, 7, 7)}, {"y": None}, {}),
        ("softmax", [helper.make_node("Softmax", ["a"], ["y"], axis=1)], {"a": (3, 10)},
         {"y": None}, {}),
        ("identity", [helper.make_node("Identity", ["x"], ["y"])], x4, {"y": None}, {}),
        ("constant", [helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
            "c", 1, [4, 1, 1], [1.0, 2.0, 3.0, 4.0])), helper.make_node("Mul", ["x", "c"], ["y"])],
         x4, {"y": None}, {}),
    ]  # fmt: skip
    return cases


CASE_IDS = [c[0] for c in _cases(np.random.default_rng(0))]


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_op_matches_onnxruntime(case_id, rng):
    case = {c[0]: c for c in _cases(rng)}[case_id]
    _, nodes, inputs, outputs, inits = case
    for i, n in enumerate(nodes):
        n.name = f"{case_id}_{i}"
    model = float_model(nodes, inputs, outputs, inits)
    feeds = {k: _f32(rng, *s) for k, s in inputs.items()}
    (ref,) = run_onnxruntime(model, feeds)
    graph = import_onnx(model)
    check_graph(graph)
    (out,), _ = Executor(graph).run(feeds)
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_every_listed_op_is_covered():
    required = {"Conv", "Gemm", "MatMul", "Relu", "Clip", "Add", "Mul", "BatchNormalization",
                "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Concat",
                "Softmax", "Identity"}  # fmt: skip
    assert required <= set(SUPPORTED_OPS)


def test_unsupported_op_names_node_op_and_supported():
    model = float_model(
        [helper.make_node("Sigmoid", ["x"], ["y"], name="act7")], {"x": (1, 4)}, {"y": None}
    )
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model)
    msg = str(e.value)
    assert "'act7'" in msg and "'Sigmoid'" in msg and "Conv" in msg and "supported" in msg


@pytest.mark.parametrize(
    "node, what",
    [
        (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2], ceil_mode=1),
         "ceil_mode"),
        (helper.make_node("Conv", ["x", "w"], ["y"], name="p", auto_pad="SAME_UPPER"),
         "auto_pad"),
        (helper.make_node("Gemm", ["f", "w2"], ["y"], name="p", transA=1), "transA"),
        (helper.make_node("Softmax", ["x"], ["y"], name="p", axis=1, foo=3), "foo"),
    ],
)  # fmt: skip
def test_unsupported_attribute_raises(node, what, rng):
    model = float_model(
        [node], {"x": (1, 4, 6, 6), "f": (4, 3)}, {"y": None},
        {"w": _f32(rng, 2, 4, 3, 3), "w2": _f32(rng, 4, 5)},
    )  # fmt: skip
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model)
    assert "'p'" in str(e.value) and what in str(e.value) and node.op_type in str(e.value)
