"""Conv2d schedule for the CPU: NCHW in and out, blocked weights, register-tiled accumulators.

Data ``[1, C, H, W]`` is zero-padded in one parallel, vectorized pass (rows as masked vector
loads). Weights arrive packed as OIHW{ic}i{oc}o ``[O/oc, C/ic, KH, KW, ic, oc]`` (constants,
packed once by ``pack_weights``). Each tile of one output row x ``ow_block`` columns x
``oc`` output channels accumulates in a ``local`` NCHW{oc}c buffer held in registers: the
micro-kernel broadcasts one input value and FMAs it into ``oc / lanes`` vector accumulators
per output column (``ow_block`` columns unrolled), then the tile is transposed back to NCHW
``[1, O, OH, OW]``. Tiles (output-channel block x row) run in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.ops.conv2d import _out_size
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum

# A conv whose padding reads as zero (float 0, an int8 input not offset) may skip the taps
# that read it: whole kernel rows with a test per row (no cost measured on 3x3 int8 layers of
# 28 and 56 rows), single columns with a test per column and tap, which costs (int8 pmaddubsw,
# AVX2, a Zen 5, 1 thread, rows only -> rows and columns: a 64 -> 64 7x7 layer of 28 columns,
# 6% of its column taps padded, 1.06x -> 0.99x faster; of 11 columns, 16% padded, 1.21x ->
# 1.36x; a 5x5 dilation-2 layer of 14 columns, 17%, 1.19x -> 1.38x; net27's dilated 7x7 on 13
# columns, 26%, 1.30x -> 1.69x): columns by default where at least this share of their taps is
# padding (a template may ask for more)
COLUMN_SKIP_SHARE = 0.15


def padded_tap_share(size: int, out: int, k: int, stride: int, dil: int, pad: int) -> float:
    """The share of one dimension's ``out * k`` taps (input ``size``, kernel ``k``, ``stride``,
    ``dil``ation, ``pad`` before) that read the padding."""
    inside = sum(0 <= y * stride + r * dil - pad < size for y in range(out) for r in range(k))
    return 1 - inside / (out * k)


def padding_skip(
    y, x, ry, rx, in_hw, out_hw, kernel, strides, pads, dilations=(1, 1),
    column_share: float | None = COLUMN_SKIP_SHARE,
):  # fmt: skip
    """The ``where`` of a conv's reduction (``te.sum``) that skips taps reading the padding,
    for a conv whose padding reads as zero: output row ``y``, column ``x`` (index expressions),
    kernel row ``ry`` and column ``rx`` (reduce axes) of a conv from ``in_hw`` to ``out_hw``
    with pads (top, left, bottom, right); the kernel rows always, the columns where at least
    ``column_share`` of their taps are padding (None: never); None when no tap is skipped."""
    (h, w), (oh, ow), (kh, kw) = in_hw, out_hw, kernel
    (sh, sw), (dh, dw), (t, lft) = strides, dilations, pads[:2]
    yy, xx = y * sh + ry * dh, x * sw + rx * dw
    terms = []
    if padded_tap_share(h, oh, kh, sh, dh, t):
        terms += [yy >= const(t), yy < const(h + t)]
    if column_share is not None and padded_tap_share(w, ow, kw, sw, dw, lft) >= column_share:
        terms += [xx >= const(lft), xx < const(w + lft)]
    return all_(*terms) if terms else None


@dataclass(frozen=True)
class Conv2dKnobs:
    """Tuning knobs (the tuner's search space): ``ic``/``oc`` channel blocks (``oc`` a multiple
    of the vector lanes); ``ow_block`` unrolled output columns per register tile (it must
    divide the output width; ``oc / lanes * ow_block`` accumulators should fit the 32 vector
    registers); ``parallel`` run tiles across threads; ``unroll_rci`` unroll the innermost
    input-channel loop; ``unroll_rx`` put the kernel-width loop innermost and unroll it, so
    the columns of a tile share their input loads (stride 1)."""

    ic: int = 16
    oc: int = 32
    ow_block: int = 14
    parallel: bool = True
    unroll_rci: bool = False
    unroll_rx: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def for_target(target, out_width: int) -> Conv2dKnobs:
        """A starting point sized to ``target``'s SIMD registers: two vectors of output
        channels and the widest divisor of ``out_width`` whose accumulators fit."""
        lanes = target.vector_lanes("float32")
        regs = target.vector_registers
        fit = (regs - 4) // 2
        owb = max(d for d in range(1, fit + 1) if out_width % d == 0)
        return Conv2dKnobs(ic=lanes, oc=2 * lanes, ow_block=owb)


def schedule_register_tile(
    conv,
    unroll_rx: bool,
    rows: bool = True,
    reduce: Sequence[str] = ("rco", "ry", "rx"),
    rci: Sequence[str] = ("rci",),
    blocks: bool = False,
) -> None:
    """The register tile's loops of a blocked conv stage (axes n, f, y, x, fi, or n, f, x, fi
    without ``rows``: output positions flattened): the reduction loops ``reduce`` (outermost
    first: input channel blocks, kernel rows and columns, by name) then the input channel
    loops ``rci``, then the output columns ``x`` unrolled and the channel lanes ``fi``
    vectorised innermost; with ``unroll_rx`` the kernel-width loop inside ``rci`` and
    unrolled, so neighbouring columns share their input loads. With ``blocks`` the tile spans
    several output channel blocks: ``f`` between ``x`` and ``fi``, unrolled (one input value
    broadcast feeds each block's FMA)."""
    outer = ("n", "f", "y") if rows else ("n", "f")
    tile = ("x", "fi")
    if blocks:
        outer, tile = tuple(a for a in outer if a != "f"), ("x", "f", "fi")
    if unroll_rx:
        conv.reorder(*outer, *(a for a in reduce if a != "rx"), *rci, "rx", *tile)
        conv.unroll("rx")
    else:
        conv.reorder(*outer, *reduce, *rci, *tile)
    conv.vectorize("fi")
    conv.unroll("x")
    if blocks:
        conv.unroll("f")


def pack_weights(kernel: np.ndarray, ic: int, oc: int) -> np.ndarray:
    """OIHW numpy weights -> OIHW{ic}i{oc}o ``[O/oc, C/ic, KH, KW, ic, oc]``."""
    o, c, kh, kw = kernel.shape
    w = kernel.reshape(o // oc, oc, c // ic, ic, kh, kw)
    return np.ascontiguousarray(w.transpose(0, 2, 4, 5, 3, 1))


def conv2d_nchw_blocked(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: int,
    stride: int,
    padding: int,
    knobs: Conv2dKnobs = Conv2dKnobs(),
):
    """Schedule and arguments ``(sch, [data, packed_weights, out])`` for batch 1 float32."""
    ic, oc, owb = knobs.ic, knobs.oc, knobs.ow_block
    if c % ic or o % oc:
        raise ValueError(f"channels {c}/{o} must be multiples of the blocks ic={ic}/oc={oc}")
    oh = _out_size("conv2d", h, kernel, stride, padding)
    ow = _out_size("conv2d", w, kernel, stride, padding)
    if ow % owb:
        raise ValueError(f"ow_block {owb} must divide the output width {ow}")
    hp, wp = h + 2 * padding, w + 2 * padding
    data = placeholder((1, c, h, w), "float32", "data")
    wgt = placeholder((o // oc, c // ic, kernel, kernel, ic, oc), "float32", "weight")

    def pad_fn(n, ch, y, x):
        inside = all_(y >= padding, y < h + padding, x >= padding, x < w + padding)
        return select(inside, data[n, ch, y - padding, x - padding], const(0.0))

    dp = compute((1, c, hp, wp), pad_fn, name="data.pad") if padding else data
    rco, ry, rx = reduce_axis(c // ic, "rco"), reduce_axis(kernel, "ry"), reduce_axis(kernel, "rx")
    rci = reduce_axis(ic, "rci")
    conv = compute(
        (1, o // oc, oh, ow, oc),
        lambda n, f, y, x, fi: te_sum(
            dp[n, rco * ic + rci, y * stride + ry, x * stride + rx] * wgt[f, rco, ry, rx, rci, fi],
            [rco, ry, rx, rci],
        ),
        name="conv",
    )
    out = compute((1, o, oh, ow), lambda n, f, y, x: conv[n, f // oc, y, x, f % oc], name="out")
    s = create_schedule(out)
    s[conv].set_scope("local")
    fo, fi = s[out].split("f", oc)
    xo, xi = s[out].split("x", owb)
    s[out].reorder("n", fo, "y", xo, fi, xi)
    s[conv].compute_at(s[out], xo)
    schedule_register_tile(s[conv], knobs.unroll_rx)
    if knobs.unroll_rci:
        s[conv].unroll("rci")
    s[out].vectorize(xi)
    s[out].unroll(fi)  # constant indices: the whole tile stays in registers
    if padding:
        s[dp].vectorize("x")
    if knobs.parallel:
        s[out].parallel(s[out].fuse(fo, "y"))
        if padding:
            s[dp].parallel(s[dp].fuse("ch", "y"))
    return s, [data, wgt, out]
