"""The accelerator operator's public entry points refuse a bias that would be silently changed:
a float bias (truncated) or an integer bias beyond int32 (wrapped)."""

import numpy as np
import pytest

from pyvta.compiler.backend.vta import ConvWorkload, Epilogue, VtaConv2d, pack_bias, pack_weights
from pyvta.compiler.backend.vta.workload import WorkloadError
from pyvta.driver import SimDevice


@pytest.mark.parametrize(
    "bias, match",
    [
        (np.array([1.5, 2.0]), "integer array"),
        (np.array([3e9, 0], np.int64), "outside int32"),
        (np.array([-(2**31) - 1], np.int64), "outside int32"),
        ([1, 2], "integer array"),
        (np.zeros((2, 2), np.int32), "1-D"),
    ],
)
def test_pack_bias_refuses_what_it_would_change(bias, match):
    with pytest.raises(WorkloadError, match=match):
        pack_bias(bias)


def test_pack_bias_keeps_int32_range_values():
    b = np.array([2**31 - 1, -(2**31), 7], np.int64)
    packed = pack_bias(b)
    assert packed.dtype == np.int32 and packed.shape == (1, 16)
    assert packed[0, :3].tolist() == b.tolist()


@pytest.mark.parametrize(
    "bias", [np.full((1, 16), 1.5), np.full((1, 16), 3e9).astype(np.int64)], ids=["float", "wide"]
)
def test_vta_conv2d_refuses_a_packed_bias_that_would_change(bias, rng):
    wl = ConvWorkload(8, 8, 16, 16, 3, 3, 1, 1)
    w = rng.integers(-128, 128, (16, 16, 3, 3), dtype=np.int8)
    with pytest.raises(WorkloadError, match="bias"):
        VtaConv2d(wl, Epilogue.requant(shift=8), pack_weights(w), bias, SimDevice())
