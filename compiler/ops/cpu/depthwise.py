"""Depthwise conv (group = C) in the blocked NCHW{c}c layout, float32 batch 1, fused epilogue;
also a grouped conv of narrow groups (``group_width`` g input and g output channels each, g
dividing the block: every output channel reads g channels of its own block).

data ``[1, C/c, H, W, c]``, weight ``[C/c, KH, KW, c]`` (:func:`pack_depthwise_weights`; with
groups ``[C/c, KH, KW, g, c]``), bias ``[C]``, out (and residual) ``[1, C/c, OH, OW, c]``.

The schedule never materialises a padded copy of the input: a register tile of ``ow_block``
output columns x the channel block (``c / lanes`` vectors each) reads the input directly, a
tap outside it reading zero (a select on the tap's row and column, the read clamped into the
input). For every kernel tap one weight vector is loaded and FMA'd into every column's
accumulator, the columns unrolled; the epilogue (bias, residual, clip) runs on the tile's
accumulators as they are stored. A task is one channel block x ``y_block`` output rows. On
AVX2 (MobileNet, one thread, in the network) this ran the 112- to 28-wide layers 1.1-1.6x
faster than padding each task's input rows into a buffer first (at 112 x 112 the rows of a
task outgrew L1) and storing the accumulators for a separate epilogue pass.

With groups, output lane ``k`` reads input lane ``(k // g) * g + j`` for each of its group's
``j``: one load of the input vector, a shuffle per ``j`` (``codegen``'s row gather), and g FMAs
where the direct template, on block-diagonal weights, does ``c`` (three of four on zeros for
ResNeXt's groups of 4 in blocks of 16).
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
# With groups of 4 or more (g shuffles and FMAs per column and tap, g weight vectors live), at
# most 4 columns: ResNeXt's 3x3 layers of groups of 4 (56 x 56) and 8 (28 x 28, and 56 x 56
# stride 2), Zen 5, 2 threads, kernel alone: 4 columns 0.100, 0.120, 0.123 ms; the 8-vector
# rule's 8, 7, 7 columns 0.106, 0.175, 0.167 ms (groups of 2: 8 columns 0.047 ms, 4 0.058).
GROUP_TILE_VECTORS = 4
GROUP_TILE_MIN_WIDTH = 4
MIN_GROUP_TILE_COLUMNS = 2  # columns a tile of groups must have room for (``group_tile_fits``)
MAX_Y_BLOCK = 4  # output rows per task, at most (dividing the height: no partial block)


def pack_depthwise_weights(kernel: np.ndarray, block: int) -> np.ndarray:
    """``[C, g, KH, KW]`` -> ``[C/c, KH, KW, c]`` (g = 1) or ``[C/c, KH, KW, g, c]`` (float32,
    contiguous)."""
    c, g, kh, kw = kernel.shape
    w = kernel.astype(np.float32).reshape(c // block, block, g, kh, kw)
    if g == 1:
        return np.ascontiguousarray(w[:, :, 0].transpose(0, 2, 3, 1))
    return np.ascontiguousarray(w.transpose(0, 3, 4, 2, 1))


def group_weights(dense: np.ndarray, group_width: int) -> np.ndarray:
    """A grouped conv's block-diagonal ``[O, C, KH, KW]`` weights (groups of ``group_width``
    input and output channels) -> its own ``[O, group_width, KH, KW]``."""
    o = dense.shape[0]
    first = (np.arange(o) // group_width) * group_width
    cols = first[:, None] + np.arange(group_width)[None, :]
    return dense[np.arange(o)[:, None], cols]


def spare_registers(vecs: int, group_width: int) -> int:
    """Vector registers a tile leaves besides its accumulators: ``SPARE_REGISTERS``, and with
    groups their ``group_width`` weight vectors of ``vecs`` registers each, live across the
    tile's columns."""
    return SPARE_REGISTERS + (group_width * vecs if group_width > 1 else 0)


