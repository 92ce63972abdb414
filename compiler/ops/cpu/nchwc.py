"""CPU graph kernels in the blocked NCHW{c}c layout, with fused epilogues (float32, batch 1).

A network compiled for the CPU keeps its activations as ``[1, C/c, H, W, c]`` from the first
conv to the last pool (``compiler.targets.cpu.alter_cpu_layout`` plans it); these templates
read and write that layout, so no transform runs between layers:

- the convs' shared pieces: the :class:`Epilogue`, the padding stages (:func:`pad_nchwc`, :func:`pad_nchw`),
  the weight packing (:func:`pack_conv_weights`), the output size (:func:`conv_output_hw`),
  ``SPARE_REGISTERS``; the convs themselves: ``nchwc_direct.py`` (direct), ``depthwise.py``,
  ``pointwise.py``, ``winograd.py``,
- ``max_pool_nchwc``, ``global_avg_pool_nchwc``, ``dense_nc``, ``softmax_nc``,
  ``layout_transform``, ``elementwise``.

Every conv / dense kernel applies its :class:`Epilogue` in the same loop nest as the
accumulation: ``clip(acc + bias[o] + residual)``. Kernels take ``(inputs..., out)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import cast, exp, maximum, minimum, select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import max as te_max
from pyvta.compiler.te.tensor import sum as te_sum

F32_LOWEST = -3.4028234663852886e38


@dataclass(frozen=True)
class Epilogue:
    """What a conv / dense adds to its accumulator before storing it: the bias (always), a
    residual of the output's shape, and a clip ``[lo, hi]`` (relu: ``[0, inf]``)."""

    residual: bool = False
    clip: tuple[float, float] | None = None

    def apply(self, acc, bias, res=None):
        v = acc + bias
        if self.residual:
            v = v + res
        if self.clip is not None:
            lo, hi = self.clip
            if lo > -math.inf:
                v = maximum(v, const(float(lo)))
            if hi < math.inf:
                v = minimum(v, const(float(hi)))
        return v


SPARE_REGISTERS = 4  # vector registers a conv tile leaves for the input broadcast and weights
# With at least WIDE_REGISTER_FILE vector registers (AVX-512's 32; not AVX2's 16), an untuned
# direct register tile whose output block is exactly one vector (16 channels) spans
# VECTOR_BLOCK_TILE_BLOCKS blocks where they divide the layer's (pointwise: its TILE_BLOCKS), so
# each broadcast input value feeds that many FMAs. Intel AVX-512 host (LLVM: rocketlake; 2
# cores), one thread, in the network, CPU time, 16-20 interleaved runs: MobileNet 10.5 -> 8.6
# ms (its pointwise layers 1.07-1.56x; 4 blocks x 6 pixels no better); ResNet-18's stride-2 3x3
# convs 1.14-1.46x, its 1x1 stride-2 ones 1.17-1.20x, the 7x7 stem about 1.05x. On a Zen 5 the pointwise tuned choices of
# tuner/pretuned/mobilenet_224_cpu.jsonl (mostly two blocks) ran about 1.27x the one-block
# default. Blocks of 8 (half a vector) on AVX-512 gained nothing on a Zen 4 (nchwc_direct).
WIDE_REGISTER_FILE = 32
VECTOR_BLOCK_TILE_BLOCKS = 2


