"""numpy kernels for every graph op on the ``"cpu"`` target (float and quantized).

Float ops compute in float32 (im2col + BLAS for conv2d/dense). Quantized ``qconv2d``/``qdense``
(NCHW / NC int8, any group count) use float64 im2col products, exact for int8 operands (see
:func:`runtime.vta_ops.exact_dot_terms_ok`), and the contract's shared
:func:`~runtime.vta_ops.requantize`, so they equal the VTA golden model bit for bit.
Packed ``vta_*`` ops are not here: the executor sends them to the VTA backend.
"""

from __future__ import annotations

import numpy as np

from pyvta.runtime import cpu_llvm, layout, vta_ops
from pyvta.runtime.ir import GraphError
from pyvta.runtime.vta_ops import FusedParams, exact_dot_terms_ok, requantize


def _windows(x: np.ndarray, kernel, strides, pads, dilations=(1, 1), fill=0.0) -> np.ndarray:
    """``(N, C, H, W)`` -> ``(N, C, KH, KW, OH, OW)`` sliding windows (a copy). A strided
    input is first split into its ``SH x SW`` phases (rows ``a::SH``, columns ``b::SW``), so
    every window position copies unit-stride rows of one phase."""
    t, l, b, r = pads
    if any(pads):
        x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (w - (kw - 1) * dw - 1) // sw + 1
    phases: dict[tuple[int, int], np.ndarray] = {}
    cols = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            (y0, a), (x0, bb) = divmod(i * dh, sh), divmod(j * dw, sw)
            if (a, bb) not in phases:
                phases[a, bb] = np.ascontiguousarray(x[:, :, a::sh, bb::sw])
            cols[:, :, i, j] = phases[a, bb][:, :, y0 : y0 + oh, x0 : x0 + ow]
    return cols


def conv_gemm(w_shape, out_shape, attrs) -> tuple[int, int, int] | None:
    """The ``(M, N, K)`` of the compiled GEMM :func:`_conv_sum` runs per image for a float conv
    with weights of ``w_shape`` and output of ``out_shape`` (its output channels by its window's
    values, times the window's values by its pixels); None where it runs numpy's (groups)."""
    if attrs["group"] != 1:
        return None
    o, cg, kh, kw = w_shape
    return o, out_shape[2] * out_shape[3], cg * kh * kw