def group_tile_fits(target, block: int, group_width: int) -> bool:
    """Whether a tile of groups of ``group_width`` leaves ``MIN_GROUP_TILE_COLUMNS`` columns of
    accumulators beside its weight vectors and the spare ones (``spare_registers``): else the
    untuned choice is the direct template. With AVX2's 16 registers and blocks of two vectors,
    groups of 8 take them all: ResNeXt-50's stage-2 layer (256 channels, groups of 8, 28 x 28;
    Zen 5 masked to AVX2, 2 threads, kernels alone) ran 0.269 ms here against 0.246 direct,
    where groups of 4 (stage 1) ran 0.201 against 0.486."""
    vecs = max(1, block // target.vector_lanes("float32"))
    free = target.vector_registers - spare_registers(vecs, group_width)
    return free >= MIN_GROUP_TILE_COLUMNS * vecs


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
    def for_target(
        target, out_hw: tuple[int, int], block: int, group_width: int = 1
    ) -> DepthwiseKnobs:
        """The widest tile of at most ``DEFAULT_TILE_VECTORS`` accumulators (groups of
        ``GROUP_TILE_MIN_WIDTH`` or more: ``GROUP_TILE_VECTORS``) that fit the vector
        registers (less ``spare_registers``), in the fewest tiles per row (7 columns as 4 +
        3); the most rows per task dividing the height up to ``MAX_Y_BLOCK``."""
        oh, ow = out_hw
        vecs = max(1, block // target.vector_lanes("float32"))
        most = GROUP_TILE_VECTORS if group_width >= GROUP_TILE_MIN_WIDTH else DEFAULT_TILE_VECTORS
        regs = min(target.vector_registers - spare_registers(vecs, group_width), most)
        room = max(1, regs // vecs)
        tiles = -(-ow // min(room, ow))
        rows = max(y for y in range(1, min(oh, MAX_Y_BLOCK) + 1) if oh % y == 0)
        return DepthwiseKnobs(-(-ow // tiles), rows)


def depthwise_nchwc(
    c, h, w, kernel, strides, pads, block, knobs=None, epilogue=None, dilations=(1, 1),
    group_width=1,
):  # fmt: skip
    """``(sch, [data, weight, bias, (residual,) out])`` (see the module docstring);
    ``dilations`` (rows, columns) space the kernel's taps; ``group_width`` the channels of a
    group (1: depthwise)."""
    from pyvta.compiler.ops.cpu.nchwc import Epilogue, conv_output_hw

    knobs = knobs or DepthwiseKnobs()
    epilogue = epilogue or Epilogue()
    if c % block:
        raise ValueError(f"depthwise: {c} channels must be a multiple of the block {block}")
    g = group_width
    if g < 1 or block % g:
        raise ValueError(f"depthwise: group width {g} must divide the block {block}")
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
    wgt = placeholder(
        (cb, kh, kw, block) if g == 1 else (cb, kh, kw, g, block), "float32", "weight"
    )
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
    if g == 1:

        def acc_fn(n, f, y, x, fi):
            return te_sum(
                dp[n, f, y * sh + ry * dh, x * sw + rx * dw, fi] * wgt[f, ry, rx, fi], [ry, rx]
            )

    else:
        rj = reduce_axis(g, "rj")

        def acc_fn(n, f, y, x, fi):  # lane fi reads channel j of its group
            yy, xx = y * sh + ry * dh, x * sw + rx * dw
            read = dp[n, f, yy, xx, (fi // g) * g + rj] * wgt[f, ry, rx, rj, fi]
            return te_sum(read, [ry, rx, rj])

    acc = compute((1, cb, oh, ow, block), acc_fn, name="acc")

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
    inner = ("x", "rj") if g > 1 else ("x",)  # a weight vector (g of them) serves the tile
    s[acc].reorder("n", "f", "y", "ry", "rx", *inner, "fi")
    for a in ("ry", "rx", *inner):
        s[acc].unroll(a)
    s[acc].vectorize("fi")
    s[dp].compute_inline()
    if knobs.parallel:
        s[out].parallel(task)
    return s, args + [out]
