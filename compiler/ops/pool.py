"""Pooling: 2-D max pool and global average pool (NCHW)."""

from __future__ import annotations

from pyvta.compiler.ir.expr import const
from pyvta.compiler.ops.conv2d import _out_size
from pyvta.compiler.ops.pad import pad as pad_op
from pyvta.compiler.te.tensor import Tensor, compute, reduce_axis
from pyvta.compiler.te.tensor import max as te_max
from pyvta.compiler.te.tensor import sum as te_sum


def max_pool2d(data: Tensor, kernel: int, stride: int, padding: int = 0, name="max_pool2d"):
    """[N, C, H, W] -> [N, C, OH, OW]; padded cells never win (they hold the dtype minimum)."""
    n, c, h, w = data.shape
    oh, ow = (
        _out_size(name, h, kernel, stride, padding),
        _out_size(name, w, kernel, stride, padding),
    )
    lowest = -3.4e38 if data.dtype == "float32" else {"int8": -128, "int32": -(2**31)}[data.dtype]
    src = data
    if padding:
        src = pad_op(data, (0, 0, padding, padding), value=lowest, name=f"{name}.pad")
    ry, rx = reduce_axis(kernel, "ry"), reduce_axis(kernel, "rx")
    return compute(
        (n, c, oh, ow),
        lambda b, f, y, x: te_max(src[b, f, y * stride + ry, x * stride + rx], [ry, rx]),
        name=name,
    )


def global_avg_pool2d(data: Tensor, name: str = "global_avg_pool2d") -> Tensor:
    """[N, C, H, W] -> [N, C, 1, 1] mean over H, W (int32: floor of the mean)."""
    n, c, h, w = data.shape
    ry, rx = reduce_axis(h, "ry"), reduce_axis(w, "rx")
    total = compute((n, c), lambda b, f: te_sum(data[b, f, ry, rx], [ry, rx]), name=f"{name}.sum")
    if data.dtype == "float32":
        return compute(
            (n, c, 1, 1), lambda b, f, y, x: total[b, f] * const(1.0 / (h * w)), name=name
        )
    return compute((n, c, 1, 1), lambda b, f, y, x: total[b, f] // const(h * w), name=name)
