"""Elementwise and pooling operators for the GPU: one output element per thread, a flat
1-D launch of ``threads`` per block (``fetch.bind_flat``); producers (padding) inlined."""

from __future__ import annotations

from pyvta.compiler.ir.expr import const
from pyvta.compiler.ops.conv2d import _out_size
from pyvta.compiler.ops.cuda.epilogue import clip_value
from pyvta.compiler.ops.cuda.fetch import bind_flat
from pyvta.compiler.ops.elementwise import bias_add, relu
from pyvta.compiler.ops.pad import pad as pad_op
from pyvta.compiler.ops.pool import global_avg_pool2d, max_pool2d
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum

ELEMENTWISE_OPS = ("add", "relu", "clip")


def bias_relu_gpu(shape, threads: int = 256):
    """``relu(data + bias[c])`` over NCHW ``shape``: ``(sch, [data, bias, out])``."""
    data = placeholder(tuple(shape), "float32", "data")
    bias = placeholder((shape[1],), "float32", "bias")
    biased = bias_add(data, bias, axis=1, name="biased")
    out = relu(biased, name="out")
    s = create_schedule(out)
    s[biased].compute_inline()
    bind_flat(s, out, threads)
    return s, [data, bias, out]


def max_pool2d_gpu(shape, kernel: int, stride: int, padding: int = 0, threads: int = 256):
    """2-D max pool of NCHW ``shape``: ``(sch, [data, out])``; the window loops run in each
    thread, unrolled."""
    data = placeholder(tuple(shape), "float32", "data")
    out = max_pool2d(data, kernel, stride, padding, name="pool")
    s = create_schedule(out)
    if padding:
        s[s.tensor("pool.pad")].compute_inline()
    bind_flat(s, out, threads)
    s[out].unroll("ry")
    s[out].unroll("rx")
    return s, [data, out]


def elementwise_gpu(op: str, elems: int, clip=None, threads: int = 256):
    """A flat elementwise op over ``elems`` float32 values: ``add`` (``(sch, [a, b, out])``),
    ``relu`` or ``clip`` to ``clip = (lo, hi)`` (``(sch, [x, out])``)."""
    if op not in ELEMENTWISE_OPS:
        raise ValueError(f"elementwise op {op!r} (allowed: {', '.join(ELEMENTWISE_OPS)})")
    x = placeholder((elems,), "float32", "x")
    if op == "add":
        y = placeholder((elems,), "float32", "y")
        ins, out = [x, y], compute((elems,), lambda i: x[i] + y[i], name="out")
    else:
        bounds = (0.0, float("inf")) if op == "relu" else tuple(clip)
        ins, out = [x], compute((elems,), lambda i: clip_value(x[i], bounds), name="out")
    s = create_schedule(out)
    bind_flat(s, out, threads)
    return s, [*ins, out]


def avg_pool2d_gpu(shape, kernel: int, stride: int, padding: int = 0, threads: int = 256):
    """2-D average pool of NCHW ``shape``, zero padding counted in the divisor (ONNX
    ``count_include_pad``; without padding the same): ``(sch, [data, out])``."""
    data = placeholder(tuple(shape), "float32", "data")
    n, c, h, w = shape
    oh, ow = (_out_size("avg_pool2d_gpu", d, kernel, stride, padding) for d in (h, w))
    src = pad_op(data, (0, 0, padding, padding), name="pad") if padding else data
    ry, rx = reduce_axis(kernel, "ry"), reduce_axis(kernel, "rx")
    total = compute(
        (n, c, oh, ow),
        lambda b, f, y, x: te_sum(src[b, f, y * stride + ry, x * stride + rx], [ry, rx]),
        name="total",
    )
    scale = const(1.0 / (kernel * kernel))
    out = compute((n, c, oh, ow), lambda b, f, y, x: total[b, f, y, x] * scale, name="out")
    return _per_thread_reduction(out, total, src if padding else None, threads), [data, out]


def global_avg_pool_gpu(shape, threads: int = 128):
    """Mean over H, W of NCHW ``shape`` -> ``[N, C, 1, 1]``, one channel per thread (the
    reduction serial in the thread): ``(sch, [data, out])``."""
    data = placeholder(tuple(shape), "float32", "data")
    out = global_avg_pool2d(data, name="out")
    s = create_schedule(out)
    total = s.tensor("out.sum")
    return _per_thread_reduction(out, total, None, threads, s), [data, out]


def _per_thread_reduction(out, total, inline, threads: int, s=None):
    """``out`` over a flat launch, each thread reducing its ``total`` in a register."""
    s = s or create_schedule(out)
    if inline is not None:
        s[inline].compute_inline()
    s[total].set_scope("local")
    bind_flat(s, out, threads)
    s[total].compute_at(s[out], s[out].leaf[-1])
    return s
