"""Tensors, operations and iteration variables of the tensor-expression language.

``placeholder`` declares an input; ``compute(shape, fn)`` declares ``out[i...] = fn(i...)`` where
``fn`` receives one index ``Var`` per output dimension; reductions use ``reduce_axis`` with
``sum`` / ``max`` / ``min`` at the top of the body.
"""

from __future__ import annotations

import inspect

from pyvta.compiler.ir.expr import (
    INDEX_DTYPE,
    Expr,
    Reduce,
    TensorRead,
    Var,
    check_dtype,
    children,
    const,
)
from pyvta.isa.errors import PyvtaError


class TeError(PyvtaError, ValueError):
    """A tensor expression declared wrongly (shape, axis, reduction, index)."""


class IterVar:
    """A loop variable with its range ``[0, extent)``; ``kind`` is ``"data"`` or ``"reduce"``."""

    __slots__ = ("var", "extent", "kind")

    def __init__(self, name: str, extent: int, kind: str = "data"):
        if not isinstance(extent, int) or extent <= 0:
            raise TeError(f"axis {name} extent must be a positive int, got {extent!r}")
        self.var, self.extent, self.kind = Var(name, INDEX_DTYPE), extent, kind

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self):
        return f"IterVar({self.name}, {self.extent}, {self.kind})"


def _delegate(name):
    def f(self, *args):
        return getattr(self.var, name)(*args)

    f.__name__ = name
    return f


for _op in [
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__neg__",
    "__rshift__",
    "__lshift__",
    "astype",
]:
    setattr(IterVar, _op, _delegate(_op))


class Tensor:
    """The single output of an ``Operation``; calling it with indices builds a read."""

    __slots__ = ("op", "shape", "dtype")

    def __init__(self, op, shape, dtype: str):
        self.op, self.shape, self.dtype = op, tuple(int(d) for d in shape), check_dtype(dtype)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __call__(self, *indices) -> TensorRead:
        return TensorRead(self, indices)

    def __getitem__(self, indices) -> TensorRead:
        if not isinstance(indices, tuple):
            indices = (indices,)
        for axis, (i, extent) in enumerate(zip(indices, self.shape, strict=False)):
            if isinstance(i, int) and not 0 <= i < extent:
                raise TeError(f"{self.name}[...] index {i} of axis {axis} is outside [0, {extent})")
        return TensorRead(self, indices)

    def __repr__(self):
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


class PlaceholderOp:
    __slots__ = ("name", "output")

    def __init__(self, name: str, shape, dtype: str):
        self.name = name
        self.output = Tensor(self, shape, dtype)

    @property
    def inputs(self) -> tuple:
        return ()


class ComputeOp:
    """``output[axis...] = body``; ``body`` may be a ``Reduce`` over ``reduce_axis``."""

    __slots__ = ("name", "axis", "reduce_axis", "body", "tag", "output")

    def __init__(self, name: str, axis, body: Expr, tag: str = ""):
        self.name, self.axis, self.body, self.tag = name, tuple(axis), body, tag
        self.reduce_axis = tuple(body.axes) if isinstance(body, Reduce) else ()
        _check_no_nested_reduce(body.source if isinstance(body, Reduce) else body, name)
        self.output = Tensor(self, [a.extent for a in self.axis], body.dtype)

    @property
    def inputs(self) -> tuple:
        """Tensors read by the body, in first-read order."""
        seen: dict = {}
        stack = [self.body]
        while stack:
            n = stack.pop()
            if isinstance(n, TensorRead):
                seen.setdefault(n.tensor, None)
            stack.extend(reversed(children(n)))
        return tuple(seen)


def _check_no_nested_reduce(e: Expr, name: str) -> None:
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Reduce):
            raise TeError(f"compute {name}: a reduction may only be the whole body")
        stack.extend(children(n))


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` and ``dtype``."""
    shape = tuple(shape)
    if not shape or any(not isinstance(d, int) or d <= 0 for d in shape):
        raise TeError(f"placeholder {name} shape must be positive ints, got {shape}")
    return PlaceholderOp(name, shape, dtype).output


def compute(shape, fcompute, name: str = "compute", tag: str = "") -> Tensor:
    """``out[i0, i1, ...] = fcompute(i0, i1, ...)`` over ``shape``.

    Axis names come from the parameter names of ``fcompute`` (e.g. ``lambda i, j: ...``);
    a ``lambda *i: ...`` gets axes ``i0, i1, ...``.
    """
    shape = tuple(shape)
    sig = inspect.signature(fcompute).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in sig):
        params = [f"i{d}" for d in range(len(shape))]
    else:
        params = [p.name for p in sig]
    if len(params) != len(shape):
        raise TeError(
            f"compute {name}: fcompute takes {len(params)} indices but shape has {len(shape)} dims"
        )
    axis = [IterVar(p, d) for p, d in zip(params, shape, strict=True)]
    body = const(fcompute(*[a.var for a in axis]))
    return ComputeOp(name, axis, body, tag).output


def reduce_axis(extent: int, name: str = "k") -> IterVar:
    """A reduction axis over ``[0, extent)``."""
    return IterVar(name, extent, "reduce")


def _reduce(combiner: str, expr, axis, where=None) -> Reduce:
    axes = axis if isinstance(axis, list | tuple) else [axis]
    for a in axes:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise TypeError(f"{combiner} axis must be reduce_axis IterVars, got {a!r}")
    return Reduce(combiner, expr, axes, where)


def sum(expr, axis, where=None) -> Reduce:  # noqa: A001 - mirrors numpy naming on purpose
    """Sum-reduce ``expr`` over ``axis`` (a reduce IterVar or a list of them), over the points
    where the bool ``where`` holds (default: all; see ``ir.expr.Reduce``)."""
    return _reduce("sum", expr, axis, where)


def max(expr, axis, where=None) -> Reduce:  # noqa: A001
    """Max-reduce ``expr`` over ``axis`` (where ``where`` holds, as ``sum``)."""
    return _reduce("max", expr, axis, where)


def min(expr, axis, where=None) -> Reduce:  # noqa: A001
    """Min-reduce ``expr`` over ``axis`` (where ``where`` holds, as ``sum``)."""
    return _reduce("min", expr, axis, where)