def pack_conv_weights(kernel: np.ndarray, ic: int, oc: int) -> np.ndarray:
    """OIHW weights -> OIHW{ic}i{oc}o ``[O/oc, C/ic, KH, KW, ic, oc]`` (float32, contiguous)."""
    o, c, kh, kw = kernel.shape
    w = kernel.astype(np.float32).reshape(o // oc, oc, c // ic, ic, kh, kw)
    return np.ascontiguousarray(w.transpose(0, 2, 4, 5, 3, 1))


def pad_nchwc(data, pads, fill: float, name: str):
    """``data [1, C/c, H, W, c]`` with ``pads`` (top, left, bottom, right) of ``fill`` (``data``
    itself without padding)."""
    _, cb, h, w, blk = data.shape
    t, lft, b, r = pads
    if not any(pads):
        return data

    def f(n, ch, y, x, ci):
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        return select(inside, data[n, ch, y - t, x - lft, ci], const(fill))

    return compute((1, cb, h + t + b, w + lft + r, blk), f, name=name)


def pad_channels_last(data, pads, name: str, channels: int):
    """``data [1, C/c, H, W, c]`` (or NCHW ``[1, C, H, W]``) -> channels last ``[1, H + t +
    b, W + l + r, C]`` (``channels`` C), zero padded by ``pads`` (top, left, bottom, right): a
    conv reading any run of channels (a group straddling the blocks) reads them at
    consecutive addresses."""
    h, w = data.shape[-3:-1] if len(data.shape) == 5 else data.shape[-2:]
    t, lft, b, r = pads

    def f(n, y, x, ch):
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        if len(data.shape) == 5:
            blk = data.shape[-1]
            value = data[n, ch // blk, y - t, x - lft, ch % blk]
        else:
            value = data[n, ch, y - t, x - lft]
        return select(inside, value, const(0.0))

    return compute((1, h + t + b, w + lft + r, channels), f, name=name)


def schedule_channels_last(stage, block: int, parallel: bool) -> None:
    """:func:`pad_channels_last`'s schedule: a block's channels a vector, rows across
    threads (``parallel``)."""
    _, inner = stage.split("ch", block)
    stage.vectorize(inner)
    if parallel:
        stage.parallel(stage.fuse("n", "y"))


def pad_nchw(data, pads, fill: float, name: str):
    """NCHW ``data [1, C, H, W]`` with ``pads`` (top, left, bottom, right) of ``fill``, in NCHW
    (a stage even without padding)."""
    _, c, h, w = data.shape
    t, lft, b, r = pads

    def f(n, ch, y, x):
        if not any(pads):
            return data[n, ch, y, x]
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)
        return select(inside, data[n, ch, y - t, x - lft], const(fill))

    return compute((1, c, h + t + b, w + lft + r), f, name=name)


def conv_output_hw(h, w, kernel, strides, pads, dilations=(1, 1)):
    (kh, kw), (sh, sw), (t, lft, b, r), (dh, dw) = kernel, strides, pads, dilations
    oh = (h + t + b - (kh - 1) * dh - 1) // sh + 1
    ow = (w + lft + r - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"kernel {kernel} larger than the padded input {h + t + b}x{w + lft + r}")
    return oh, ow


def _pool_schedule(red, out, parallel: bool):
    """A pool's schedule: the window reduction ``red`` kept local per output pixel, channels of
    the block as the vector, ``(channel block, row)`` in parallel."""
    s = create_schedule(out)
    s[red].set_scope("local")
    s[red].compute_at(s[out], "x")
    s[red].reorder("n", "ch", "y", "x", "ry", "rx", "ci")
    s[red].vectorize("ci")
    s[out].vectorize("ci")
    if parallel:
        s[out].parallel(s[out].fuse("ch", "y"))
    return s


def _pool_window(c, h, w, kernel, strides, pads, block):
    """A pool's input ``[1, C/c, H, W, c]``, output size, window axes and ``window(y, x)``:
    the input cell ``(yy, xx)`` the window at output ``(y, x)`` reads and whether it is inside
    the input (not padding)."""
    (kh, kw), (sh, sw) = kernel, strides
    data = placeholder((1, c // block, h, w, block), "float32", "data")
    t, lft = pads[0], pads[1]
    ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def window(y, x):
        yy, xx = y * sh + ry - t, x * sw + rx - lft
        return yy, xx, all_(yy >= 0, yy < h, xx >= 0, xx < w)

    return data, conv_output_hw(h, w, kernel, strides, pads), (ry, rx), window


def max_pool_nchwc(c, h, w, kernel, strides, pads, block, parallel=True):
    """``(sch, [data, out])``: max pool of ``[1, C/c, H, W, c]``; padded cells never win."""
    data, (oh, ow), (ry, rx), window = _pool_window(c, h, w, kernel, strides, pads, block)

    def f(n, ch, y, x, ci):
        yy, xx, inside = window(y, x)
        return te_max(select(inside, data[n, ch, yy, xx, ci], const(F32_LOWEST)), [ry, rx])

    red = compute((1, c // block, oh, ow, block), f, name="pool")
    out = compute(red.shape, lambda n, ch, y, x, ci: red[n, ch, y, x, ci], name="out")
    return _pool_schedule(red, out, parallel), [data, out]


def avg_pool_nchwc(c, h, w, kernel, strides, pads, block, count_include_pad, parallel=True):
    """``(sch, [data, out])``: average pool of ``[1, C/c, H, W, c]``; padded cells add zero and
    count in the divisor only with ``count_include_pad`` (ONNX AveragePool)."""
    (kh, kw), (sh, sw) = kernel, strides
    t, lft = pads[0], pads[1]
    data, (oh, ow), (ry, rx), window = _pool_window(c, h, w, kernel, strides, pads, block)

    def f(n, ch, y, x, ci):
        yy, xx, inside = window(y, x)
        yc = minimum(maximum(yy, const(0)), const(h - 1))  # the read clamped into the input
        xc = minimum(maximum(xx, const(0)), const(w - 1))
        return te_sum(select(inside, data[n, ch, yc, xc, ci], const(0.0)), [ry, rx])

    red = compute((1, c // block, oh, ow, block), f, name="pool")

    def mean(n, ch, y, x, ci):
        if count_include_pad or not any(pads):
            return red[n, ch, y, x, ci] * const(1.0 / (kh * kw))
        y0, x0 = y * sh - t, x * sw - lft
        rows = minimum(y0 + kh, const(h)) - maximum(y0, const(0))
        cols = minimum(x0 + kw, const(w)) - maximum(x0, const(0))
        return red[n, ch, y, x, ci] / cast("float32", rows * cols)

    out = compute(red.shape, mean, name="out")
    return _pool_schedule(red, out, parallel), [data, out]


# Accumulators per channel vector of a global average pool: its pixels are summed in this
# many interleaved partial sums (pixel p into sum p mod k), then those summed. One running sum
# over a 42 x 42 map lost 3.6x the accuracy onnxruntime keeps (relative error 9.2e-7 against
# 2.5e-7 from float64; a generated network's classifier then 1.4e-4 against 4.1e-5), and its
# additions waited on each other.
GAP_PARTIAL_SUMS = 8


def global_avg_pool_nchwc(c, h, w, block):
    """``(sch, [data, out])``: mean over H, W of ``[1, C/c, H, W, c]`` -> ``[1, C/c, 1, 1, c]``
    (the same bytes as NCHW ``[1, C]``), the pixels read as ``[1, C/c, H*W, c]`` (the same
    bytes) in ``GAP_PARTIAL_SUMS`` interleaved partial sums per channel vector."""
    npix = h * w
    k = min(GAP_PARTIAL_SUMS, npix)
    data = placeholder((1, c // block, npix, block), "float32", "data")
    rp = reduce_axis(-(-npix // k), "rp")

    def part(n, ch, j, ci):
        p = rp * k + j
        if npix % k == 0:
            return te_sum(data[n, ch, p, ci], rp)
        return te_sum(select(p < npix, data[n, ch, p, ci], const(0.0)), rp)  # the last row

    partial = compute((1, c // block, k, block), part, name="partial")
    rj = reduce_axis(k, "rj")
    total = compute(
        (1, c // block, 1, 1, block),
        lambda n, ch, y, x, ci: te_sum(partial[n, ch, rj, ci], rj),
        name="total",
    )
    scale = const(1.0 / npix)
    out = compute(total.shape, lambda n, ch, y, x, ci: total[n, ch, y, x, ci] * scale, "out")
    s = create_schedule(out)
    s[total].set_scope("local")
    s[total].compute_at(s[out], "x")
    s[partial].set_scope("local")
    s[partial].compute_at(s[total], "x")
    s[partial].reorder("n", "ch", "rp", "j", "ci")  # k vector sums, one pixel row of them a step
    s[partial].unroll("j")
    s[partial].vectorize("ci")
    s[total].unroll("rj")
    s[total].vectorize("ci")
    s[out].vectorize("ci")
    return s, [data, out]


def pack_dense_weights(weight: np.ndarray, block: int) -> np.ndarray:
    """``[N, K]`` -> ``[ceil(N/b), K, b]`` column panels (float32, contiguous; the last panel's
    columns past N are zeros)."""
    n, k = weight.shape
    w = np.pad(weight.astype(np.float32), ((0, -n % block), (0, 0)))
    return np.ascontiguousarray(w.reshape(-(-n // block), block, k).transpose(0, 2, 1))


def dense_nc(m, k, n, block, epilogue=Epilogue(), parallel=True, vector_lanes: int = 8):
    """``(sch, [x, weight, bias, (residual,) out])``: ``out[M, N] = epilogue(x @ W^T)`` with
    ``weight`` from :func:`pack_dense_weights`. A panel of ``block`` columns that holds several
    vectors of ``vector_lanes`` is computed as that many vectors side by side (one broadcast of
    ``x`` feeds independent FMA chains: 1000 outputs as panels of 5 x 8 ran the classifier of
    the zoo's models ~1.4x faster than panels of one vector on AVX2, one thread); LLVM is not
    given the panel as one vector (a 40-wide vector came out as shuffles and spills). When
    ``block`` does not divide ``n`` the last panel is computed whole (its weights past ``n``
    zero) and stored up to ``n``."""
    panels = -(-n // block)
    x = placeholder((m, k), "float32", "x")
    wgt = placeholder((panels, k, block), "float32", "weight")
    bias = placeholder((n,), "float32", "bias")
    args = [x, wgt, bias]
    res = placeholder((m, n), "float32", "residual") if epilogue.residual else None
    if res is not None:
        args.append(res)
    r = reduce_axis(k, "k")
    acc = compute(
        (m, panels, block),
        lambda i, jo, ji: te_sum(x[i, r] * wgt[jo, r, ji], r),
        name="acc",
    )

    def out_fn(i, j):
        rv = res[i, j] if res is not None else None
        return epilogue.apply(acc[i, j // block, j % block], bias[j], rv)

    out = compute((m, n), out_fn, name="out")
    s = create_schedule(out)
    jo, ji = s[out].split("j", block)
    s[acc].set_scope("local")
    s[acc].compute_at(s[out], jo)
    s[acc].reorder("i", "jo", "k", "ji")
    for st, axis in ((s[acc], "ji"), (s[out], ji)):
        if block > vector_lanes and block % vector_lanes == 0:
            vecs, lanes = st.split(axis, vector_lanes)
            st.unroll(vecs)
            st.vectorize(lanes)
        else:
            st.vectorize(axis)
    if parallel:
        s[out].parallel(jo)
    return s, args + [out]


def blocked_shape(shape, block: int | None) -> tuple[int, ...]:
    """NCHW ``shape`` ``[N, C, H, W]`` in NCHW{block}c: ``[N, ceil(C / block), H, W, block]``
    (the channels past C, when the block does not divide C, are padding), or ``shape`` itself
    for block None."""
    n, c, h, w = shape
    return tuple(shape) if block is None else (n, -(-c // block), h, w, block)


def layout_transform(shape, src_block: int | None, dst_block: int | None, parallel=True):
    """``(sch, [data, out])`` between NCHW (block None) and NCHW{c}c layouts of an ``[1, C,
    H, W]`` tensor, or between two blocks (:func:`blocked_shape`; padded channels of the
    output are zero)."""
    _, c, h, w = shape

    def src_shape(b):
        return blocked_shape((1, c, h, w), b)

    data = placeholder(src_shape(src_block), "float32", "data")

    def read(ch, y, x):
        if src_block is None:
            return data[0, ch, y, x]
        return data[0, ch // src_block, y, x, ch % src_block]

    def read_padded(ch, y, x):  # zero past the C channels (the read clamped into them)
        return select(ch < const(c), read(minimum(ch, const(c - 1)), y, x), const(0.0))

    if dst_block is None:
        out = compute((1, c, h, w), lambda n, ch, y, x: read(ch, y, x), name="out")
        s = create_schedule(out)
        if w % 8 == 0:
            s[out].vectorize("x")
        if parallel:
            s[out].parallel(s[out].fuse("ch", "y"))
        return s, [data, out]
    b = dst_block
    rd = read if c % b == 0 else read_padded
    out = compute(src_shape(b), lambda n, co, y, x, ci: rd(co * b + ci, y, x), name="out")
    s = create_schedule(out)
    if parallel:
        s[out].parallel(s[out].fuse("co", "y"))
    return s, [data, out]


def concat_nchwc(parts: list[tuple[int, int]], h: int, w: int, block: int, parallel=True):
    """``(sch, [inputs..., out])``: the channel concat of NCHW{c}c tensors, ``parts`` their
    ``(channels, block)`` in order, into NCHW{block}c (:func:`blocked_shape` of the channel
    sum). An output channel ``ch`` of part ``j`` (at channel offset ``off``) reads channel
    ``ch - off`` of it, clamped into the part (every part is read; a select keeps one). A part
    that ends on a block boundary is chosen per output block (a scalar condition: the vector
    loop loads only that part's vector), else per channel (a vector condition: the loop runs
    scalar, every part's lane read)."""
    ins = [
        placeholder(blocked_shape((1, cj, h, w), bj), "float32", f"in{j}")
        for j, (cj, bj) in enumerate(parts)
    ]
    total = sum(cj for cj, _ in parts)

    def f(n, co, y, x, ci):
        ch = co * block + ci
        val, off = None, total
        for (cj, bj), src in reversed(list(zip(parts, ins, strict=True))):
            off -= cj
            if bj == block and off % block == 0:  # aligned: whole vectors of the part
                cb = minimum(maximum(co - off // block, const(0)), const(-(-cj // bj) - 1))
                v = src[n, cb, y, x, ci]
            else:
                k = minimum(maximum(ch - off, const(0)), const(cj - 1))
                v = src[n, k // bj, y, x, k % bj]
            end = off + cj
            inside = co < const(end // block) if end % block == 0 else ch < const(end)
            val = v if val is None else select(inside, v, val)
        return val

    out = compute(blocked_shape((1, total, h, w), block), f, name="out")
    s = create_schedule(out)
    s[out].vectorize("ci")
    if parallel:
        s[out].parallel(s[out].fuse("co", "y"))
    return s, ins + [out]


def softmax_nc(m: int, n: int):
    """``(sch, [x, out])``: softmax over the last axis of ``x [M, N]`` (float32), the maximum
    subtracted first."""
    x = placeholder((m, n), "float32", "x")
    r1, r2 = reduce_axis(n, "j1"), reduce_axis(n, "j2")
    top = compute((m,), lambda i: te_max(x[i, r1], r1), name="top")
    e = compute((m, n), lambda i, j: exp(x[i, j] - top[i]), name="e")
    total = compute((m,), lambda i: te_sum(e[i, r2], r2), name="total")
    out = compute((m, n), lambda i, j: e[i, j] / total[i], name="out")
    return create_schedule(out), [x, out]


ELEMENTWISE = ("add", "relu", "clip")


def elementwise(op: str, size: int, attrs: dict):
    """``(sch, [a, (b,) out])`` of a float32 elementwise op over ``size`` elements (any layout:
    inputs and output share it): ``add``, ``relu``, ``clip`` (attrs ``min``, ``max``)."""
    if op not in ELEMENTWISE:
        raise ValueError(f"elementwise op {op!r} (allowed: {', '.join(ELEMENTWISE)})")
    a = placeholder((size,), "float32", "a")
    args = [a]
    if op == "add":
        b = placeholder((size,), "float32", "b")
        args.append(b)
        out = compute((size,), lambda i: a[i] + b[i], name="out")
    elif op == "relu":
        out = compute((size,), lambda i: maximum(a[i], const(0.0)), name="out")
    else:
        lo, hi = float(attrs["min"]), float(attrs["max"])
        out = compute((size,), lambda i: minimum(maximum(a[i], const(lo)), const(hi)), "out")
    s = create_schedule(out)
    lanes = 8 if size % 8 == 0 else 1
    if lanes > 1:
        io, ii = s[out].split("i", lanes)
        s[out].vectorize(ii)
    return s, args + [out]
