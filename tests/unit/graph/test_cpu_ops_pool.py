"""numpy max pool (separable: along the width, then the height) against the max over
sliding windows, for float (NaN, -inf) and int8, strides and pads that do not fit evenly; and
the classifier's dense with its weights prepared once equals the per-call one bit for bit."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from pyvta.runtime import cpu_llvm, cpu_ops

SEED = 7


def _window_max(x, kernel, strides, pads):
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    t, l, b, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill)
    win = sliding_window_view(xp, kernel, axis=(2, 3))[:, :, :: strides[0], :: strides[1]]
    return win.max(axis=(4, 5))


@pytest.mark.parametrize(
    "shape,kernel,strides,pads",
    [
        ((1, 8, 12, 12), (3, 3), (2, 2), (1, 1, 1, 1)),  # ResNet's stem pool
        ((2, 5, 9, 7), (2, 3), (1, 2), (0, 1, 1, 0)),
        ((1, 4, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_max_pool_equals_the_window_max(shape, kernel, strides, pads, dtype):
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    x = (rng.standard_normal(shape) * 60).astype(dtype)
    if dtype == np.float32:
        x.flat[3], x.flat[10] = np.nan, -np.inf
    attrs = {"kernel": list(kernel), "strides": list(strides), "pads": list(pads)}
    got = cpu_ops.max_pool([x], attrs)
    want = _window_max(x, kernel, strides, pads)
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_dense_with_prepared_weights_is_bit_exact():
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    w = rng.standard_normal((1000, 512)).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    x = rng.standard_normal((1, 512)).astype(np.float32)
    attrs = {"clip": None}
    got = cpu_ops.dense_transposed(x, cpu_llvm.gemm_operand(w.T), [b], attrs)
    want = cpu_ops.dense([x, w, b], attrs)
    assert got.shape == want.shape == (1, 1000)
    np.testing.assert_array_equal(got, want)


def test_windows_by_phases_equal_strided_slices():
    """im2col's windows (split into stride phases first) for random kernels, strides,
    dilations and pads, against one strided slice per kernel position."""
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    checked = 0
    while checked < 40:
        (kh, kw), (sh, sw), (dh, dw) = rng.integers(1, 5, 2), rng.integers(1, 4, 2), (1, 2)
        pads = tuple(int(p) for p in rng.integers(0, 3, 4))
        x = rng.standard_normal((1, 2, *rng.integers(8, 14, 2))).astype(np.float32)
        xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
        oh = (xp.shape[2] - (kh - 1) * dh - 1) // sh + 1
        ow = (xp.shape[3] - (kw - 1) * dw - 1) // sw + 1
        if oh <= 0 or ow <= 0:
            continue
        got = cpu_ops._windows(x, (kh, kw), (sh, sw), pads, (dh, dw))
        for i in range(kh):
            for j in range(kw):
                want = xp[:, :, i * dh :: sh, j * dw :: sw][:, :, :oh, :ow]
                np.testing.assert_array_equal(got[:, :, i, j], want)
        checked += 1
