"""The accelerator backend equals the graph level's golden operator contract bit for bit."""

import numpy as np
import pytest

from pyvta.compiler.backend.vta.graph_backend import AcceleratorBackend
from pyvta.compiler.graph import vta_ops
from pyvta.driver import SimDevice


@pytest.mark.parametrize(
    "params, out_hw",
    [
        (dict(shift=10, clip_lo=0, res_shift=3, strides=(1, 1), pads=(1, 1, 1, 1)), 14),
        (dict(shift=10, res_shift=12, strides=(2, 2), pads=(1, 1, 0, 0)), 7),  # ALU residual
        (dict(shift=0, clip_lo=-5, clip_hi=5, strides=(1, 1), pads=(0, 0, 2, 2)), 14),
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
    acc = AcceleratorBackend(SimDevice(dram_bytes=1 << 24))
    got = acc.conv2d(x, w, b, res, p)
    assert np.array_equal(got, vta_ops.GoldenVta().conv2d(x, w, b, res, p))
    assert acc.runs and acc.runs[0].cycles > 0


def test_dense_batch_two_matches_golden(rng):
    x = rng.integers(-128, 128, (2, 32, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (63, 32, 16, 16), dtype=np.int8)
    b = rng.integers(-(2**20), 2**20, (63, 16)).astype(np.int32)  # too large for bias digits
    p = vta_ops.FusedParams(shift=9)
    acc = AcceleratorBackend(SimDevice(dram_bytes=1 << 24))
    assert np.array_equal(acc.dense(x, w, b, None, p), vta_ops.GoldenVta().dense(x, w, b, None, p))
    acc.dense(x, w, b, None, p)
    assert len(acc._ops) == 1  # compiled once, launched four times
    assert acc.last_cycles == acc.runs[-1].cycles + acc.runs[-2].cycles
