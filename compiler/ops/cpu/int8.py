"""int8 conv2d / dense on the CPU with the accelerator's integer contract, fused (batch 1).

What one output element computes is :mod:`runtime.vta_ops`'s contract, bit for bit::

    acc = wrap_int32(sum_{c, ky, kx} x * w + bias + (res << res_shift))
    out = int8(clip(acc >> shift, clip_lo, clip_hi))

The kernel reads and writes the graph's NCHW int8 tensors (no layout change between layers).
Input channels go in pairs, two int16 in one int32 lane, and ``te.dot_i16x2`` multiplies a
vector of such lanes with one ``vpmaddwd`` (AVX2; AVX-512BW on 16 lanes): 16 exact int8 x int8
products per instruction. The padded input is stored as those pairs, offset to unsigned,
``u = x + 128`` (pad cells 128, that is x = 0) so that packing two into an int32 is plain
arithmetic, ``u0 + 65536 * u1``; the weights are packed once, at build time. The offset is
paid back in the bias: ``sum (u - 128) * w = sum u * w - 128 * sum w``, and ``sum w`` is per
output channel, padding included since a padded tap is ``u = 128``, so :func:`pack_qconv`
folds ``-128 * sum w`` into the int32 bias. All of it is int32 arithmetic modulo 2**32, as the
accumulator is, so the wrap matches the contract's. On a CPU with AVX-512 VNNI, LLVM fuses
the ``vpmaddwd`` and the accumulating add into ``vpdpwssd``; :func:`dot_isa` names what a
CPU's features give and :func:`assembly_for` compiles a kernel for a CPU we do not run on, to
check that. With VNNI the ``vpdpbusd`` form (``Int8ConvKnobs.dot``) packs four channels per
lane as bytes instead and ``te.dot_u8s8x4`` multiplies-accumulates them in one instruction,
u8 (the same offset input) x s8; on a CPU without VNNI that form computes with shifts and
multiplies (so its arithmetic is tested anywhere). Without VNNI, an input known to be
non-negative (0..127: the producer's clip, a ReLU) takes the ``pmaddubsw`` form: the same four
channels per lane as bytes, not offset (pad cells 0), ``te.dot_u7s8x4`` multiplying them with
``vpmaddubsw`` (the byte pairs' int16 sums are exact for such inputs) and ``vpmaddwd`` by ones:
32 products per two multiplies where ``vpmaddwd`` alone gives 16.

The forms whose input is not offset (pad cells 0, so a padded tap adds nothing) skip the taps
that read padding (``conv2d.padding_skip``: kernel rows, and columns where many are padded);
the offset forms' bias counts every tap, padded ones included, so they compute them all.

Register tile: ``oc_block`` output channels (one or two vectors) x ``ow_block`` output
columns; the input lane is broadcast once per column for all the tile's channel vectors, each
weight vector serves all its columns. A dense layer is the 1x1 conv of a 1x1 image.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.ops.cpu.conv2d import COLUMN_SKIP_SHARE, padding_skip
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import (
    cast,
    dot_i16x2,
    dot_u7s8x4,
    dot_u7s8x4_sum,
    dot_u8s8x4,
    maximum,
    minimum,
    select,
)
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum
from pyvta.isa.errors import PyvtaError
from pyvta.runtime.vta_ops import FusedParams, wrap_int32

U8_OFFSET = 128  # u = x + 128 maps int8 onto 0..255
# accumulators per register tile, at most: on AVX-512 VNNI (32 registers) ResNet-18's 3x3
# layers ran 10-45% slower with 28 (32 channels x 14 columns) than with 14-16 (a Zen 4, 2
# threads, the layer alone)
MAX_ACCUMULATORS = 16
DOT_ISAS = ("avx512vnni", "avxvnni", "avx2", "scalar")  # best first
# dot form -> (input channels per int32 lane, the te op multiplying such lanes, the offset
# added to the int8 input to make its lanes unsigned: 0 for pmaddubsw, exact only on inputs
# 0..127, which the caller guarantees, lanes per te op: the pmaddubsw_xK forms multiply K
# lanes per op, their int16 sums exact only for weights sums_fit_int16 proves, which
# pack_qconv checks)
DOTS = {
    "pmaddwd": (2, dot_i16x2, U8_OFFSET, 1),
    "vpdpbusd": (4, dot_u8s8x4, U8_OFFSET, 1),
    # the same on an input known 0..127, not offset: pad cells 0, so the conv skips the taps
    # that read padding (AVX-512 VNNI, 1 thread: net27's dilated 7x7 2.26 -> 1.28 ms)
    "vpdpbusd_u7": (4, dot_u8s8x4, 0, 1),
    "pmaddubsw": (4, dot_u7s8x4, 0, 1),
    # three and four lanes per step (x3, x4) ran no faster than two on AVX2 (a Zen 4, 1 thread:
    # 64 -> 56 7x7 and 42 -> 80 5x5 layers, 8 x 4 tiles): the broadcasts and weight loads
    # per product stay, only multiplies go
    "pmaddubsw_x2": (4, dot_u7s8x4_sum, 0, 2),
}
# the padded share of column taps at which the pmaddubsw_xK forms skip single columns: their
# per-column test costs more than pmaddubsw's (AVX2, a Zen 5, 1 thread, rows only -> rows and
# columns: 8 x 4 tiles, a 64 -> 56 7x7 layer of 15 columns, 11% padded, 1.12x -> 0.78x faster;
# a 64 -> 64 7x7 of 11 columns, 16%, 1.10x -> 0.90x; net27's dilated 7x7, 26%, 1.33x -> 1.80x)
SUMMED_COLUMN_SKIP_SHARE = 0.25
INT16_MAX = 2**15 - 1
U7_MAX = 127  # the pmaddubsw forms' largest input


class Int8TemplateError(PyvtaError, ValueError):
    """A layer or tile the int8 template cannot build."""


def dot_form(isa: str, nonnegative: bool = False) -> str:
    """The ``DOTS`` form for a ``dot_isa``: ``vpdpbusd`` with VNNI (``vpdpbusd_u7`` for an
    input known to be ``nonnegative``, 0..127), else ``pmaddubsw`` on AVX2 for such an input,
    else ``pmaddwd``."""
    if isa in ("avx512vnni", "avxvnni"):
        return "vpdpbusd_u7" if nonnegative else "vpdpbusd"
    return "pmaddubsw" if nonnegative and isa == "avx2" else "pmaddwd"


def sums_fit_int16(w: np.ndarray, steps: int) -> bool:
    """Whether the ``pmaddubsw_x{steps}`` form is exact for OIHW int8 weights ``w`` (one conv
    group's input channels): packed four channels per lane (:func:`pack_qconv`), lanes ``k *
    steps`` .. ``k * steps + steps - 1`` summed in int16, so each int16 sum holds ``2 * steps``
    products ``u * w`` (bytes ``2h`` and ``2h + 1`` of each lane, ``h`` = 0, 1) of inputs ``u``
    in 0..127: exact when ``127 * (the positive weights' sum)`` and ``127 * (the negative
    ones')`` stay in int16 for every output channel, group of lanes, half and tap."""
    o, c, kh, kw = w.shape
    span = 4 * steps
    padded = -(-c // span) * span
    wp = np.zeros((o, padded, kh, kw), np.int64)
    wp[:, :c] = w
    # [o, group of lanes, lane of the group, int16 half, its two bytes, kh, kw]
    parts = wp.reshape(o, padded // span, steps, 2, 2, kh, kw)
    pos = np.clip(parts, 0, None).sum(axis=(2, 4)) * U7_MAX
    neg = np.clip(parts, None, 0).sum(axis=(2, 4)) * U7_MAX
    return bool((pos <= INT16_MAX).all() and (neg >= -INT16_MAX - 1).all())


def sum_dot_form(dot: str, w: np.ndarray) -> str:
    """For a ``pmaddubsw`` layer with OIHW weights ``w`` (per conv group) the
    ``pmaddubsw_xK`` form with the fewest vector instructions per output vector (``K`` lanes
    per step: ``K`` pmaddubsw, ``K - 1`` int16 adds, a pmaddwd and an add, where ``K`` steps of
    ``pmaddubsw`` take ``3K``; the lanes padded to a multiple of ``K``) among those whose int16
    sums :func:`sums_fit_int16` proves, ``pmaddubsw`` where none beats it or the kernel is 1x1;
    else ``dot``."""
    if dot != "pmaddubsw" or w.shape[2] * w.shape[3] == 1:
        # 1x1 convs: no gain (AVX2, 2 threads, net25's 64 -> 64 1x1 0.150 -> 0.176 ms as x2,
        # its 16 x 3 tile against 8 x 4; net27's 186 -> 184 1x1 0.61 both)
        return dot
    lanes = -(-w.shape[1] // DOTS[dot][0])
    best, cost = dot, 3 * lanes
    for form, (_, _, _, k) in DOTS.items():
        if form.startswith("pmaddubsw_x"):
            c = -(-lanes // k) * (2 * k + 1)
            if c < cost and sums_fit_int16(w, k):
                best, cost = form, c
    return best


def host_dot_form(features: str | None = None) -> str:
    """The ``DOTS`` form for this machine's CPU at feature level ``features`` (default: the
    compiler's, ``CpuTarget.host``)."""
    from pyvta.compiler.backend.llvm.target import CpuTarget

    return dot_form(dot_isa(CpuTarget.host(1, features).feature_dict))


def dot_isa(features: dict[str, bool]) -> str:
    """The int8 dot-product instructions a CPU with ``features`` (llvmlite's
    ``get_host_cpu_features()``) gives these kernels, one of ``DOT_ISAS``."""
    if features.get("avx512vnni") and features.get("avx512bw"):
        return "avx512vnni"
    if features.get("avxvnni"):
        return "avxvnni"
    return "avx2" if features.get("avx2") else "scalar"


def assembly_for(sch, args, cpu: str, features: str, vector_bits: int) -> str:
    """Assembly of ``(sch, args)`` compiled for CPU ``cpu`` with LLVM ``features`` (e.g.
    ``"+avx512vnni,+avx512bw"``): code generation only, it is not run (the host may lack
    them)."""
    from pyvta.compiler.api import lower
    from pyvta.compiler.backend.llvm.build import assembly
    from pyvta.compiler.backend.llvm.target import CpuTarget

    host = CpuTarget.host(1)
    return assembly(lower(sch, args), CpuTarget(host.triple, cpu, features, vector_bits, 1))


@dataclass(frozen=True)
class Int8ConvKnobs:
    """``oc_block`` output channels per register tile (the output channels must be a multiple;
    1: scalar), as vectors of ``vector_lanes`` int32 (0: one vector of all ``oc_block``);
    ``ow_block`` unrolled output columns per tile (the row's last tile computes past the width
    on the last column and stores only the row's), so a tile holds
    ``ow_block * oc_block / vector_lanes`` vector accumulators and each broadcast input lane
    feeds ``oc_block / vector_lanes`` multiplies; ``parallel``: output channel blocks x rows
    across threads; ``dot``: a ``DOTS`` form, ``pmaddwd`` (channel pairs, AVX2) or
    ``vpdpbusd`` (channel quads, VNNI; elsewhere computed with shifts and multiplies) or
    ``pmaddubsw`` (channel quads; the input must be 0..127) or ``pmaddubsw_xK`` (the same,
    ``K`` lanes per step; the weights must be ``sums_fit_int16``)."""

    oc_block: int = 8
    ow_block: int = 4
    parallel: bool = True
    dot: str = "pmaddwd"
    vector_lanes: int = 0

    def __post_init__(self) -> None:
        if self.dot not in DOTS:
            raise Int8TemplateError(f"dot form {self.dot!r} (allowed: {', '.join(DOTS)})")
        if self.vector_lanes < 0 or (self.vector_lanes and self.oc_block % self.vector_lanes):
            raise Int8TemplateError(
                f"vector_lanes {self.vector_lanes} must divide oc_block {self.oc_block} (or be 0)"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def for_layer(
        o: int, ow: int, lanes: int = 8, registers: int = 16, dot: str = "pmaddwd"
    ) -> Int8ConvKnobs:
        """The tile with the most vector accumulators that fit beside two registers (the
        broadcast input and a weight): one or two vectors of ``lanes`` (else 8; else 4, the
        SSE width, for channels not a multiple of 8) int32 that divide ``o`` (else scalar) x the
        column tile with the fewest tiles per row (the narrowest of those). A ``pmaddwd``
        accumulator needs a second register for its product (``vpmaddwd``, then ``vpaddd``;
        ``vpdpbusd`` adds in place): on AVX2 8 channels x 7 columns (7 accumulators) ran
        5-15% faster than 16 x 7 (14, spilling) on ResNet-18's 3x3 layers; a ``pmaddubsw_xK``
        one needs three (two products and their sum): on AVX2 8 x 4 ran 1.17x faster than 8 x
        5 on a 64 -> 56 7x7 layer of 15 columns (8 x 5 no faster than the ``pmaddubsw`` form's
        best), and one vector of channels ran 1.04x faster than two (8 x 4 against 16 x 2 on a
        42 -> 80 5x5 layer of 28 columns): one vector only. At most
        ``MAX_ACCUMULATORS``. Ties: more channels per broadcast."""
        summed = DOTS[dot][3] > 1
        per_acc = 1 if dot.startswith("vpdpbusd") else 3 if summed else 2

        def widest(vectors: int) -> int:
            # the fewest tiles per row, then the narrowest such tile (27 as 4 x 7, not 4 x 8)
            fit = [
                d
                for d in range(1, ow + 1)
                if d * vectors * per_acc + 2 <= registers and d * vectors <= MAX_ACCUMULATORS
            ]
            return min(fit, key=lambda d: (-(-ow // d), d), default=1)

        tiles = [  # (accumulators, channels, columns, vector lanes)
            (widest(n) * n, n * v, widest(n), v)
            for v in dict.fromkeys((lanes, 8) if o % 8 == 0 else (lanes, 8, 4))
            for n in ((1,) if summed else (2, 1))
            if o % (n * v) == 0
        ]
        if not tiles:
            return Int8ConvKnobs(1, widest(1), dot=dot)
        _, oc, owb, v = max(tiles)
        return Int8ConvKnobs(oc, owb, dot=dot, vector_lanes=v if v < oc else 0)


def conv_out_hw(h, w, kernel, strides, pads, dilations=(1, 1)) -> tuple[int, int]:
    (kh, kw), (sh, sw), (t, lft, b, r), (dh, dw) = kernel, strides, pads, dilations
    oh = (h + t + b - (kh - 1) * dh - 1) // sh + 1
    ow = (w + lft + r - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise Int8TemplateError(
            f"kernel {kernel} larger than the padded input {h + t + b}x{w + lft + r}"
        )
    return oh, ow


def pack_qconv(
    w: np.ndarray, bias: np.ndarray, oc_block: int, dot: str = "pmaddwd"
) -> tuple[np.ndarray, np.ndarray]:
    """OIHW int8 weights and int32 bias -> ``([O/ob, ceil(C/g), KH, KW, ob] int32, [O]
    int32)`` for ``dot``'s ``g`` channels per lane: lane ``k`` holds input channels ``g*k + j``
    in bits ``32/g * j`` up (an incomplete last group padded with zero weights, and a last
    lanes of zero weights to a multiple of the form's lanes per step); the bias
    carries the unsigned-input correction ``-offset * sum w[o]`` (``dot``'s input offset, 128
    or 0; wrapped to int32)."""
    o, c, kh, kw = w.shape
    if o % oc_block:
        raise Int8TemplateError(f"{o} output channels are not a multiple of oc_block {oc_block}")
    group, _, offset, steps = DOTS[dot]
    if steps > 1 and not sums_fit_int16(w, steps):
        raise Int8TemplateError(
            f"weights too large for the {dot} form (int16 sums; allowed: sums_fit_int16)"
        )
    bits, cg = 32 // group, -(-c // (group * steps)) * steps
    wpad = np.zeros((o, cg * group, kh, kw), np.int64)
    wpad[:, :c] = w
    lanes = sum((wpad[:, j::group] & ((1 << bits) - 1)) << (bits * j) for j in range(group))
    wp = wrap_int32(lanes).reshape(o // oc_block, oc_block, cg, kh, kw).transpose(0, 2, 3, 4, 1)
    corr = bias.astype(np.int64) - offset * w.reshape(o, -1).astype(np.int64).sum(axis=1)
    return np.ascontiguousarray(wp), wrap_int32(corr)


def _offset_lanes(data, pads, group: int, groups: int = 1, offset: int = U8_OFFSET, steps=1):
    """``sum_j u_j * 2**(32/group * j)`` of the unsigned ``u = x + offset`` (128, or 0 for an
    input known non-negative) of channels ``group*k + j``: int32 ``[N, ceil(C/group), H + t + b,
    W + l + r]`` (wrapping), pad cells (and channels past the input's) ``u = offset`` (x = 0). With ``groups`` conv groups each group's
    ``C/groups`` channels start a lane of their own: ``[N, groups * ceil(C/groups/group), ...]``,
    lane ``k`` of group ``k // ceil(C/groups/group)``. Each group's lanes rounded up to a
    multiple of ``steps`` (the extra lanes ``u = offset``)."""
    n, c, h, w = data.shape
    t, lft, b, r = pads
    bits = 32 // group
    cg = c // groups
    lanes = -(-cg // (group * steps)) * steps
    extra = lanes * group - cg >= group  # a whole lane past the group's channels

    def f(i, k, y, x):
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        # channel group*kk + j of the group's, first: the group's first channel
        first, kk = ((k // lanes) * cg, k % lanes) if groups > 1 else (0, k)
        lane = None
        for j in range(group):
            ch = first + group * kk + j
            whole = (cg % group == 0 or j == 0) and not extra
            ok = inside if whole else all_(inside, group * kk + j < cg)
            if (cg % group and j and groups > 1) or extra:  # past the channels: read in bounds
                ch = minimum(ch, const(c - 1))
            v = cast("int32", data[i, ch, y - t, x - lft])
            v = v + offset if offset else v
            part = select(ok, v, const(offset))
            lane = part if j == 0 else lane + part * (1 << (bits * j))
        return lane

    return compute((n, groups * lanes, h + t + b, w + lft + r), f, name="data.lanes")


def _requantize(acc, res, p: FusedParams, shift=None, res_shift=None):
    """int32 ``acc`` (bias added) + residual -> int8 by the contract's shift and clip
    (``shift`` / ``res_shift``: the channel's, read from the per-channel inputs)."""
    if res is not None:
        acc = acc + (cast("int32", res) << (p.res_shift if res_shift is None else res_shift))
    y = acc >> (p.shift if shift is None else shift)
    return cast("int8", minimum(maximum(y, const(p.clip_lo)), const(p.clip_hi)))


def qconv2d_nchw(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: tuple[int, int],
    params: FusedParams,
    residual: bool = False,
    knobs: Int8ConvKnobs | None = None,
    dilations: tuple[int, int] = (1, 1),
    res_channels: int | None = None,
    batch: int = 1,
    groups: int = 1,
):
    """``(sch, [data, weight, bias, (shift, res_shift,) (residual,) out])``: data int8
    ``[N, C, H, W]`` (``N = batch``: the images share the threads' tasks, one launch),
    weight and bias from :func:`pack_qconv`, out int8 ``[N, O, OH, OW]``
    (``params``: shift, clip, residual shift, strides, pads; with per-channel shifts,
    ``params.per_channel``, they are int32 ``[O]`` inputs: ``params.channel_shifts``); ``knobs``
    default: :meth:`Int8ConvKnobs.for_layer` (its ``pmaddubsw`` form needs data 0..127: the
    caller's guarantee); ``dilations`` (rows, columns) between kernel taps.
    The residual is ``[N, res_channels, OH, OW]`` (default O): a layer whose O is padded up to
    the channel tile reads the layer's own channels (the padded outputs read the last one; they
    are not used). A grouped conv (``groups``): output channel ``o`` of group
    ``o // (O/groups)`` sums that group's ``C/groups`` input channels (weights ``[O, C/groups,
    KH, KW]`` packed); ``oc_block`` divides ``O/groups``, which the caller pads per group (each
    group's ``res_channels/groups`` channels first, the residual read as such)."""
    kh, kw = kernel
    dh, dw = dilations
    oh, ow = conv_out_hw(h, w, kernel, params.strides, params.pads, dilations)
    if c % groups or o % groups:
        raise Int8TemplateError(
            f"groups {groups} must divide the {c} input and {o} output channels"
        )
    knobs = knobs or Int8ConvKnobs.for_layer(o // groups, ow)
    (sh, sw), ob, owb = params.strides, knobs.oc_block, knobs.ow_block
    if (o // groups) % ob or not 0 < owb <= ow:
        raise Int8TemplateError(
            f"oc_block {ob} must divide the {o // groups} output channels per group,"
            f" ow_block {owb} be in 1..{ow} (the output width)"
        )
    data = placeholder((batch, c, h, w), "int8", "data")
    # input channels per lane, their product, x's offset, lanes per product
    group, dot, offset, steps = DOTS[knobs.dot]
    cg = -(-(c // groups) // (group * steps)) * steps  # lanes per conv group
    blocks_per_group = o // groups // ob
    wgt = placeholder((o // ob, cg, kh, kw, ob), "int32", "weight")
    bias = placeholder((o,), "int32", "bias")
    args = [data, wgt, bias]
    shifts = None
    if params.per_channel:
        shifts = placeholder((o,), "int32", "shift"), placeholder((o,), "int32", "res_shift")
        args += list(shifts)
    o_res = res_channels or o
    res = placeholder((batch, o_res, oh, ow), "int8", "residual") if residual else None
    if res is not None:
        args.append(res)
    u = _offset_lanes(data, params.pads, group, groups, offset, steps)
    rc, ry, rx = reduce_axis(cg // steps, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    # the accumulators cover whole column tiles: columns past the row's last are computed as
    # a copy of it (clamped index) and not stored, so the reduction has no bounds checks
    ow_pad = -(-ow // owb) * owb

    def col(x):
        return minimum(x, const(ow - 1)) if ow_pad > ow else x

    def lane(f, k):  # the output block's group's first lane + k
        return k if groups == 1 else (f // blocks_per_group) * cg + k

    def product(i, f, y, x, fi):  # of the step's lanes rc * steps + 0..steps-1
        ks = [rc * steps + j for j in range(steps)] if steps > 1 else [rc]
        yy, xx = y * sh + ry * dh, col(x) * sw + rx * dw
        ops = [(u[i, lane(f, k), yy, xx], wgt[f, k, ry, rx, fi]) for k in ks]
        return dot(*[v for pair in ops for v in pair])

    def inside(y, x):  # none with an offset: a padded tap adds offset * w, the bias counts it
        if offset:
            return None
        share = SUMMED_COLUMN_SKIP_SHARE if steps > 1 else COLUMN_SKIP_SHARE
        return padding_skip(y, col(x), ry, rx, (h, w), (oh, ow), kernel, params.strides,
                            params.pads, dilations, share)  # fmt: skip

    acc = compute(
        (batch, o // ob, oh, ow_pad, ob),
        lambda i, f, y, x, fi: te_sum(product(i, f, y, x, fi), [rc, ry, rx], where=inside(y, x)),
        name="acc",
    )

    def res_channel(oc):  # padded output channel -> the residual's channel
        if groups == 1:
            return oc if o_res == o else minimum(oc, const(o_res - 1))
        og, og_res = o // groups, o_res // groups
        j = oc % og
        return (oc // og) * og_res + (j if og_res == og else minimum(j, const(og_res - 1)))

    def out_fn(n, oc, y, x):
        r = None
        if res is not None:
            r = res[n, res_channel(oc), y, x]
        per = (shifts[0][oc], shifts[1][oc]) if shifts else ()
        return _requantize(acc[n, oc // ob, y, x, oc % ob] + bias[oc], r, params, *per)

    out = compute((batch, o, oh, ow), out_fn, name="out")
    s = create_schedule(out)
    s[acc].set_scope("local")
    fo, fi = s[out].split("oc", ob)
    xo, xi = s[out].split("x", owb)
    s[out].reorder(fo, "n", "y", xo, xi, fi)
    s[acc].compute_at(s[out], xo)
    s[acc].reorder("i", "f", "y", "rc", "ry", "rx", "x", "fi")
    lanes = knobs.vector_lanes or ob
    if lanes < ob:
        fv, fl = s[acc].split("fi", lanes)
        s[acc].reorder("i", "f", "y", "rc", "ry", "rx", "x", fv, fl)
        s[acc].unroll(fv)
    if lanes > 1:
        s[acc].vectorize(fl if lanes < ob else "fi")
    s[acc].unroll("x")
    if ow % owb == 0 and owb > 1:
        # the tile's int8 results stored along the rows, a vector of columns per channel (a
        # channel vector would store byte by byte, its lanes OH * OW apart): 1.2-1.6x faster
        # on 1x1 convs of 30 channels (AVX2 and AVX-512, a Zen 4, 1 thread)
        s[out].reorder(fo, "n", "y", xo, fi, xi)
        s[out].unroll(fi)
        s[out].vectorize(xi)
    else:
        if lanes < ob:
            fi, fil = s[out].split(fi, lanes)
            s[out].unroll(fi)
            fi = fil
        if lanes > 1:
            s[out].vectorize(fi)
        s[out].unroll(xi)
    if knobs.parallel:
        s[out].parallel(s[out].fuse(s[out].fuse(fo, "n"), "y"))
        s[u].parallel(s[u].fuse("i", "k"))
    return s, args + [out]


def pack_qconv_grouped(w: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grouped OIHW int8 weights ``[O, C/group, KH, KW]`` and int32 bias -> the int32 weights and
    bias :func:`qconv2d_grouped_nchw` reads (the input is not offset: no bias correction)."""
    return np.ascontiguousarray(w.astype(np.int32)), np.ascontiguousarray(bias.astype(np.int32))


def qconv2d_grouped_nchw(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: tuple[int, int],
    params: FusedParams,
    group: int,
    residual: bool = False,
    dilations: tuple[int, int] = (1, 1),
    vector_lanes: int = 8,
    parallel: bool = True,
    batch: int = 1,
):
    """``(sch, [data, weight, bias, (residual,) out])`` of a grouped (depthwise: group = C)
    int8 conv with the same contract as :func:`qconv2d_nchw`: data int8 ``[N, C, H, W]``
    (``N = batch``, one launch), weight and bias from :func:`pack_qconv_grouped`, residual and
    out int8 ``[N, O, OH, OW]``.
    Each output channel sums its group's ``C/group`` channels x taps in int32 (wrapping, as
    the contract's accumulator), a register tile of one or more vectors of ``vector_lanes`` (or
    half as many) output columns at a time (``_row_tile``: the few channels of a group give no
    channel vector); the padded input is wide enough for the tile's columns past the row (they
    read zeros and are not stored), so no column index is clamped (a clamped vector index
    would gather); tasks: output channel x image x row across threads."""
    if c % group or o % group:
        raise Int8TemplateError(f"group {group} must divide the {c} input and {o} output channels")
    kh, kw = kernel
    (sh, sw), (dh, dw) = params.strides, dilations
    t, lft, b, r = params.pads
    oh, ow = conv_out_hw(h, w, kernel, params.strides, params.pads, dilations)
    cg, og = c // group, o // group
    data = placeholder((batch, c, h, w), "int8", "data")
    wgt = placeholder((o, cg, kh, kw), "int32", "weight")
    bias = placeholder((o,), "int32", "bias")
    args = [data, wgt, bias]
    res = placeholder((batch, o, oh, ow), "int8", "residual") if residual else None
    if res is not None:
        args.append(res)

    def pad_fn(i, ch, y, x):  # int32, zero outside the input (the read clamped into it)
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        yy = minimum(maximum(y - t, const(0)), const(h - 1))
        xx = minimum(maximum(x - lft, const(0)), const(w - 1))
        return select(inside, cast("int32", data[i, ch, yy, xx]), const(0))

    lanes, vectors = _row_tile(ow, vector_lanes)
    tile = lanes * vectors  # columns per register tile: ``vectors`` accumulators
    ow_pad = -(-ow // tile) * tile  # the columns past the row's read zeros, are not stored
    wd = max(w + lft + r, (ow_pad - 1) * sw + (kw - 1) * dw + 1)
    dp = compute((batch, c, h + t + b, wd), pad_fn, name="data.pad")
    rc, ry, rx = reduce_axis(cg, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    acc = compute(
        (batch, o, oh, ow_pad),
        lambda i, f, y, x: te_sum(
            dp[i, (f // og) * cg + rc, y * sh + ry * dh, x * sw + rx * dw] * wgt[f, rc, ry, rx],
            [rc, ry, rx],
        ),
        name="acc",
    )

    def out_fn(n, f, y, x):
        rv = res[n, f, y, x] if res is not None else None
        return _requantize(acc[n, f, y, x] + bias[f], rv, params)

    out = compute((batch, o, oh, ow), out_fn, name="out")
    s = create_schedule(out)
    xo, xi = s[out].split("x", tile)
    xv, xl = s[out].split(xi, lanes)
    s[out].reorder("f", "n", "y", xo, xv, xl)
    s[acc].set_scope("local")
    s[acc].compute_at(s[out], xo)
    av, al = s[acc].split("x", lanes)
    s[acc].reorder("i", "f", "y", "rc", "ry", "rx", av, al)
    s[acc].unroll(av)
    s[acc].vectorize(al)
    s[out].vectorize(xl)
    s[dp].vectorize("x")
    if parallel:
        s[out].parallel(s[out].fuse(s[out].fuse("f", "n"), "y"))
        s[dp].parallel(s[dp].fuse("i", "ch"))
    return s, args + [out]


def _row_tile(ow: int, vector_lanes: int, max_vectors: int = 8) -> tuple[int, int]:
    """``(lanes, vectors)``: a depthwise row's register tile, ``vectors`` accumulators of
    ``lanes`` columns (``vector_lanes`` or half as many): the fewest columns computed past the
    row's (its tiles cover it), then the fewest tiles, then the wider vector."""
    best = None
    for lanes in dict.fromkeys((min(vector_lanes, ow), max(min(vector_lanes // 2, ow), 1))):
        n = -(-ow // lanes)  # vectors per row
        tiles = -(-n // max_vectors)
        vectors = -(-n // tiles)
        key = (tiles * vectors * lanes - ow, tiles, -lanes)
        best = min(best or (key, lanes, vectors), (key, lanes, vectors))
    return best[1], best[2]


# 1.5 * 2**23: a float32 v with |v| <= 2**22 plus this, minus it again, is v rounded half to
# even (IEEE float32 adds round to nearest even; the kernels have no fast-math)
