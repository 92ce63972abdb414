"""The fused epilogue of a GPU conv2d / dense: ``clip(acc + bias[c] + residual, lo, hi)``.

A template with an epilogue computes its reduction into a ``local`` stage (the register tile)
and writes ``out`` through the epilogue, so the bias, the residual and the activation are
applied in registers before the one store of each output (no second kernel, no second pass
over memory). This is what the graph's fused ``conv2d`` / ``dense`` nodes compute
(``graph.passes.fuse_operators``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyvta.compiler.ir.expr import const
from pyvta.compiler.te.expr_ops import maximum, minimum
from pyvta.compiler.te.tensor import compute, placeholder


@dataclass(frozen=True)
class Epilogue:
    """``bias``: add a per-channel float32 bias ``[C]``; ``residual``: add a tensor of the
    output's shape; ``clip``: ``(lo, hi)`` bounds (infinite ones are not applied), or None."""

    bias: bool = False
    residual: bool = False
    clip: tuple[float, float] | None = None

    @property
    def empty(self) -> bool:
        return not (self.bias or self.residual or self.clip)


NO_EPILOGUE = Epilogue()


def clip_value(v, clip):
    """``v`` clipped to ``clip = (lo, hi)``; an infinite bound is not applied."""
    lo, hi = clip
    if not math.isinf(lo):
        v = maximum(v, const(float(lo)))
    if not math.isinf(hi):
        v = minimum(v, const(float(hi)))
    return v


def apply_epilogue(acc, ep: Epilogue, channel_axis: int, name: str = "out"):
    """``(out, extra placeholders)``: ``out`` reads ``acc`` through ``ep``; the placeholders
    are ``[bias]`` and/or ``[residual]``, in that order (the template's argument order)."""
    shape = acc.shape
    bias = placeholder((shape[channel_axis],), "float32", "bias") if ep.bias else None
    res = placeholder(shape, "float32", "residual") if ep.residual else None

    def value(*idx):
        v = acc(*idx)
        if bias is not None:
            v = v + bias(idx[channel_axis])
        if res is not None:
            v = v + res(*idx)
        return clip_value(v, ep.clip) if ep.clip else v

    # axis names as the templates that schedule ``out`` split them (NCHW / matrix)
    if len(shape) == 4:
        out = compute(shape, lambda b, f, y, x: value(b, f, y, x), name=name)
    else:
        out = compute(shape, lambda i, j: value(i, j), name=name)
    return out, [t for t in (bias, res) if t is not None]
