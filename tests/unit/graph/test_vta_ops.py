"""The operator contract: golden packed ops vs a plain int64 reference, and layout round trips."""

from __future__ import annotations

import numpy as np
import pytest

from pyvta.runtime import layout
from pyvta.runtime.vta_ops import (
    FusedParams,
    conv2d_packed,
    dense_packed,
    requantize,
    wrap_int32,
)


def _reference_conv(x, w, bias, res, p: FusedParams):
    """The contract written out directly on NCHW/OIHW with int64 loops over the window."""
    (sh, sw), (pt, pl, pb, pr) = p.strides, p.pads
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = xp.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    acc = np.zeros((n, o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
            acc += np.einsum("nchw,oc->nohw", win, w[:, :, i, j].astype(np.int64))
    acc += bias.astype(np.int64)[None, :, None, None]
    shift, res_shift = (v[None, :, None, None].astype(np.int64) for v in p.channel_shifts(o))
    if res is not None:
        acc += res.astype(np.int64) << res_shift
    acc = ((acc + 2**31) % 2**32) - 2**31
    return np.clip(acc >> shift, p.clip_lo, p.clip_hi).astype(np.int8)


def _i8(rng, *shape):
    return rng.integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.parametrize(
    "c_in, c_out, k, stride, pads, residual, relu",
    [
        (16, 16, 3, 1, (1, 1, 1, 1), False, True),
        (20, 40, 3, 2, (1, 1, 1, 1), True, True),
        (3, 7, 1, 2, (0, 0, 0, 0), True, False),
        (33, 16, 3, 1, (0, 2, 1, 0), False, False),
    ],
)
def test_conv2d_packed_equals_reference(rng, c_in, c_out, k, stride, pads, residual, relu):
    x = _i8(rng, 1, c_in, 9, 8)
    w = _i8(rng, c_out, c_in, k, k)
    bias = rng.integers(-(2**14), 2**14, c_out).astype(np.int32)
    p = FusedParams(
        shift=9, clip_lo=0 if relu else -128, clip_hi=127, res_shift=6 if residual else 0,
        strides=(stride, stride), pads=pads,
    )  # fmt: skip
    ref_shape = _reference_conv(x, w, bias, None, p).shape
    res = _i8(rng, *ref_shape) if residual else None
    ref = _reference_conv(x, w, bias, res, p)
    got = conv2d_packed(
        layout.pack_nchw(x), layout.pack_oihw(w), layout.pack_bias(bias),
        None if res is None else layout.pack_nchw(res), p,
    )  # fmt: skip
    assert got.dtype == np.int8
    np.testing.assert_array_equal(layout.unpack_nchw(got, c_out), ref)
    # padded output channels stay zero
    assert not layout.unpack_nchw(got, got.shape[1] * 16)[:, c_out:].any()


@pytest.mark.parametrize("residual", [False, True])
def test_conv2d_packed_per_channel_shifts(rng, residual):
    """One shift (and residual shift) per output channel, 20 channels (padded to 32 packed)."""
    x, w = _i8(rng, 1, 20, 7, 6), _i8(rng, 20, 20, 3, 3)
    bias = rng.integers(-(2**14), 2**14, 20).astype(np.int32)
    shifts = rng.integers(0, 16, 20)
    p = FusedParams(shift=shifts, res_shift=rng.integers(0, 9, 20), pads=(1, 1, 1, 1))
    assert p.per_channel and isinstance(p.shift, tuple)
    res = _i8(rng, 1, 20, 7, 6) if residual else None
    ref = _reference_conv(x, w, bias, res, p)
    packed = FusedParams(
        shift=list(p.shift) + [0] * 12, res_shift=list(p.res_shift) + [0] * 12, pads=p.pads
    )
    got = conv2d_packed(
        layout.pack_nchw(x), layout.pack_oihw(w), layout.pack_bias(bias),
        None if res is None else layout.pack_nchw(res), packed,
    )  # fmt: skip
    np.testing.assert_array_equal(layout.unpack_nchw(got, 20), ref)
    one = _reference_conv(x, w, bias, res, FusedParams(shift=int(shifts[0]), pads=p.pads))
    assert not np.array_equal(one, ref)  # the shifts matter


def test_dense_packed_equals_reference(rng):
    x, w = _i8(rng, 2, 40), _i8(rng, 24, 40)
    bias = rng.integers(-1000, 1000, 24).astype(np.int32)
    res = _i8(rng, 2, 24)
    p = FusedParams(shift=7, res_shift=3, clip_lo=-20, clip_hi=100)
    acc = x.astype(np.int64) @ w.astype(np.int64).T + bias + (res.astype(np.int64) << 3)
    ref = np.clip(acc >> 7, -20, 100).astype(np.int8)
    got = dense_packed(
        layout.pack_nc(x), layout.pack_oi(w), layout.pack_bias(bias), layout.pack_nc(res), p
    )
    np.testing.assert_array_equal(layout.unpack_nc(got, 24), ref)


def test_requantize_wraps_int32_and_floors():
    acc = np.array([2**31 + 5, -(2**31) - 1, -3, -4, 3], np.int64)
    assert list(wrap_int32(acc)) == [-(2**31) + 5, 2**31 - 1, -3, -4, 3]
    out = requantize(np.array([-3, -4, 3, 5, 10_000]), None, FusedParams(shift=1))
    assert list(out) == [-2, -2, 1, 2, 127]  # arithmetic shift right rounds toward -inf


@pytest.mark.parametrize(
    "kwargs, text",
    [({"shift": 32}, "shift"), ({"shift": 1, "clip_lo": 5, "clip_hi": 1}, "clip"),
     ({"shift": 1, "res_shift": -1}, "res_shift"), ({"shift": 1, "pads": (1, 1)}, "pads"),
     ({"shift": [1, 40]}, "shift"), ({"shift": [1, 2], "res_shift": [1, 2, 3]}, "per-channel")],
)  # fmt: skip
def test_fused_params_reject_bad_values(kwargs, text):
    with pytest.raises(ValueError, match=text):
        FusedParams(**kwargs)


def test_layout_round_trips(rng):
    x = rng.standard_normal((2, 20, 3, 5)).astype(np.float32)
    px = layout.pack_nchw(x)
    assert px.shape == (2, 2, 3, 5, 1, 16)
    np.testing.assert_array_equal(layout.unpack_nchw(px, 20), x)
    assert px[0, 0, 1, 2, 0, 3] == x[0, 3, 1, 2] and px[1, 1, 2, 4, 0, 3] == x[1, 19, 2, 4]
    w = rng.standard_normal((18, 20, 3, 3)).astype(np.float32)
    pw = layout.pack_oihw(w)
    assert pw.shape == (2, 2, 3, 3, 16, 16) and pw[1, 1, 2, 0, 1, 3] == w[17, 19, 2, 0]
    np.testing.assert_array_equal(layout.unpack_oihw(pw, 18, 20), w)
    d = rng.standard_normal((3, 20)).astype(np.float32)
    np.testing.assert_array_equal(layout.unpack_nc(layout.pack_nc(d), 20), d)
