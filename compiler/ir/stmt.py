"""Statement nodes of the loop IR, plus ``Buffer`` (a named, typed, flat memory region) and
``PrimFunc`` (the lowered function: buffer parameters and a body)."""

from __future__ import annotations

import math

from pyvta.compiler.ir.expr import Expr, Var, check_dtype, const

THREAD_TAGS = tuple(f"{k}.{d}" for k in ("blockIdx", "threadIdx") for d in "xyz")
"""GPU launch indices a loop can be bound to (``bind``): the loop runs as that index."""
FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "vthread", *THREAD_TAGS)


class Buffer:
    """A dense row-major region of ``shape`` elements of ``dtype`` in memory ``scope``."""

    __slots__ = ("name", "dtype", "shape", "scope")

    def __init__(self, name: str, dtype: str, shape, scope: str = "global"):
        self.name, self.dtype, self.scope = name, check_dtype(dtype), scope
        self.shape = tuple(int(d) for d in shape)
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"buffer {name} has a non-positive extent in shape {self.shape}")

    @property
    def size_elems(self) -> int:
        return math.prod(self.shape)

    def strides_elems(self) -> tuple[int, ...]:
        out, acc = [], 1
        for d in reversed(self.shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def __repr__(self):
        return f"Buffer({self.name}, {self.dtype}, {self.shape}, {self.scope!r})"


class Stmt:
    __slots__ = ()

    def __repr__(self):
        from pyvta.compiler.ir.printer import stmt_str

        return stmt_str(self)


class For(Stmt):
    """``for var in [min, min + extent)``; ``kind`` in ``FOR_KINDS``. A loop bound to a
    ``THREAD_TAGS`` index is not a loop on a GPU: each block / thread runs one iteration."""

    __slots__ = ("var", "min", "extent", "kind", "body")

    def __init__(self, var: Var, min_, extent, kind: str, body: Stmt):
        if kind not in FOR_KINDS:
            raise ValueError(f"loop kind {kind!r} is not one of {FOR_KINDS}")
        self.var, self.min, self.extent = var, const(min_), const(extent)
        self.kind, self.body = kind, body


class Allocate(Stmt):
    """Scratch ``buffer`` (in ``buffer.scope``) live for the duration of ``body``."""

    __slots__ = ("buffer", "body")

    def __init__(self, buffer: Buffer, body: Stmt):
        self.buffer, self.body = buffer, body


class Store(Stmt):
    __slots__ = ("buffer", "index", "value")

    def __init__(self, buffer: Buffer, index, value: Expr):
        if value.dtype != buffer.dtype:
            raise TypeError(
                f"storing {value.dtype} into {buffer.name} of dtype {buffer.dtype}; cast explicitly"
            )
        self.buffer, self.index, self.value = buffer, const(index), value


class Let(Stmt):
    __slots__ = ("var", "value", "body")

    def __init__(self, var: Var, value: Expr, body: Stmt):
        self.var, self.value, self.body = var, value, body


class IfThenElse(Stmt):
    __slots__ = ("cond", "then", "orelse")

    def __init__(self, cond: Expr, then: Stmt, orelse: Stmt | None = None):
        if cond.dtype != "bool":
            raise TypeError(f"if condition must be bool, got {cond.dtype}")
        self.cond, self.then, self.orelse = cond, then, orelse


class Evaluate(Stmt):
    """Evaluate an expression for its side effect (an intrinsic ``Call``)."""

    __slots__ = ("value",)

    def __init__(self, value: Expr):
        self.value = value


class Seq(Stmt):
    __slots__ = ("stmts",)

    def __init__(self, stmts):
        flat = []
        for s in stmts:
            if isinstance(s, Seq):
                flat.extend(s.stmts)
            elif s is not None:
                flat.append(s)
        self.stmts = tuple(flat)


def seq(*stmts) -> Stmt:
    s = Seq(stmts)
    return s.stmts[0] if len(s.stmts) == 1 else s


class PrimFunc:
    """A lowered function: ``params`` are global buffers passed by pointer, in order;
    ``workspace`` are scratch buffers the caller provides after them (see
    ``passes.lift_workspace``)."""

    __slots__ = ("name", "params", "body", "workspace")

    def __init__(self, name: str, params, body: Stmt, workspace=()):
        self.name, self.params, self.body = name, tuple(params), body
        self.workspace = tuple(workspace)

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.name, self.params, body, self.workspace)

    def __str__(self):
        from pyvta.compiler.ir.printer import func_str

        return func_str(self)

    __repr__ = __str__


def stmt_children(s: Stmt) -> tuple:
    if isinstance(s, For | Allocate | Let):
        return (s.body,)
    if isinstance(s, IfThenElse):
        return (s.then,) if s.orelse is None else (s.then, s.orelse)
    if isinstance(s, Seq):
        return s.stmts
    return ()


def stmt_exprs(s: Stmt) -> tuple:
    if isinstance(s, For):
        return (s.min, s.extent)
    if isinstance(s, Store):
        return (s.index, s.value)
    if isinstance(s, Let):
        return (s.value,)
    if isinstance(s, IfThenElse):
        return (s.cond,)
    if isinstance(s, Evaluate):
        return (s.value,)
    return ()


def stmt_map(s: Stmt, fstmt=None, fexpr=None) -> Stmt:
    """Rebuild ``s`` bottom-up. ``fexpr(e)`` rewrites each expression slot; ``fstmt(node)`` may
    return a replacement for each (already rebuilt) statement, or None to keep it."""
    fe = fexpr or (lambda e: e)
    if isinstance(s, For):
        out = For(s.var, fe(s.min), fe(s.extent), s.kind, stmt_map(s.body, fstmt, fexpr))
    elif isinstance(s, Allocate):
        out = Allocate(s.buffer, stmt_map(s.body, fstmt, fexpr))
    elif isinstance(s, Store):
        out = Store(s.buffer, fe(s.index), fe(s.value))
    elif isinstance(s, Let):
        out = Let(s.var, fe(s.value), stmt_map(s.body, fstmt, fexpr))
    elif isinstance(s, IfThenElse):
        orelse = None if s.orelse is None else stmt_map(s.orelse, fstmt, fexpr)
        out = IfThenElse(fe(s.cond), stmt_map(s.then, fstmt, fexpr), orelse)
    elif isinstance(s, Evaluate):
        out = Evaluate(fe(s.value))
    elif isinstance(s, Seq):
        out = Seq([stmt_map(c, fstmt, fexpr) for c in s.stmts])
    else:
        raise TypeError(f"unknown statement {type(s).__name__}")
    if fstmt is not None:
        r = fstmt(out)
        if r is not None:
            return r
    return out
