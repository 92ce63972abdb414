"""Tensor intrinsics: a declared compute pattern plus how to emit it.

``TensorIntrin.compute`` is a small tensor expression over placeholders (e.g. a 16x16 GEMM);
``tensorize`` replaces a loop sub-nest whose extents and reduction match it by
``emit(inputs, outputs)``, which gets one ``TensorRegion`` per placeholder and output and returns
a loop-IR statement (for instance an ``Evaluate(Call(...))`` of a hardware instruction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyvta.compiler.ir.expr import Expr, Reduce


@dataclass(frozen=True)
class TensorRegion:
    """Where a matched tensor tile lives: ``buffer`` element ``offset`` and per-dimension
    ``strides_elems`` for the intrinsic's dimensions (in the intrinsic's index order)."""

    buffer: object
    offset: Expr
    strides_elems: tuple


@dataclass(frozen=True)
class TensorIntrin:
    name: str
    output: object  # te.Tensor declared over ``inputs``
    inputs: tuple  # placeholder te.Tensors, in the order emit receives them
    emit: Callable  # (list[TensorRegion], list[TensorRegion]) -> Stmt

    @property
    def loop_extents(self) -> tuple[int, ...]:
        op = self.output.op
        return tuple(a.extent for a in op.axis) + tuple(a.extent for a in op.reduce_axis)

    @property
    def combiner(self) -> str | None:
        body = self.output.op.body
        return body.combiner if isinstance(body, Reduce) else None
