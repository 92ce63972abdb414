"""A MobileNet-style block through the float CPU target: a stride-2 depthwise conv and a
pointwise conv get their own templates (row-block padding; a GEMM over the pixels) with relu6
fused, and the network matches onnxruntime."""

from __future__ import annotations

import numpy as np
from onnx import helper

from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.pipeline import options_for, run_pipeline
from pyvta.compiler.graph.reference import run_onnxruntime
from pyvta.compiler.graph.zoo import float_model
from pyvta.runtime.compiled_model import CompiledModel, run_model

MAX_REL_ERR = 1e-4
SEED = 21


def test_depthwise_stride2_then_pointwise_match_onnxruntime():
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    c, o = 32, 48
    inits = {
        "w1": rng.standard_normal((c, 1, 3, 3)).astype(np.float32) * 0.3,
        "b1": rng.standard_normal(c).astype(np.float32),
        "w2": rng.standard_normal((o, c, 1, 1)).astype(np.float32) * 0.3,
        "b2": rng.standard_normal(o).astype(np.float32),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(6.0, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4, strides=[2, 2], group=c),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["y"]),
    ]
    model = float_model(nodes, {"x": (1, c, 15, 13)}, {"y": None}, inits)
    cm = CompiledModel(run_pipeline(import_onnx(model), options_for("cpu")), "cpu")
    convs = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    assert [n.attrs["schedule"]["template"] for n in convs] == ["depthwise", "pointwise"]
    assert all(n.attrs["clip"] == [0.0, 6.0] for n in convs)
    x = rng.standard_normal((1, c, 15, 13)).astype(np.float32)
    (ref,) = run_onnxruntime(model, {"x": x})
    got = run_model(cm, x)[0][0]
    assert float(np.abs(got - ref).max() / np.abs(ref).max()) < MAX_REL_ERR
