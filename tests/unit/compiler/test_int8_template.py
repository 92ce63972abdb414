"""compiler/ops/cpu/int8.py: the fused int8 conv template against the accelerator's contract,
the instructions LLVM selects for it, and the u8 offset / bias correction arithmetic."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pyvta.compiler.api import lower
from pyvta.compiler.backend.llvm.target import CpuTarget
from pyvta.compiler.ops.cpu.conv2d import COLUMN_SKIP_SHARE, padded_tap_share
from pyvta.compiler.ops.cpu.int8 import (
    DOTS,
    SUMMED_COLUMN_SKIP_SHARE,
    U8_OFFSET,
    Int8ConvKnobs,
    Int8TemplateError,
    assembly_for,
    conv_out_hw,
    dot_form,
    dot_isa,
    pack_qconv,
    pack_qconv_grouped,
    qconv2d_grouped_nchw,
    qconv2d_nchw,
    sum_dot_form,
    sums_fit_int16,
)
from pyvta.compiler.ops.cpu.int8_scale import dequantize_nchw, quantize_nchw
from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.vta_ops import FusedParams, wrap_int32

# (C, H, W, O, kernel, strides, pads, residual): odd channel counts (scalar tiles where O is
# not a multiple of 8), asymmetric pads, strides 2, a 1x1 image (dense)
LAYERS = [
    (13, 9, 11, 24, (3, 3), (2, 2), (1, 0, 2, 1), False),
    (16, 7, 7, 16, (3, 3), (1, 1), (1, 1, 1, 1), True),
    (5, 6, 10, 12, (1, 3), (1, 2), (0, 1, 0, 1), True),
    (8, 8, 8, 8, (7, 7), (2, 2), (3, 3, 3, 3), False),
    (40, 1, 1, 10, (1, 1), (1, 1), (0, 0, 0, 0), False),
    (8, 4, 27, 16, (3, 3), (1, 1), (1, 1, 1, 1), True),  # 27 columns: tiles that do not divide
]


def _data(rng, dot: str, shape) -> np.ndarray:
    """int8 input for ``dot``: its whole range, or 0..127 for the ``pmaddubsw`` form (no input
    offset: such inputs are its precondition)."""
    return rng.integers(-DOTS[dot][2], 128, shape).astype(np.int8)


def _weights(rng, dot: str, shape) -> np.ndarray:
    """int8 weights for ``dot``: the whole range, or within 32767 / (127 * 2 * K) for a
    ``pmaddubsw_xK`` form (2K products of inputs 0..127 per int16 sum: its precondition)."""
    steps = DOTS[dot][3]
    bound = 128 if steps == 1 else (2**15 - 1) // (127 * 2 * steps)
    return rng.integers(-bound, min(bound + 1, 128), shape).astype(np.int8)


def _attrs(strides, pads, rng) -> dict:
    lo = int(rng.integers(-128, 1))
    return dict(
        strides=list(strides), pads=list(pads), dilations=[1, 1], group=1,
        clip_lo=lo, clip_hi=int(rng.integers(lo, 128)), shift=int(rng.integers(0, 14)),
        res_shift=int(rng.integers(0, 12)),
    )  # fmt: skip


@pytest.mark.parametrize("dot", list(DOTS))
@pytest.mark.parametrize("layer", LAYERS, ids=lambda la: "c{}h{}w{}o{}k{}s{}p{}r{}".format(*la))
def test_qconv_equals_the_contract(layer, dot, build, rng):
    """Every dot form (vpdpbusd runs as shifts and multiplies on a host without VNNI,
    pmaddubsw as vpdpbusd on a host with it)."""
    c, h, w, o, kernel, strides, pads, residual = layer
    attrs = _attrs(strides, pads, rng)
    x = _data(rng, dot, (1, c, h, w))
    wt = _weights(rng, dot, (o, c, *kernel))
    bias = rng.integers(-(2**31), 2**31, o).astype(np.int32)  # wraps the accumulator
    oh, ow = conv_out_hw(h, w, kernel, strides, pads)
    res = rng.integers(-128, 128, (1, o, oh, ow)).astype(np.int8)
    knobs = Int8ConvKnobs.for_layer(o, ow, dot=dot)
    sch, args = qconv2d_nchw(c, h, w, o, kernel, FusedParams.from_attrs(attrs), residual, knobs)
    mod = build(sch, args)
    wp, bp = pack_qconv(wt, bias, knobs.oc_block, dot)
    out = np.zeros((1, o, oh, ow), np.int8)
    mod(x, wp, bp, *([res] if residual else []), out)
    ref = run_cpu_op("qconv2d", [x, wt, bias] + ([res] if residual else []), attrs)
    np.testing.assert_array_equal(out, ref)


# (C, H, W, O, kernel, strides, pads, dilations): small images where every output reads some
# padding, dilation 2-3, asymmetric pads, stride 2; each skips padded rows and columns
PADDED_LAYERS = [
    (6, 5, 4, 8, (3, 3), (2, 2), (2, 1, 3, 2), (3, 2)),
    (7, 6, 6, 16, (5, 5), (1, 1), (4, 4, 4, 4), (2, 2)),
    (5, 3, 5, 8, (3, 3), (1, 2), (0, 3, 2, 1), (2, 3)),
    (9, 13, 13, 8, (7, 7), (1, 1), (6, 6, 6, 6), (2, 2)),  # net27's conv8, fewer channels
]


@pytest.mark.parametrize("dot", list(DOTS))
@pytest.mark.parametrize(
    "layer", PADDED_LAYERS, ids=lambda la: "c{}h{}w{}o{}k{}s{}p{}d{}".format(*la)
)
def test_qconv_skipping_padded_taps_equals_the_contract(layer, dot, build, rng):
    """The forms whose input is not offset (pad cells 0) skip the taps that read padding, rows
    and columns (at least ``SUMMED_COLUMN_SKIP_SHARE`` of them padded here, so every such form
    skips them): a tap skipped that reads the image changes the sum."""
    c, h, w, o, kernel, strides, pads, dil = layer
    oh, ow = conv_out_hw(h, w, kernel, strides, pads, dil)
    assert padded_tap_share(w, ow, kernel[1], strides[1], dil[1], pads[1]) >= max(
        COLUMN_SKIP_SHARE, SUMMED_COLUMN_SKIP_SHARE
    )
    x = _data(rng, dot, (1, c, h, w))
    wt = _weights(rng, dot, (o, c, *kernel))
    bias = rng.integers(-1000, 1000, o).astype(np.int32)
    # a shift that keeps the sums' typical size in int8 (few outputs clipped): each tap counts
    std = np.sqrt(c * kernel[0] * kernel[1] * np.mean(x.astype(float) ** 2)) * wt.std()
    shift = max(0, round(np.log2(std / 32)))
    attrs = dict(strides=list(strides), pads=list(pads), dilations=list(dil), group=1,
                 clip_lo=-128, clip_hi=127, shift=shift, res_shift=0)  # fmt: skip
    knobs = Int8ConvKnobs.for_layer(o, ow, dot=dot)
    params = FusedParams.from_attrs(attrs)
    sch, args = qconv2d_nchw(c, h, w, o, kernel, params, False, knobs, dil)
    text = str(lower(sch, args))
    taps = text[text.index("for ry") : text.rindex("dot_")]  # the reduction over the taps
    assert taps.count("if (") == (2 if DOTS[dot][2] == 0 else 0), taps  # a row, a column test
    wp, bp = pack_qconv(wt, bias, knobs.oc_block, dot)
    out = np.zeros((1, o, oh, ow), np.int8)
    build(sch, args)(x, wp, bp, out)
    np.testing.assert_array_equal(out, run_cpu_op("qconv2d", [x, wt, bias], attrs))


@pytest.mark.parametrize("dot", list(DOTS))
@pytest.mark.parametrize("layer", LAYERS[1:3], ids=lambda la: "c{}h{}w{}o{}".format(*la))
def test_qconv_per_channel_shifts_equal_the_contract(layer, dot, build, rng):
    """Per-output-channel shift and residual shift (int32 [O] inputs after the bias)."""
    c, h, w, o, kernel, strides, pads, residual = layer
    attrs = _attrs(strides, pads, rng)
    attrs["shift"] = rng.integers(0, 20, o).tolist()
    attrs["res_shift"] = rng.integers(0, 12, o).tolist()
    p = FusedParams.from_attrs(attrs)
    x = _data(rng, dot, (1, c, h, w))
    wt = _weights(rng, dot, (o, c, *kernel))
    bias = rng.integers(-(2**31), 2**31, o).astype(np.int32)
    oh, ow = conv_out_hw(h, w, kernel, strides, pads)
    res = rng.integers(-128, 128, (1, o, oh, ow)).astype(np.int8)
    knobs = Int8ConvKnobs.for_layer(o, ow, dot=dot)
    mod = build(*qconv2d_nchw(c, h, w, o, kernel, p, residual, knobs))
    wp, bp = pack_qconv(wt, bias, knobs.oc_block, dot)
    out = np.zeros((1, o, oh, ow), np.int8)
    mod(x, wp, bp, *p.channel_shifts(o), *([res] if residual else []), out)
    ref = run_cpu_op("qconv2d", [x, wt, bias] + ([res] if residual else []), attrs)
    np.testing.assert_array_equal(out, ref)
    assert len(np.unique(attrs["shift"])) > 1


@pytest.mark.parametrize("dot", list(DOTS))
def test_batched_qconv_is_each_image_s_contract(dot, build, rng):
    """A batch of 3 in one call (images x channel blocks x rows as the threads' tasks), with
    a residual: each image equals the contract's."""
    c, h, w, o, kernel, strides, pads, _ = LAYERS[0]
    attrs = _attrs(strides, pads, rng)
    x = _data(rng, dot, (3, c, h, w))
    wt = _weights(rng, dot, (o, c, *kernel))
    bias = rng.integers(-(2**31), 2**31, o).astype(np.int32)
    oh, ow = conv_out_hw(h, w, kernel, strides, pads)
    res = rng.integers(-128, 128, (3, o, oh, ow)).astype(np.int8)
    knobs = Int8ConvKnobs.for_layer(o, ow, dot=dot)
    p = FusedParams.from_attrs(attrs)
    mod = build(*qconv2d_nchw(c, h, w, o, kernel, p, True, knobs, batch=3), num_threads=2)
    wp, bp = pack_qconv(wt, bias, knobs.oc_block, dot)
    out = np.zeros((3, o, oh, ow), np.int8)
    mod(x, wp, bp, res, out)
    for b in range(3):
        ref = run_cpu_op("qconv2d", [x[b : b + 1], wt, bias, res[b : b + 1]], attrs)
        np.testing.assert_array_equal(out[b : b + 1], ref)


@pytest.mark.parametrize("dot", list(DOTS))
@pytest.mark.parametrize("per_channel", [False, True])
def test_grouped_qconv_is_the_contract(dot, per_channel, build, rng):
    """3 groups of 7 input channels (no whole lane) and 5 output channels, each group's padded
    to the vector (``padded_channels``): a batch of 2 with a residual equals the contract's
    grouped conv on the layer's own channels."""
    from pyvta.runtime.int8_kernels import padded_channels

    groups, c, h, w, o = 3, 21, 9, 8, 15
    attrs = {**_attrs((1, 2), (1, 0, 2, 1), rng), "group": groups}
    if per_channel:
        attrs["shift"] = rng.integers(0, 20, o).tolist()
        attrs["res_shift"] = rng.integers(0, 12, o).tolist()
    p = FusedParams.from_attrs(attrs)
    x = _data(rng, dot, (2, c, h, w))
    wt = _weights(rng, dot, (o, c // groups, 3, 3))
    bias = rng.integers(-(2**31), 2**31, o).astype(np.int32)
    oh, ow = conv_out_hw(h, w, (3, 3), p.strides, p.pads)
    res = rng.integers(-128, 128, (2, o, oh, ow)).astype(np.int8)
    o_pad, pos = padded_channels(o, groups)
    assert o_pad == 24 and pos.tolist()[4:7] == [4, 8, 9]
    knobs = Int8ConvKnobs.for_layer(o_pad // groups, ow, dot=dot)
    sch, args = qconv2d_nchw(c, h, w, o_pad, (3, 3), p, True, knobs, res_channels=o, batch=2,
                             groups=groups)  # fmt: skip
    mod = build(sch, args, num_threads=2)
    wpad = np.zeros((o_pad, c // groups, 3, 3), np.int8)
    wpad[pos] = wt
    bpad = np.zeros(o_pad, np.int32)
    bpad[pos] = bias
    shifts = [np.zeros(o_pad, np.int32) for _ in range(2)] if per_channel else []
    for padded, v in zip(shifts, p.channel_shifts(o), strict=False):
        padded[pos] = v
    out = np.zeros((2, o_pad, oh, ow), np.int8)
    mod(x, *pack_qconv(wpad, bpad, knobs.oc_block, dot), *shifts, res, out)
    for b in range(2):
        ref = run_cpu_op("qconv2d", [x[b : b + 1], wt, bias, res[b : b + 1]], attrs)
        np.testing.assert_array_equal(out[b : b + 1, pos], ref)


def test_batched_depthwise_is_each_image_s_contract(build, rng):
    c, h, w = 12, 9, 7
    attrs = {**_attrs((2, 1), (1, 1, 1, 0), rng), "group": c}
    x = rng.integers(-128, 128, (2, c, h, w)).astype(np.int8)
    wt = rng.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    bias = rng.integers(-(2**20), 2**20, c).astype(np.int32)
    p = FusedParams.from_attrs(attrs)
    oh, ow = conv_out_hw(h, w, (3, 3), p.strides, p.pads)
    mod = build(*qconv2d_grouped_nchw(c, h, w, c, (3, 3), p, c, batch=2), num_threads=2)
    out = np.zeros((2, c, oh, ow), np.int8)
    mod(x, *pack_qconv_grouped(wt, bias), out)
    for b in range(2):
        np.testing.assert_array_equal(
            out[b : b + 1], run_cpu_op("qconv2d", [x[b : b + 1], wt, bias], attrs)
        )


@pytest.mark.parametrize("width", [9, 35])
@pytest.mark.parametrize(("block", "lanes"), [(None, 8), (8, 8), (16, 8), (8, 16), (16, 16)])
def test_quantize_and_dequantize_kernels_equal_numpy(block, lanes, width, build, rng):
    """The compiled (de)quantize (NCHW, or the float layers' blocked NCHW{c}c on the float
    side; 20 channels: a padded last block; planes of 45 and 175 pixels, tiles of ``lanes``
    pixels and a tail) are run_cpu_op's bits, ties rounding to even."""
    shape, frac = (2, 20, 5, width), 3
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    x.flat[:6] = np.array([0.5, 1.5, -0.5, -2.5, 1e6, -1e6], np.float32) / 2**frac  # ties, clips
    attrs = {"frac_bits": frac}
    if block:
        attrs.update(src_block=block, channels=shape[1])
        pad = -shape[1] % block
        xb = np.pad(x, [(0, 0), (0, pad), (0, 0), (0, 0)])
        xb = xb.reshape(2, -1, block, 5, width).transpose(0, 1, 3, 4, 2).copy()
    else:
        xb = x
    q = run_cpu_op("quantize", [xb], attrs)
    np.testing.assert_array_equal(q, run_cpu_op("quantize", [x], {"frac_bits": frac}))
    mod = build(*quantize_nchw(shape, frac, block, vector_lanes=lanes), num_threads=2)
    out = np.zeros(mod.func.params[-1].shape, np.int8)
    mod(xb.reshape(mod.func.params[0].shape), out)
    np.testing.assert_array_equal(out.reshape(2, -1, 5, width)[:, : shape[1]], q)
    assert list(q.ravel()[:4]) == [0, 2, 0, -2] and list(q.ravel()[4:6]) == [127, -128]
    dattrs = {"frac_bits": frac, **({"dst_block": block} if block else {})}
    d = run_cpu_op("dequantize", [q], dattrs)
    mod = build(*dequantize_nchw(shape, frac, block, vector_lanes=lanes), num_threads=2)
    dout = np.full(d.shape, np.nan, np.float32)
    mod(q.reshape(mod.func.params[0].shape), dout.reshape(mod.func.params[-1].shape))
    np.testing.assert_array_equal(dout, d)  # padded channels zero in both


def test_knobs_tile_the_layer():
    # pmaddwd: two registers per accumulator (its product), so 7 accumulators on AVX2
    assert Int8ConvKnobs.for_layer(64, 56) == Int8ConvKnobs(8, 7)
    vnni = Int8ConvKnobs.for_layer(64, 56, dot="vpdpbusd")  # accumulates in place: 14
    assert vnni == Int8ConvKnobs(16, 7, dot="vpdpbusd", vector_lanes=8)
    assert Int8ConvKnobs.for_layer(24, 7) == Int8ConvKnobs(8, 7)
    assert Int8ConvKnobs.for_layer(12, 7) == Int8ConvKnobs(4, 7)  # 12: SSE-wide vectors of 4
    assert Int8ConvKnobs.for_layer(10, 7).oc_block == 1  # 10 is no multiple of 4
    assert Int8ConvKnobs.for_layer(512, 1) == Int8ConvKnobs(16, 1, vector_lanes=8)  # a dense
    # the fewest tiles per row, the narrowest such: 27 columns as 7 + 7 + 7 + 6 (not 9 x 3)
    assert Int8ConvKnobs.for_layer(8, 27) == Int8ConvKnobs(8, 7)
    wide = Int8ConvKnobs.for_layer(64, 14, lanes=16, registers=32)
    assert wide == Int8ConvKnobs(32, 7, vector_lanes=16)  # ties: more channels per broadcast
    with pytest.raises(Int8TemplateError, match="vector_lanes 8 must divide oc_block 12"):
        Int8ConvKnobs(12, 1, vector_lanes=8)
    with pytest.raises(ValueError, match="oc_block 8 must divide the 12 output channels"):
        qconv2d_nchw(4, 5, 5, 12, (3, 3), FusedParams(0), knobs=Int8ConvKnobs(8, 1))


def test_offset_and_correction_are_exact_in_numpy(rng):
    """``sum (x + 128) * w - 128 * sum w == sum x * w`` modulo 2**32, the identity the kernel's
    unsigned input (and VNNI's u8 x s8 vpdpbusd) rests on, with the zero padding as u = 128."""
    x = rng.integers(-128, 128, (4096, 4)).astype(np.int64)
    w = rng.integers(-128, 128, (4096, 4)).astype(np.int64)
    bias = rng.integers(-(2**31), 2**31, 4).astype(np.int32)
    u = x + U8_OFFSET
    assert u.min() >= 0 and u.max() <= 255
    # the sum of 4 u8 x s8 products (one vpdpbusd lane) fits int32 without saturation
    assert 4 * 255 * 128 < 2**31
    _, corrected = pack_qconv(w.T.reshape(4, 4096, 1, 1).astype(np.int8), bias, 1)
    got = wrap_int32((u * w).sum(axis=0) + corrected.astype(np.int64))
    want = wrap_int32((x * w).sum(axis=0) + bias.astype(np.int64))
    np.testing.assert_array_equal(got, want)


def test_vpdpbusd_lanes_emulated_in_numpy(rng):
    """pack_qconv's vpdpbusd weight lanes, multiplied bytewise (u8 input x s8 weight, four per
    lane, what the instruction does) with the offset input and summed, equal the contract."""
    c, o = 10, 8  # 10 channels: the last lane is half padding
    x = rng.integers(-128, 128, c).astype(np.int64)
    w = rng.integers(-128, 128, (o, c, 1, 1)).astype(np.int8)
    bias = rng.integers(-(2**31), 2**31, o).astype(np.int32)
    lanes, corrected = pack_qconv(w, bias, o, "vpdpbusd")  # [1, 3, 1, 1, 8]
    s8 = lanes.reshape(3, o).view(np.int8).reshape(3, o, 4)  # little-endian bytes j = 0..3
    u = np.full(12, U8_OFFSET, np.int64)
    u[:c] += x
    got = wrap_int32((u.reshape(3, 1, 4) * s8).sum(axis=(0, 2)) + corrected)
    want = wrap_int32(w.reshape(o, c).astype(np.int64) @ x + bias)
    np.testing.assert_array_equal(got, want)


def _count(asm: str, op: str) -> int:
    return len(re.findall(rf"^\s+{op}\s", asm, re.M))


def _layer():
    return qconv2d_nchw(64, 14, 14, 64, (3, 3), FusedParams(9, 0, 127, pads=(1, 1, 1, 1)))


def test_pmaddubsw_is_exact_at_its_bound(build, rng):
    """The unsigned form on inputs at its bound: x = 127 against weights -128 and 127 makes
    every byte pair of ``pmaddubsw`` sum to -32512 or 32258, the int16 extremes it meets
    (exact: no saturation), here and under ``PYVTA_CPU_FEATURES=avx2`` (where it runs as
    vpmaddubsw); with a residual, stride 2 and 13 channels (a half-empty last quad)."""
    c, h, w, o = 13, 9, 10, 16
    attrs = {**_attrs((2, 2), (1, 1, 1, 1), rng), "clip_lo": -128, "clip_hi": 127, "shift": 14}
    x = np.full((1, c, h, w), 127, np.int8)
    x[0, :, ::3] = rng.integers(0, 128, (c, 3, w))
    wt = np.where(rng.integers(0, 2, (o, c, 3, 3)) == 1, 127, -128).astype(np.int8)
    wt[: o // 2] = -128  # these channels' every pair: 2 * 127 * -128
    bias = rng.integers(-(2**20), 2**20, o).astype(np.int32)
    p = FusedParams.from_attrs(attrs)
    oh, ow = conv_out_hw(h, w, (3, 3), p.strides, p.pads)
    res = rng.integers(-128, 128, (1, o, oh, ow)).astype(np.int8)
    knobs = Int8ConvKnobs.for_layer(o, ow, dot="pmaddubsw")
    mod = build(*qconv2d_nchw(c, h, w, o, (3, 3), p, True, knobs), num_threads=2)
    out = np.zeros((1, o, oh, ow), np.int8)
    mod(x, *pack_qconv(wt, bias, knobs.oc_block, "pmaddubsw"), res, out)
    ref = run_cpu_op("qconv2d", [x, wt, bias, res], attrs)
    assert len(np.unique(ref)) > 8  # the shift leaves the sums visible
    np.testing.assert_array_equal(out, ref)


def _pair_bound_layer(rng, over: bool):
    """16 channels (two lane pairs) x 3x3 with every int16 sum of the ``pmaddubsw_x2`` form
    at its bound: weights 64 and 65 (half the output channels negated) put four products of
    x = 127 at +-127 * 258 = +-32766; ``over``: one weight 66, a sum of 32893 (past int16)."""
    c, h, w, o = 16, 7, 9, 16
    attrs = {**_attrs((1, 1), (1, 1, 1, 1), rng), "clip_lo": -128, "clip_hi": 127, "shift": 14}
    x = np.full((2, c, h, w), 127, np.int8)
    x[:, :, ::3] = rng.integers(0, 128, (2, c, 3, w))
    wt = np.where(np.arange(c) % 2 == 0, 64, 65).astype(np.int8)[None, :, None, None]
    wt = np.broadcast_to(wt, (o, c, 3, 3)).copy()
    wt[o // 2 :] *= -1
    if over:
        wt[3, 9, 1, 1] = 66
    return c, h, w, o, attrs, x, wt


@pytest.mark.parametrize("features", [None, "avx2"])
def test_pmaddubsw_x2_is_exact_at_its_bound(features, build, rng):
    """The pair form with every int16 sum at +-32766 (the largest sums_fit_int16 accepts: two
    pmaddubsw results added in int16, then vpmaddwd by ones): bit-exact on this host and as
    AVX2 code (vpmaddubsw, vpaddw: ``features``), batch 2 with a residual."""
    from pyvta.compiler.backend.llvm.target import CpuFeatureError

    if features is not None:
        try:
            CpuTarget.host(2, features)
        except CpuFeatureError:
            pytest.skip(f"needs a CPU that runs the {features} feature level")
    c, h, w, o, attrs, x, wt = _pair_bound_layer(rng, over=False)
    assert sums_fit_int16(wt, 2) and sum_dot_form("pmaddubsw", wt) == "pmaddubsw_x2"
    bias = rng.integers(-(2**20), 2**20, o).astype(np.int32)
    p = FusedParams.from_attrs(attrs)
    oh, ow = conv_out_hw(h, w, (3, 3), p.strides, p.pads)
    res = rng.integers(-128, 128, (2, o, oh, ow)).astype(np.int8)
    knobs = Int8ConvKnobs.for_layer(o, ow, dot="pmaddubsw_x2")
    sch, args = qconv2d_nchw(c, h, w, o, (3, 3), p, True, knobs, batch=2)
    mod = build(sch, args, num_threads=2, cpu_features=features)
    out = np.zeros((2, o, oh, ow), np.int8)
    mod(x, *pack_qconv(wt, bias, knobs.oc_block, "pmaddubsw_x2"), res, out)
    for b in range(2):
        ref = run_cpu_op("qconv2d", [x[b : b + 1], wt, bias, res[b : b + 1]], attrs)
        assert len(np.unique(ref)) > 8  # the shift leaves the sums visible
        np.testing.assert_array_equal(out[b : b + 1], ref)


def test_pmaddubsw_x2_refuses_weights_past_its_bound(build, rng):
    """One int16 sum past the bound (127 * 259): sums_fit_int16 says no, pack_qconv refuses
    the pair form and sum_dot_form keeps ``pmaddubsw``; run anyway as AVX2 code (the weights
    packed as the plain form, the same layout for 16 channels) the sum wraps: wrong outputs,
    the channel's only."""
    from pyvta.compiler.backend.llvm.target import CpuFeatureError

    try:
        CpuTarget.host(2, "avx2")
    except CpuFeatureError:
        pytest.skip("needs a CPU that runs the avx2 feature level")
    c, h, w, o, attrs, x, wt = _pair_bound_layer(rng, over=True)
    assert not sums_fit_int16(wt, 2) and sum_dot_form("pmaddubsw", wt) == "pmaddubsw"
    bias = np.zeros(o, np.int32)
    with pytest.raises(Int8TemplateError, match="sums_fit_int16"):
        pack_qconv(wt, bias, 8, "pmaddubsw_x2")
    p = FusedParams.from_attrs(attrs)
    oh, ow = conv_out_hw(h, w, (3, 3), p.strides, p.pads)
    knobs = Int8ConvKnobs.for_layer(o, ow, dot="pmaddubsw_x2")
    mod = build(*qconv2d_nchw(c, h, w, o, (3, 3), p, knobs=knobs), cpu_features="avx2")
    out = np.zeros((1, o, oh, ow), np.int8)
    mod(x[:1], *pack_qconv(wt, bias, knobs.oc_block, "pmaddubsw"), out)
    ref = run_cpu_op("qconv2d", [x[:1], wt, bias], attrs)
    wrong = np.argwhere(out != ref)
    assert len(wrong) and set(wrong[:, 1]) == {3}


def test_pair_form_where_it_pays():
    """Two lanes per step pay from 2 lanes (8 channels; 3 multiplies for 2 lanes' 4), not for
    1 or 3 lanes (a padded lane each) nor 1x1 kernels; only for the pmaddubsw form."""
    small = np.ones((8, 40, 3, 3), np.int8)
    assert sum_dot_form("pmaddubsw", small) == "pmaddubsw_x2"
    assert sum_dot_form("pmaddubsw", small[:, :5]) == "pmaddubsw_x2"  # 2 lanes
    assert sum_dot_form("pmaddubsw", small[:, :4]) == "pmaddubsw"  # 1 lane
    assert sum_dot_form("pmaddubsw", small[:, :12]) == "pmaddubsw"  # 3 lanes
    assert sum_dot_form("pmaddubsw", small[:, :, :1, :1]) == "pmaddubsw"  # 1x1
    assert sum_dot_form("vpdpbusd", small) == "vpdpbusd"
    assert sum_dot_form("pmaddwd", small) == "pmaddwd"


def test_avx2_pair_form_adds_products_in_int16():
    """The pair form on AVX2: two vpmaddubsw per vpaddw and vpmaddwd by ones."""
    params = FusedParams(9, 0, 127, pads=(1, 1, 1, 1))
    knobs = Int8ConvKnobs(8, 4, dot="pmaddubsw_x2")
    asm = assembly_for(*qconv2d_nchw(64, 14, 14, 64, (3, 3), params, knobs=knobs),
                       "haswell", "+avx2,+fma,+sse2", 256)  # fmt: skip
    mub, addw, wd = (_count(asm, op) for op in ("vpmaddubsw", "vpaddw", "vpmaddwd"))
    assert addw >= 4 and mub == 2 * addw and wd == addw


def test_avx2_lowering_uses_vpmaddwd():
    """The u8 x s8 products are vpmaddwd, not the int32 multiply vpmulld."""
    asm = assembly_for(*_layer(), "haswell", "+avx2,+fma,+sse2", 256)
    assert _count(asm, "vpmaddwd") >= 7  # one per column of the 7-wide tile, at least
    assert _count(asm, "vpmulld") == 0


def test_avx2_unsigned_form_uses_vpmaddubsw():
    """The unsigned form without VNNI: a vpmaddubsw (byte pairs) and a vpmaddwd by ones per
    column and step, four channels per broadcast lane; with VNNI one vpdpbusd."""
    params = FusedParams(9, 0, 127, pads=(1, 1, 1, 1))
    sch, args = qconv2d_nchw(
        64, 14, 14, 64, (3, 3), params, knobs=Int8ConvKnobs(8, 7, dot="pmaddubsw")
    )
    asm = assembly_for(sch, args, "haswell", "+avx2,+fma,+sse2", 256)
    assert _count(asm, "vpmaddubsw") >= 7 and _count(asm, "vpmaddwd") >= 7
    assert _count(asm, "vpmulld") == 0
    asm = assembly_for(*_vnni_layer(16, "pmaddubsw"), *AVX512_VNNI)
    assert _count(asm, "vpdpbusd") >= 7 and _count(asm, "vpmaddubsw") == 0


def _vnni_layer(oc_block: int, dot: str):
    params = FusedParams(9, 0, 127, pads=(1, 1, 1, 1))
    return qconv2d_nchw(64, 14, 14, 64, (3, 3), params, knobs=Int8ConvKnobs(oc_block, 7, dot=dot))


AVX512_VNNI = ("icelake-server", "+avx512f,+avx512vnni,+avx512bw,+avx512vl", 512)
AVX_VNNI = ("alderlake", "+avx2,+sse2,+avxvnni", 256)


def test_vnni_lowering_uses_vpdpbusd():
    """Compiled, not run (this host may lack VNNI): the quad form is one vpdpbusd per column
    and reduction step, accumulating in place (no vpaddd beside it), on zmm with AVX-512 VNNI
    and as the VEX encoding with AVX-VNNI."""
    asm = assembly_for(*_vnni_layer(16, "vpdpbusd"), *AVX512_VNNI)
    assert _count(asm, "vpdpbusd") >= 7 and re.search(r"vpdpbusd\s+%zmm", asm)
    assert _count(asm, "vpmaddwd") == 0 and _count(asm, "vpaddd") < _count(asm, "vpdpbusd")
    asm = assembly_for(*_vnni_layer(8, "vpdpbusd"), *AVX_VNNI)
    assert len(re.findall(r"\{vex\}\s+vpdpbusd\s+%ymm", asm)) >= 7


def test_vnni_fuses_the_pair_form_too():
    """The pair form on AVX-512 VNNI: vpmaddwd + vpaddd become vpdpwssd."""
    asm = assembly_for(*_vnni_layer(16, "pmaddwd"), *AVX512_VNNI)
    assert _count(asm, "vpdpwssd") >= 7 and _count(asm, "vpmaddwd") == 0


def test_dot_isa_from_features():
    assert dot_isa({"avx2": True, "avx512vnni": True, "avx512bw": True}) == "avx512vnni"
    assert dot_isa({"avx2": True, "avxvnni": True}) == "avxvnni"
    assert dot_isa({"avx2": True}) == "avx2"
    assert dot_isa({}) == "scalar"
    assert [dot_form(i) for i in ("avx512vnni", "avxvnni", "avx2")] == ["vpdpbusd"] * 2 + [
        "pmaddwd"
    ]
    # an input known 0..127: pmaddubsw on AVX2 (AVX-512 without VNNI too), VNNI vpdpbusd on
    # the input not offset
    assert [dot_form(i, nonnegative=True) for i in ("avx512vnni", "avx2", "scalar")] == [
        "vpdpbusd_u7", "pmaddubsw", "pmaddwd"
    ]  # fmt: skip
    host = dot_isa(CpuTarget.host(1).feature_dict)
    print(f"host int8 dot products: {host}")


@pytest.mark.parametrize("pairs", [2, 3])
@pytest.mark.parametrize("features", [None, "avx2"])
def test_dot_u7s8x4_sum_of_pairs(pairs, features, build, rng):
    """te.dot_u7s8x4_sum of 2 and 3 operand pairs on 8-lane vectors (vpmaddubsw each, an
    int16 sum, vpmaddwd by ones as AVX2 code: ``features``) and on the tail's scalars: each
    int32 lane the sum of its bytes' products, with every int16 sum at its bound."""
    from pyvta.compiler.backend.llvm.target import CpuFeatureError
    from pyvta.compiler.schedule.schedule import create_schedule
    from pyvta.compiler.te.expr_ops import dot_u7s8x4_sum
    from pyvta.compiler.te.tensor import compute, placeholder

    if features is not None:
        try:
            CpuTarget.host(1, features)
        except CpuFeatureError:
            pytest.skip(f"needs a CPU that runs the {features} feature level")
    n = 21  # two vectors of 8 and 5 scalars
    ps = [placeholder((n,), "int32", f"p{k}") for k in range(pairs)]
    qs = [placeholder((n,), "int32", f"q{k}") for k in range(pairs)]
    out = compute(
        (n,), lambda i: dot_u7s8x4_sum(*[t[i] for pq in zip(ps, qs, strict=True) for t in pq])
    )
    s = create_schedule(out)
    _, xi = s[out].split("i", 8)
    s[out].vectorize(xi)
    mod = build(s, [*ps, *qs, out], cpu_features=features)
    u = rng.integers(0, 128, (pairs, n, 4)).astype(np.uint8)
    u[:, :4] = 127
    limit = (2**15 - 1) // (127 * 2 * pairs)  # every int16 sum within the bound
    w = rng.integers(-limit, limit + 1, (pairs, n, 4)).astype(np.int8)
    w[:, 0], w[:, 1] = limit, -limit  # lanes at it
    got = np.zeros(n, np.int32)
    mod(*[u[k].view(np.int32).ravel() for k in range(pairs)],
        *[w[k].view(np.int32).ravel() for k in range(pairs)], got)  # fmt: skip
    want = (u.astype(np.int64) * w).sum(axis=(0, 2))
    np.testing.assert_array_equal(got, want)
