"""The accelerator backend (kernels lowered at compile time, loaded onto a device) equals the graph
level's golden operator contract bit for bit; kernels relocate to any placement."""

import numpy as np
import pytest

from pyvta.compiler.backend.vta.graph_backend import compile_kernels, kernel_workload
from pyvta.compiler.backend.vta.operator import kernel_epilogue
from pyvta.driver import SimDevice
from pyvta.runtime import vta_ops
from pyvta.runtime.accelerator import AcceleratorBackend
from pyvta.runtime.executor import Executor
from pyvta.runtime.ir import Graph, Node, Value


def one_node_graph(op, x, w, b, res, p: vta_ops.FusedParams, out_shape) -> Graph:
    """A graph of one accelerator node: input x (+ residual input), constant weights and bias."""
    attrs = dict(
        shift=p.shift, clip_lo=p.clip_lo, clip_hi=p.clip_hi, res_shift=p.res_shift,
        strides=list(p.strides), pads=list(p.pads),
    )  # fmt: skip
    inputs = ["x"] + (["res"] if res is not None else [])
    values = {
        "x": Value("x", x.shape, "int8"),
        "w": Value("w", w.shape, "int8"),
        "b": Value("b", b.shape, "int32"),
        "y": Value("y", out_shape, "int8"),
    }
    if res is not None:
        values["res"] = Value("res", res.shape, "int8")
    node = Node(op, "n0", ["x", "w", "b"] + inputs[1:], ["y"], attrs, "vta")
    return Graph("one", inputs, ["y"], [node], {"w": w, "b": b}, values)


def run_on_device(g: Graph, feeds: dict, device) -> tuple[np.ndarray, AcceleratorBackend]:
    acc = AcceleratorBackend(device, compile_kernels(g, device.config))
    (out,), _ = Executor(g, backends={"vta": acc}).run(feeds)
    return out, acc


@pytest.mark.parametrize(
    "params, out_hw",
    [
        (dict(shift=10, clip_lo=0, res_shift=3, strides=(1, 1), pads=(1, 1, 1, 1)), 14),
        (dict(shift=10, res_shift=12, strides=(2, 2), pads=(1, 1, 0, 0)), 7),  # ALU residual
        (dict(shift=0, clip_lo=-5, clip_hi=5, strides=(1, 1), pads=(0, 0, 2, 2)), 14),
        # asymmetric pads (top, left, bottom, right): the LOAD's per-side y/x pads
        (dict(shift=9, strides=(1, 1), pads=(0, 1, 2, 1)), 14),
        (dict(shift=9, strides=(2, 2), pads=(0, 1, 1, 0)), 7),  # TF SAME, stride 2
    ],
)
def test_conv2d_matches_golden(params, out_hw, rng):
    x = rng.integers(-128, 128, (1, 4, 14, 14, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 4, 3, 3, 16, 16), dtype=np.int8)
    b = rng.integers(-9000, 9000, (8, 16)).astype(np.int32)
    p = vta_ops.FusedParams(**params)
    res = None
    if params.get("res_shift"):
        res = rng.integers(-128, 128, (1, 8, out_hw, out_hw, 1, 16), dtype=np.int8)
    g = one_node_graph("vta_conv2d", x, w, b, res, p, (1, 8, out_hw, out_hw, 1, 16))
    feeds = {"x": x} | ({"res": res} if res is not None else {})
    got, acc = run_on_device(g, feeds, SimDevice(dram_bytes=1 << 24))
    assert np.array_equal(got, vta_ops.GoldenVta().conv2d(x, w, b, res, p))
    assert acc.runs and acc.runs[0].cycles > 0
    # each run records the epilogue as lowered (what the per-layer breakdown re-lowers)
    assert kernel_epilogue(acc.runs[0].kernel).residual == (res is not None)
    assert kernel_epilogue(acc.runs[0].kernel).shift == params["shift"]


def test_dense_batch_two_matches_golden(rng):
    x = rng.integers(-128, 128, (2, 32, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (63, 32, 16, 16), dtype=np.int8)
    b = rng.integers(-(2**20), 2**20, (63, 16)).astype(np.int32)  # too large for bias digits
    p = vta_ops.FusedParams(shift=9)
    g = one_node_graph("vta_dense", x, w, b, None, p, (2, 63, 1, 16))
    got, acc = run_on_device(g, {"x": x}, SimDevice(dram_bytes=1 << 24))
    assert np.array_equal(got, vta_ops.GoldenVta().dense(x, w, b, None, p))
    # one kernel, one launch for both images: a 1 x 2-pixel image, each weight tile loaded once
    assert (
        len(acc._ops) == 1 and len(acc.runs) == 1 and kernel_workload(acc.runs[0].kernel).width == 2
    )
    assert acc.last_cycles == acc.runs[-1].cycles


def test_kernel_relocates_to_any_placement(rng):
    """The same kernel placed at other DRAM addresses (other regions allocated first) gives the
    same bits; its instruction stream differs only in the relocated dram_base fields."""
    x = rng.integers(-128, 128, (1, 4, 14, 14, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 4, 3, 3, 16, 16), dtype=np.int8)
    b = rng.integers(-9000, 9000, (8, 16)).astype(np.int32)
    res = rng.integers(-128, 128, (1, 8, 14, 14, 1, 16), dtype=np.int8)
    p = vta_ops.FusedParams(shift=10, res_shift=3, pads=(1, 1, 1, 1))
    g = one_node_graph("vta_conv2d", x, w, b, res, p, (1, 8, 14, 14, 1, 16))
    kernels = compile_kernels(g, SimDevice().config)
    outs, streams = [], []
    for skew in (0, 3 * 4096 + 256, 1 << 20):
        dev = SimDevice(dram_bytes=1 << 24)
        dev.alloc(skew + 1, 256)  # something else lives below the kernel
        acc = AcceleratorBackend(dev, kernels)
        (out,), _ = Executor(g, backends={"vta": acc}).run({"x": x, "res": res})
        outs.append(out)
        streams.append(acc._ops["n0"].insns())
    assert all(np.array_equal(o, outs[0]) for o in outs)
    assert np.array_equal(outs[0], vta_ops.GoldenVta().conv2d(x, w, b, res, p))
    moved = [i for i, (a, c) in enumerate(zip(*streams[:2], strict=True)) if a != c]
    relocated = set(kernels["n0"].relocs[:, 0].tolist())
    assert moved and set(moved) <= relocated
