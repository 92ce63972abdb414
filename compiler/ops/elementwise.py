"""Elementwise operators: add, bias_add, relu, cast."""

from __future__ import annotations

from pyvta.compiler.ir.expr import const
from pyvta.compiler.te.expr_ops import maximum
from pyvta.compiler.te.tensor import Tensor, compute


def add(a: Tensor, b: Tensor, name: str = "add") -> Tensor:
    """``a + b`` for equal shapes and dtypes."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(
            f"add needs equal shapes and dtypes, got {a.shape}/{a.dtype} and {b.shape}/{b.dtype}"
        )
    return compute(a.shape, lambda *i: a(*i) + b(*i), name=name)


def bias_add(data: Tensor, bias: Tensor, axis: int = 1, name: str = "bias_add") -> Tensor:
    """``data + bias`` broadcast along ``axis`` (the channel axis; 1 for NCHW).

    For blocked layouts pass ``axis`` as a tuple ``(outer, inner)`` of the two channel axes; the
    bias is then indexed ``bias[outer * block + inner]``."""
    if isinstance(axis, tuple):
        o, i = axis
        block = data.shape[i]

        def f(*idx):
            return data(*idx) + bias(idx[o] * block + idx[i])
    else:
        if bias.shape != (data.shape[axis],):
            raise ValueError(f"bias shape {bias.shape} must be ({data.shape[axis]},)")

        def f(*idx):
            return data(*idx) + bias(idx[axis])

    return compute(data.shape, f, name=name)


def relu(data: Tensor, name: str = "relu") -> Tensor:
    zero = const(0.0 if data.dtype == "float32" else 0, data.dtype)
    return compute(data.shape, lambda *i: maximum(data(*i), zero), name=name)


def cast(data: Tensor, dtype: str, name: str = "cast") -> Tensor:
    return compute(data.shape, lambda *i: data(*i).astype(dtype), name=name)
