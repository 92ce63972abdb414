"""Scale kernels of the int8 CPU path: quantize (float32 NCHW -> int8, optionally into channel
blocks) and dequantize (int8 -> float32), the borders between float and int8 layers.

Split from :mod:`compiler.ops.cpu.int8` (the int8 conv templates): these kernels share no code
with the convs, only the int8 value range.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import const
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import cast, maximum, minimum, select
from pyvta.compiler.te.tensor import compute, placeholder

_ROUND_MAGIC = 12582912.0


def _elementwise_nchw(shape, data, fn, parallel: bool):
    """``(sch, [data, out])``: ``out[b, ch, y, x] = fn(data[b, ch, y, x])`` over NCHW ``shape``,
    vectorized along the rows, images x channels x rows split over the threads (``parallel``)."""
    out = compute(shape, lambda b, ch, y, x: fn(data[b, ch, y, x]), name="out")
    s = create_schedule(out)
    s[out].vectorize("x")
    if parallel:
        s[out].parallel(s[out].fuse(s[out].fuse("b", "ch"), "y"))
    return s, [data, out]


def quantize_nchw(
    shape,
    frac_bits: int,
    src_block: int | None = None,
    parallel: bool = True,
    vector_lanes: int = 8,
):
    """``(sch, [data, out])``: the graph's ``quantize`` as a kernel, bit-exact with
    :func:`runtime.cpu_ops.quantize` (``int8(clip(round_half_even(x * 2**frac_bits), -128,
    127))``; clipping first gives the same bits, round being monotone and -128, 127 whole) on
    float32 ``data`` ``[N, C, H, W]`` into int8 ``out`` ``[N, C, H, W]``; or on its
    NCHW{src_block}c form (the float layers' blocked layout, read as ``[N, C/b, H * W, b]``)
    into ``out`` ``[N, C/b, b, H * W]`` (``b = src_block``, ``C`` rounded up to it: the bytes of
    ``[N, C, H, W]``; the caller keeps the first ``C`` channels when they are padded), tiles of
    ``vector_lanes`` pixels (the target's float32 vector).
    Non-finite inputs are not checked here (the executor refuses them at an int8 model's
    inputs)."""

    n, c, h, w = shape
    scale = const(float(2.0**frac_bits), "float32")

    def q(v):
        v = minimum(maximum(v * scale, const(-128.0, "float32")), const(127.0, "float32"))
        magic = const(_ROUND_MAGIC, "float32")
        return cast("int8", cast("int32", (v + magic) - magic))

    if src_block is None:
        return _elementwise_nchw(shape, placeholder(shape, "float32", "data"), q, parallel)
    blk, cb = src_block, -(-c // src_block)
    # the image's rows as one axis of H * W pixels: a blocked pixel is a row of ``blk`` floats,
    # its channels the columns of the output's planes; one float32 vector of pixels
    # (``vector_lanes``) x the block's channels a tile, a transpose in registers (codegen's
    # column loads: one load of the tile's rows for all channels), one scalar tail per plane
    # (not per image row). Tiles of 4 / 8 / 16 pixels, one thread: AVX2 8 fastest (a Zen 5,
    # [4, 64, 29, 29] b16 47 / 43 / 53 us), AVX-512 16 (47 / 38 / 35 us; b8 [4, 24, 28, 28]
    # 14 / 8.3 / 6.2 us)
    data = placeholder((n, cb, h * w, blk), "float32", "data")
    out = compute((n, cb, blk, h * w), lambda b, co, ci, p: q(data[b, co, p, ci]), name="out")
    s = create_schedule(out)
    po, pi = s[out].split("p", vector_lanes)
    s[out].reorder("b", "co", po, "ci", pi)
    s[out].unroll("ci")
    s[out].vectorize(pi)
    if parallel:
        # images x channel blocks only: with the pixel tiles fused in, their tail guard is no
        # longer affine in a loop of its own, stays in every tile and keeps it scalar
        # (net25's [4, 64, 29, 29] quantize in the network, one thread: 0.086 ms, 0.052 so)
        s[out].parallel(s[out].fuse("b", "co"))
    return s, [data, out]


def dequantize_nchw(
    shape,
    frac_bits: int,
    dst_block: int | None = None,
    parallel: bool = True,
    vector_lanes: int = 8,
):
    """``(sch, [data, out])``: the graph's ``dequantize`` (``float32(q) * 2**-frac_bits``,
    :func:`runtime.cpu_ops.dequantize`) of int8 ``data`` ``[N, C, H, W]`` into float32 ``out``
    ``[N, C, H, W]``, or its NCHW{dst_block}c form (padded channels zero; ``data`` read as
    ``[N, C, H * W]``, ``out`` written as ``[N, C/b, H * W, b]``), tiles of ``vector_lanes``
    pixels (the target's float32 vector)."""
    n, c, h, w = shape
    scale = const(float(2.0**-frac_bits), "float32")
    if dst_block is None:
        data = placeholder(shape, "int8", "data")
        return _elementwise_nchw(shape, data, lambda v: cast("float32", v) * scale, parallel)
    blk, cb = dst_block, -(-c // dst_block)
    data = placeholder((n, c, h * w), "int8", "data")

    def f(b, co, p, ci):
        ch = co * blk + ci
        v = cast("float32", data[b, minimum(ch, const(c - 1)), p]) * scale
        return v if c % blk == 0 else select(ch < const(c), v, const(0.0, "float32"))

    # a local tile of vector_lanes pixels x the block's channels, written a vector of pixels
    # per channel (contiguous int8 loads), read a vector of channels per pixel (whole rows of
    # the output): LLVM keeps the tile in registers, a transpose (before: a gather of the
    # block's channels per pixel). One thread, AVX2: [4, 50, 15, 15] b16 13.8 -> 9.8 us,
    # [4, 35, 14, 14] 9.5 -> 5.9, [1, 74, 28, 28] 9.5 -> 11.1; AVX-512 (16 pixels) 21.0 ->
    # 12.0, 12.8 -> 7.6, 16.6 -> 12.5
    tile = compute((n, cb, h * w, blk), f, name="tile")
    out = compute((n, cb, h * w, blk), lambda b, co, p, ci: tile[b, co, p, ci], name="out")
    s = create_schedule(out)
    s[tile].set_scope("local")
    po, pi = s[out].split("p", vector_lanes)
    s[out].reorder("b", "co", po, pi, "ci")
    s[out].unroll(pi)
    s[out].vectorize("ci")
    s[tile].compute_at(s[out], po)
    s[tile].reorder("b", "co", "ci", "p")
    s[tile].unroll("ci")
    s[tile].vectorize("p")
    if parallel:
        s[out].parallel(s[out].fuse("b", "co"))  # (not the pixel tiles: see quantize_nchw)
    return s, [data, out]
