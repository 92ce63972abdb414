"""Requantization of int32 accumulators to int8."""

from __future__ import annotations

from pyvta.compiler.ir.expr import const
from pyvta.compiler.te.expr_ops import maximum, minimum
from pyvta.compiler.te.tensor import Tensor, compute


def requantize(data: Tensor, shift: int, name: str = "requantize") -> Tensor:
    """``int8(clip(data >> shift, -128, 127))`` with an arithmetic shift (rounds toward -inf).

    ``data``: int32; ``shift``: 0..31 (a power-of-two scale)."""
    if data.dtype != "int32":
        raise TypeError(f"requantize needs int32 input, got {data.dtype}")
    if isinstance(shift, bool) or not isinstance(shift, int) or not 0 <= shift <= 31:
        raise ValueError(f"shift must be an int in 0..31, got {shift!r}")

    def f(*i):
        v = data(*i) >> const(shift) if shift else data(*i)
        return minimum(maximum(v, const(-128)), const(127)).astype("int8")

    return compute(data.shape, f, name=name)