def _conv_sum(x, w, attrs, dtype) -> np.ndarray:
    """Grouped convolution without bias in ``dtype`` arithmetic: ``(N, O, OH, OW)``."""
    o, cg, kh, kw = w.shape
    g = attrs["group"]
    cols = _windows(x.astype(dtype), (kh, kw), attrs["strides"], attrs["pads"], attrs["dilations"])
    n, c, _, _, oh, ow = cols.shape
    cols = cols.reshape(n, g, cg * kh * kw, oh * ow)
    wm = w.astype(dtype).reshape(g, o // g, cg * kh * kw)
    if dtype == np.float32 and g == 1:  # the compiled llvmlite GEMM
        return np.stack([cpu_llvm.gemm(wm[0], cols[i, 0]) for i in range(n)]).reshape(n, o, oh, ow)
    return np.matmul(wm, cols).reshape(n, o, oh, ow)


def conv2d(ins, attrs):
    x, w, b = ins[:3]
    y = _conv_sum(x, w, attrs, np.float32)
    if b.dtype == y.dtype:  # in place: the same sums, one pass less
        y += b.reshape(1, -1, 1, 1)
    else:
        y = y + b.reshape(1, -1, 1, 1)
    return _epilogue(y, ins[3] if len(ins) > 3 else None, attrs)


def dense(ins, attrs):
    return dense_transposed(ins[0], np.ascontiguousarray(ins[1].T), ins[2:], attrs)


def dense_transposed(x, wt, rest, attrs):
    """:func:`dense` with its weight given transposed, ``wt [K, N]`` (or as
    ``cpu_llvm.gemm_operand`` pads it: extra zero columns), and ``rest = [bias, (residual)]``:
    a backend with constant weights prepares them once."""
    n = rest[0].shape[-1]
    y = cpu_llvm.gemm(x.astype(np.float32), wt)[:, :n] + rest[0]
    return _epilogue(y, rest[1] if len(rest) > 1 else None, attrs)


def _epilogue(y, res, attrs):
    """``clip(y + res)`` as float32 (``y``, a fresh array, is overwritten)."""
    if res is not None:
        y = y + res
    clip = attrs.get("clip")
    if clip is not None:
        y = np.clip(y, clip[0], clip[1], out=y if y.dtype == np.float32 else None)
    return y.astype(np.float32, copy=False)


def qaccumulate(op: str, ins, attrs) -> np.ndarray:
    """int64 ``sum(x * w) + bias`` of a ``qconv2d``/``qdense`` (before residual and shift)."""
    x, w, b = ins[:3]
    if op == "qdense":
        return (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.int64) + b
    o, cg, kh, kw = w.shape
    if not exact_dot_terms_ok(cg * kh * kw):
        raise ValueError(f"reduction of {cg * kh * kw} terms is too long for exact float64")
    acc = _conv_sum(x, w, attrs, np.float64).astype(np.int64)
    return acc + b.astype(np.int64).reshape(1, -1, 1, 1)


def qconv2d(ins, attrs):
    acc = qaccumulate("qconv2d", ins, attrs)
    return requantize(acc, ins[3] if len(ins) > 3 else None, FusedParams.from_attrs(attrs))


def qdense(ins, attrs):
    acc = qaccumulate("qdense", ins, attrs)
    return requantize(acc, ins[3] if len(ins) > 3 else None, FusedParams.from_attrs(attrs))


def batch_norm(ins, attrs):
    x, scale, bias, mean, var = ins
    s = (scale / np.sqrt(var + attrs["epsilon"])).astype(np.float32)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) * s.reshape(shape) + bias.reshape(shape)


def max_pool(ins, attrs):
    """The maximum over each window, taken along the width and then along the height of the
    padded input (a max is separable and exact: the same values as a max over windows)."""
    x = ins[0]
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    t, l, b, r = attrs["pads"]
    (kh, kw), (sh, sw) = attrs["kernel"], attrs["strides"]
    n, c, h, w = x.shape
    if any(attrs["pads"]):
        xp = np.full((n, c, h + t + b, w + l + r), fill, x.dtype)
        xp[:, :, t : t + h, l : l + w] = x
        x = xp
    oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    rows = x[:, :, : sh * (oh - 1) + kh]
    across = rows[..., : sw * (ow - 1) + 1 : sw].copy()
    for j in range(1, kw):
        np.maximum(across, rows[..., j : j + sw * (ow - 1) + 1 : sw], out=across)
    out = across[:, :, : sh * (oh - 1) + 1 : sh].copy()
    for i in range(1, kh):
        np.maximum(out, across[:, :, i : i + sh * (oh - 1) + 1 : sh], out=out)
    return out


def avg_pool(ins, attrs):
    x = ins[0].astype(np.float32)
    kh, kw = attrs["kernel"]
    cols = _windows(x, (kh, kw), attrs["strides"], attrs["pads"])
    total = cols.sum(axis=(2, 3))
    if attrs["count_include_pad"] or not any(attrs["pads"]):
        return (total / np.float32(kh * kw)).astype(np.float32)
    ones = np.ones((1, 1) + x.shape[2:], np.float32)
    count = _windows(ones, (kh, kw), attrs["strides"], attrs["pads"]).sum(axis=(2, 3))
    return (total / count).astype(np.float32)


def softmax(ins, attrs):
    x = ins[0]
    e = np.exp(x - x.max(axis=attrs["axis"], keepdims=True))
    return (e / e.sum(axis=attrs["axis"], keepdims=True)).astype(np.float32)


