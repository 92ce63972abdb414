"""Elementwise and pooling operators for the GPU: one output element per thread, a flat
1-D launch of ``threads`` per block (``fetch.bind_flat``); producers (padding) inlined."""

from __future__ import annotations

from pyvta.compiler.ops.cuda.fetch import bind_flat
from pyvta.compiler.ops.elementwise import bias_add, relu
from pyvta.compiler.ops.pool import max_pool2d
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import placeholder


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
