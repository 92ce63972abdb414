"""Each graph pass on small graphs, and the pipeline's order."""

from __future__ import annotations

import numpy as np
from onnx import helper

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.passes import (
    eliminate_identities,
    fold_batch_norm,
    fold_constants,
    fuse_operators,
    pack_layouts,
    partition_targets,
    quantize_int8,
    remove_dead_code,
)
from pyvta.compiler.graph.pipeline import PIPELINE, PipelineOptions, options_for, run_pipeline
from pyvta.compiler.graph.reference import cosine
from pyvta.compiler.graph.zoo import float_model
from pyvta.runtime.executor import Executor
from pyvta.runtime.ir import check_graph


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _run(graph, x):
    return Executor(graph).run({"x": x})[0][0]


def _block(rng):
    """conv -> bn -> add(bias) -> add(residual) -> relu, plus a dead branch and identities."""
    nodes = [
        helper.make_node("Identity", ["x"], ["xi"], name="id0"),
        helper.make_node("Conv", ["xi", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="bn"),
        helper.make_node("Add", ["n", "cb"], ["nb"], name="bias"),
        helper.make_node("Add", ["nb", "xi"], ["r"], name="residual"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
        helper.make_node("Add", ["k1", "k2"], ["k"], name="const_add"),
        helper.make_node("Mul", ["x", "k"], ["dead"], name="dead"),
    ]
    inits = {
        "w": _f32(rng, 8, 8, 3, 3) * 0.2, "s": _f32(rng, 8), "bb": _f32(rng, 8),
        "m": _f32(rng, 8), "v": np.abs(_f32(rng, 8)) + 0.3, "cb": _f32(rng, 8, 1, 1),
        "k1": _f32(rng, 8, 1, 1), "k2": _f32(rng, 8, 1, 1),
    }  # fmt: skip
    return import_onnx(float_model(nodes, {"x": (1, 8, 6, 6)}, {"y": None}, inits))


def test_fold_constants_evaluates_constant_nodes(rng):
    g = _block(rng)
    folded = fold_constants(g)
    check_graph(folded)
    assert "const_add" not in [n.name for n in folded.nodes]
    np.testing.assert_allclose(folded.constants["k"], g.constants["k1"] + g.constants["k2"])


def test_eliminate_identities_and_dead_code(rng):
    g = _block(rng)
    x = _f32(rng, 1, 8, 6, 6)
    g2 = remove_dead_code(eliminate_identities(g))
    check_graph(g2)
    assert {n.op for n in g2.nodes} == {"conv2d", "batch_norm", "add", "relu"}
    assert "k1" not in g2.constants and "dead" not in g2.values
    np.testing.assert_array_equal(_run(g2, x), _run(g, x))


def test_fold_batch_norm_is_exact(rng):
    g = remove_dead_code(eliminate_identities(_block(rng)))
    folded = remove_dead_code(fold_batch_norm(g))
    check_graph(folded)
    assert "batch_norm" not in [n.op for n in folded.nodes]
    x = _f32(rng, 1, 8, 6, 6)
    np.testing.assert_allclose(_run(folded, x), _run(g, x), rtol=1e-5, atol=1e-5)


def test_fuse_operators_makes_one_conv_node(rng):
    g = remove_dead_code(fold_batch_norm(remove_dead_code(eliminate_identities(_block(rng)))))
    fused = remove_dead_code(fuse_operators(g))
    check_graph(fused)
    (conv,) = fused.nodes
    assert conv.op == "conv2d" and len(conv.inputs) == 4 and conv.attrs["clip"][0] == 0.0
    x = _f32(rng, 1, 8, 6, 6)
    np.testing.assert_allclose(_run(fused, x), _run(g, x), rtol=1e-5, atol=1e-5)


def test_fusion_keeps_activation_before_add_unfused(rng):
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "b"], ["y"], name="add"),
    ]
    g = import_onnx(float_model(nodes, {"x": (1, 4, 5, 5)}, {"y": None},
                               {"w": _f32(rng, 4, 4, 1, 1), "b": _f32(rng, 4, 1, 1)}))  # fmt: skip
    fused = fuse_operators(g)
    assert [n.op for n in fused.nodes] == ["conv2d", "add"]
    x = _f32(rng, 1, 4, 5, 5)
    np.testing.assert_allclose(_run(fused, x), _run(g, x), rtol=1e-6)


def _small_resnet(width=24):
    return import_onnx(zoo.resnet(18, size=32, width=width, classes=10, seed=3))


def _calibration():
    return [{"input": x} for x in zoo.sample_inputs(4, 32, seed=7)]


def test_quantize_int8_keeps_first_conv_and_last_dense_float():
    float_opts = PipelineOptions()  # the fused float graph (no CPU kernels)
    g = run_pipeline(_small_resnet(), float_opts)
    q = remove_dead_code(quantize_int8(g, options_for("cpu-int8", _calibration())))
    check_graph(q)
    ops = [n.op for n in q.nodes]
    assert ops[0] == "conv2d" and ops[-1] == "dense" and ops.count("qconv2d") == 19
    for n in q.nodes:
        if n.op == "qconv2d":
            for k in ("shift", "res_shift"):  # one, or one per output channel
                assert ((np.array(n.attrs[k]) >= 0) & (np.array(n.attrs[k]) <= 31)).all()
            assert q.values[n.inputs[1]].dtype == "int8" and q.values[n.inputs[2]].dtype == "int32"
    x = zoo.sample_inputs(1, 32, seed=8)[0]
    f = Executor(g).run({"input": x})[0][0]
    i8 = Executor(q).run({"input": x})[0][0]
    print("cosine float vs int8:", cosine(f, i8))
    assert cosine(f, i8) > 0.9


def test_quantize_keep_float_is_configurable():
    g = run_pipeline(_small_resnet(), PipelineOptions())
    q = quantize_int8(g, options_for("cpu-int8", _calibration(), keep_float=()))
    ops = [n.op for n in q.nodes]
    assert "conv2d" not in ops and "dense" not in ops and ops.count("qdense") == 1


def test_partition_and_pack_layouts():
    g = run_pipeline(_small_resnet(), PipelineOptions())
    opts = options_for("vta", _calibration(), vta_partition="legacy")
    q = quantize_int8(g, opts)
    parted = partition_targets(q, opts)
    assert {n.op for n in parted.nodes if n.target == "vta"} == {"qconv2d"}
    assert parted.nodes[0].target == "cpu" and parted.nodes[-1].target == "cpu"
    packed = remove_dead_code(pack_layouts(parted, opts))
    check_graph(packed)
    ops = [n.op for n in packed.nodes]
    # one pack at the entry, one unpack at the exit: vta nodes hand packed values to each other
    assert ops.count("pack_nchw") == 1 and ops.count("unpack_nchw") == 1
    assert ops.count("vta_conv2d") == 19
    conv = next(n for n in packed.nodes if n.op == "vta_conv2d")
    assert packed.values[conv.inputs[1]].shape[-2:] == (16, 16)  # 24 channels padded to 32


def test_pipeline_is_one_ordered_list_of_named_passes():
    names = [name for name, _ in PIPELINE]
    assert names == [
        "fold_constants", "eliminate_identities", "fold_batch_norm", "fuse_operators",
        "remove_dead_code", "quantize_int8", "partition_targets", "place_gpu", "pack_layouts",
        "alter_cpu_layout", "fuse_int8_borders", "remove_dead_code", "build_cpu_kernels",
    ]  # fmt: skip
