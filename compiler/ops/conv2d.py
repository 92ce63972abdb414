"""2-D convolution in NCHW and in the blocked NCHW{c}c layout.

Output size per spatial dim: ``(in + 2 * pad - kernel) // stride + 1``.
"""

from __future__ import annotations

from pyvta.compiler.ops.dense import _acc
from pyvta.compiler.ops.pad import pad as pad_op
from pyvta.compiler.te.tensor import Tensor, compute, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum


def _out_size(name: str, n: int, k: int, stride: int, padding: int) -> int:
    if isinstance(stride, bool) or not isinstance(stride, int) or stride <= 0:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be a non-negative int, got {padding!r}")
    out = (n + 2 * padding - k) // stride + 1
    if out <= 0:
        raise ValueError(f"{name}: kernel {k} larger than padded input {n + 2 * padding}")
    return out


def conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    stride: int = 1,
    padding: int = 0,
    out_dtype=None,
    name: str = "conv2d",
) -> Tensor:
    """``data`` [N, C, H, W], ``kernel`` [O, C, KH, KW] -> [N, O, OH, OW]."""
    n, c, h, w = data.shape
    o, c2, kh, kw = kernel.shape
    if c != c2:
        raise ValueError(f"conv2d: data has {c} channels, kernel expects {c2}")
    oh, ow = _out_size(name, h, kh, stride, padding), _out_size(name, w, kw, stride, padding)
    out_dtype = out_dtype or ("int32" if data.dtype == "int8" else data.dtype)
    src = pad_op(data, (0, 0, padding, padding), name=f"{name}.pad") if padding else data
    rc, ry, rx = reduce_axis(c, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    return compute(
        (n, o, oh, ow),
        lambda b, f, y, x: te_sum(
            _acc(src[b, rc, y * stride + ry, x * stride + rx], out_dtype)
            * _acc(kernel[f, rc, ry, rx], out_dtype),
            [rc, ry, rx],
        ),
        name=name,
    )


def conv2d_nchw_numpy(data, weight, stride: int = 1, padding: int = 0):
    """What ``conv2d_nchw`` computes, in float64 numpy (a reference for tests and tuners):
    ``data`` ``[N, C, H, W]``, OIHW ``weight`` -> ``[N, O, OH, OW]``."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    k = weight.shape[2]
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
    win = sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxij,ocij->noyx", win, weight.astype(np.float64))


def conv2d_nchwc(
    data: Tensor,
    kernel: Tensor,
    stride: int = 1,
    padding: int = 0,
    out_dtype=None,
    kernel_inner: str = "oi",
    name: str = "conv2d_nchwc",
) -> Tensor:
    """Blocked convolution.

    ``data``: NCHW{ic}c ``[N, C/ic, H, W, ic]``; ``kernel``: OIHW{oc}o{ic}i
    ``[O/oc, C/ic, KH, KW, oc, ic]`` (``kernel_inner="oi"``) or OIHW{ic}i{oc}o
    ``[O/oc, C/ic, KH, KW, ic, oc]`` (``"io"``). Output: NCHW{oc}c ``[N, O/oc, OH, OW, oc]``."""
    n, cb, h, w, ic = data.shape
    if kernel_inner == "oi":
        ob, cb2, kh, kw, oc, ic2 = kernel.shape
    elif kernel_inner == "io":
        ob, cb2, kh, kw, ic2, oc = kernel.shape
    else:
        raise ValueError(f"kernel_inner must be 'oi' or 'io', got {kernel_inner!r}")
    if (cb, ic) != (cb2, ic2):
        raise ValueError(f"conv2d_nchwc: data channel blocks {(cb, ic)} != kernel's {(cb2, ic2)}")
    oh, ow = _out_size(name, h, kh, stride, padding), _out_size(name, w, kw, stride, padding)
    out_dtype = out_dtype or ("int32" if data.dtype == "int8" else data.dtype)
    src = pad_op(data, (0, 0, padding, padding, 0), name=f"{name}.pad") if padding else data
    rco, ry, rx = reduce_axis(cb, "rco"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    rci = reduce_axis(ic, "rci")

    def wgt(f, fi):
        if kernel_inner == "oi":
            return kernel[f, rco, ry, rx, fi, rci]
        return kernel[f, rco, ry, rx, rci, fi]

    return compute(
        (n, ob, oh, ow, oc),
        lambda b, f, y, x, fi: te_sum(
            _acc(src[b, rco, y * stride + ry, x * stride + rx, rci], out_dtype)
            * _acc(wgt(f, fi), out_dtype),
            [rco, ry, rx, rci],
        ),
        name=name,
    )