def quantize(ins, attrs):
    """``int8(clip(round_half_even(x * 2**frac_bits), -128, 127))`` (of the NCHW{src_block}c
    form of ``channels`` channels when the node has ``src_block``); NaN/Inf raise GraphError."""
    x = ins[0]
    if attrs.get("src_block"):
        x = layout.unpack_nchw(x[:, :, :, :, None, :], attrs["channels"])
    if not np.isfinite(x).all():
        raise GraphError(
            f"quantize to int8: {int((~np.isfinite(x)).sum())} of {x.size} values are"
            " NaN or Inf (an int8 model needs finite inputs and float layers before it that keep"
            " them finite; the float target 'cpu' propagates NaN)"
        )
    q = np.round(x.astype(np.float32) * np.float32(2.0 ** attrs["frac_bits"]))
    return np.clip(q, -128, 127).astype(np.int8)


def dequantize(ins, attrs):
    """``float32(q) * 2**-frac_bits`` (in NCHW{dst_block}c when the node has ``dst_block``,
    padded channels zero)."""
    out = ins[0].astype(np.float32) * np.float32(2.0 ** -attrs["frac_bits"])
    if not attrs.get("dst_block"):
        return out
    packed = layout.pack_nchw(out, attrs["dst_block"])  # [N, C/b, H, W, 1, b]
    return packed.reshape(packed.shape[:4] + packed.shape[5:])


KERNELS = {
    "conv2d": conv2d,
    "dense": dense,
    "qconv2d": qconv2d,
    "qdense": qdense,
    "matmul": lambda ins, a: np.matmul(ins[0], ins[1]),
    "add": lambda ins, a: ins[0] + ins[1],
    "mul": lambda ins, a: ins[0] * ins[1],
    "relu": lambda ins, a: np.maximum(ins[0], 0).astype(ins[0].dtype),
    "clip": lambda ins, a: np.clip(ins[0], a["min"], a["max"]).astype(ins[0].dtype),
    "identity": lambda ins, a: ins[0],
    "softmax": softmax,
    "batch_norm": batch_norm,
    "max_pool": max_pool,
    "avg_pool": avg_pool,
    "global_avg_pool": lambda ins, a: ins[0].astype(np.float32).mean(axis=(2, 3), keepdims=True),
    "flatten": lambda ins, a: ins[0].reshape(int(np.prod(ins[0].shape[: a["axis"]])), -1),
    "reshape": lambda ins, a: ins[0].reshape(a["shape"]),
    "concat": lambda ins, a: np.concatenate(ins, axis=a["axis"]),
    "quantize": quantize,
    "dequantize": dequantize,
    "pack_nchw": lambda ins, a: layout.pack_nchw(ins[0], a["block"]),
    "unpack_nchw": lambda ins, a: layout.unpack_nchw(ins[0], a["channels"]),
    "pack_nc": lambda ins, a: layout.pack_nc(ins[0], a["block"]),
    "pack_fold_taps": lambda ins, a: layout.pack_fold_taps(
        ins[0], a["kernel"], a["strides"], a["pads"], a["block"]
    ),
    "packed_flatten": lambda ins, a: ins[0].reshape(ins[0].shape[:2] + (1, ins[0].shape[-1])),
    "qglobal_avg_pool": lambda ins, a: vta_ops.global_avg_pool_int8(
        ins[0], (2, 3), a["mult"], a["shift"], vta_ops.pool_offsets(a, ins[0])
    ),
    "unpack_nc": lambda ins, a: layout.unpack_nc(ins[0], a["channels"]),
}


def run_cpu_op(op: str, ins: list[np.ndarray], attrs: dict) -> np.ndarray:
    """Run one op with numpy; raises ``NotImplementedError`` naming the ops the CPU runs."""
    kernel = KERNELS.get(op)
    if kernel is None:
        raise NotImplementedError(f"op {op!r} has no cpu kernel (cpu runs: {sorted(KERNELS)})")
    return kernel(ins, attrs)
