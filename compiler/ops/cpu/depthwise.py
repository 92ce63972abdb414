"""Depthwise conv (group = C) in the blocked NCHW{c}c layout, float32 batch 1, fused epilogue.

data ``[1, C/c, H, W, c]``, weight ``[C/c, KH, KW, c]`` (:func:`pack_depthwise_weights`),
bias ``[C]``, out (and residual) ``[1, C/c, OH, OW, c]``.

The schedule never materialises a padded copy of the input: a register tile of ``ow_block``
output columns x the channel block (``c / lanes`` vectors each) reads the input directly, a
tap outside it reading zero (a select on the tap's row and column, the read clamped into the
input). For every kernel tap one weight vector is loaded and FMA'd into every column's
accumulator, the columns unrolled; the epilogue (bias, residual, clip) runs on the tile's
accumulators as they are stored. A task is one channel block x ``y_block`` output rows. On
AVX2 (MobileNet, one thread, in the network) this ran the 112- to 28-wide layers 1.1-1.6x
faster than padding each task's input rows into a buffer first (at 112 x 112 the rows of a
task outgrew L1) and storing the accumulators for a separate epilogue pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import maximum, minimum, select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum

SPARE_REGISTERS = 2  # vector registers a tile leaves for the weight and input vectors
# Accumulator vectors of the untuned tile, at most: 4 columns x 16 channels on AVX2. With the
# input read through a select, 7 x 16 ran 5-15% slower than 4 x 16 (MobileNet's 112- to
# 28-wide layers, AVX2, one thread, min of 30); 3 to 5 columns were within the noise.
DEFAULT_TILE_VECTORS = 8
MAX_Y_BLOCK = 4  # output rows per task, at most (dividing the height: no partial block)


def pack_depthwise_weights(kernel: np.ndarray, block: int) -> np.ndarray:
    """``[C, 1, KH, KW]`` -> ``[C/c, KH, KW, c]`` (float32, contiguous)."""
    c, _, kh, kw = kernel.shape
    w = kernel.astype(np.float32).reshape(c // block, block, kh, kw)
    return np.ascontiguousarray(w.transpose(0, 2, 3, 1))


@dataclass(frozen=True)
class DepthwiseKnobs:
    """``ow_block`` output columns per register tile (at most the output width; the row's
    last tile takes the rest); ``y_block`` output rows per task; ``parallel`` tasks across
    threads."""

    ow_block: int = 4
    y_block: int = 1
    parallel: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def for_target(target, out_hw: tuple[int, int], block: int) -> DepthwiseKnobs:
        """The widest tile of at most ``DEFAULT_TILE_VECTORS`` accumulators that fit the
        vector registers (less ``SPARE_REGISTERS``), in the fewest tiles per row (7 columns as
        4 + 3); the most rows per task dividing the height up to ``MAX_Y_BLOCK``."""
        oh, ow = out_hw
        vecs = max(1, block // target.vector_lanes("float32"))
        regs = min(target.vector_registers - SPARE_REGISTERS, DEFAULT_TILE_VECTORS)
        room = max(1, regs // vecs)
        tiles = -(-ow // min(room, ow))
        rows = max(y for y in range(1, min(oh, MAX_Y_BLOCK) + 1) if oh % y == 0)
        return DepthwiseKnobs(-(-ow // tiles), rows)


def depthwise_nchwc(
    c, h, w, kernel, strides, pads, block, knobs=None, epilogue=None, dilations=(1, 1)
):
    """``(sch, [data, weight, bias, (residual,) out])`` (see the module docstring);
    ``dilations`` (rows, columns) space the kernel's taps."""
    from pyvta.compiler.ops.cpu.nchwc import Epilogue, conv_output_hw

    knobs = knobs or DepthwiseKnobs()
    epilogue = epilogue or Epilogue()
    if c % block:
        raise ValueError(f"depthwise: {c} channels must be a multiple of the block {block}")
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    t, lft, b, r = pads
    oh, ow = conv_output_hw(h, w, kernel, strides, pads, dilations)
    owb, yb = knobs.ow_block, knobs.y_block
    if not (0 < owb <= ow and 0 < yb <= oh):
        raise ValueError(
            f"depthwise: ow_block {owb} must be in 1..{ow} (the output width), y_block {yb}"
            f" in 1..{oh} (the output height)"
        )
    cb = c // block
    data = placeholder((1, cb, h, w, block), "float32", "data")
    wgt = placeholder((cb, kh, kw, block), "float32", "weight")
    bias = placeholder((c,), "float32", "bias")
    args = [data, wgt, bias]
    res = None
    if epilogue.residual:
        res = placeholder((1, cb, oh, ow, block), "float32", "residual")
        args.append(res)

    def pad_fn(n, f, y, x, ci):  # the read clamped into the input: a select reads both sides
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        yy = minimum(maximum(y - t, const(0)), const(h - 1))
        xx = minimum(maximum(x - lft, const(0)), const(w - 1))
        return select(inside, data[n, f, yy, xx, ci], const(0.0))

    dp = compute((1, cb, h + t + b, w + lft + r, block), pad_fn, name="data.pad")
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    acc = compute(
        (1, cb, oh, ow, block),
        lambda n, f, y, x, fi: te_sum(
            dp[n, f, y * sh + ry * dh, x * sw + rx * dw, fi] * wgt[f, ry, rx, fi], [ry, rx]
        ),
        name="acc",
    )

    def out_fn(n, f, y, x, fi):
        rv = res[n, f, y, x, fi] if res is not None else None
        return epilogue.apply(acc[n, f, y, x, fi], bias[f * block + fi], rv)

    out = compute(acc.shape, out_fn, name="out")
    s = create_schedule(out)
    yo, yi = s[out].split("y", yb)
    xo, xi = s[out].split("x", owb)
    s[out].reorder("n", "f", yo, yi, xo, xi, "fi")
    s[out].unroll(xi)
    s[out].vectorize("fi")
    task = s[out].fuse("f", yo)
    s[acc].set_scope("local")
    s[acc].compute_at(s[out], xo)  # the tile's accumulators: the epilogue stores them
    s[acc].reorder("n", "f", "y", "ry", "rx", "x", "fi")  # a weight vector serves the tile
    for a in ("ry", "rx", "x"):
        s[acc].unroll(a)
    s[acc].vectorize("fi")
    s[dp].compute_inline()
    if knobs.parallel:
        s[out].parallel(task)
    return s, args + [out]
