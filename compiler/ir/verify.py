"""Checker for lowered functions; cheap enough to run after every pass.

``verify(func)`` raises ``IRError`` naming the first problem: a variable used outside the loop
or ``let`` that binds it, a buffer used outside its ``allocate`` (and not a parameter), a
tensor-expression node left in loop IR, an index out of bounds (a constant, or one affine in
loop variables of constant range, outside any ``if`` or ``select`` that may guard it), or a
vectorized / unrolled loop, or one bound to a GPU index, whose extent is not a constant.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import (
    FloatImm,
    IntImm,
    Load,
    Reduce,
    Select,
    TensorRead,
    Var,
    children,
)
from pyvta.compiler.ir.printer import expr_str
from pyvta.compiler.ir.simplify import linear_form
from pyvta.compiler.ir.stmt import (
    THREAD_TAGS,
    Allocate,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Stmt,
    Store,
    stmt_children,
    stmt_exprs,
)
from pyvta.isa.errors import PyvtaError

CONSTANT_EXTENT_KINDS = ("vectorized", "unrolled", *THREAD_TAGS)


class IRError(PyvtaError, ValueError):
    pass


def _where(s: Stmt, first_line: bool) -> str:
    """The statement an error is in, printed (its first line: an expression's statement)."""
    from pyvta.compiler.ir.printer import stmt_str

    text = stmt_str(s)
    return text.split("\n")[0] if first_line else text


def _check_expr(e, vars_in_scope: set, bufs: set, where: Stmt, ranges: dict | None) -> None:
    """``where``: the statement ``e`` is in (printed only for an error: printing every
    statement's subtree made ``verify`` quadratic in the loop nest's depth)."""
    stack = [(e, ranges)]
    while stack:
        n, rng = stack.pop()
        t = type(n)  # by the exact type: node types are not subclassed (``expr.children``)
        if t is Var:
            if n not in vars_in_scope:
                raise IRError(
                    f"variable {n.name} used outside its binding in: {_where(where, True)}"
                )
        elif t is TensorRead or t is Reduce:
            raise IRError(
                f"tensor-expression node {expr_str(n)} left in loop IR: {_where(where, True)}"
            )
        elif t is Select:  # a branch may be a guarded (padding) read: not range-checked
            stack.extend([(n.cond, rng), (n.t, None), (n.f, None)])
        elif t is not IntImm and t is not FloatImm:
            if t is Load:
                _check_access(n.buffer, n.index, bufs, where, rng, True)
            stack.extend((c, rng) for c in children(n))


def _index_range(index, ranges: dict) -> tuple[int, int] | None:
    """[lo, hi] of an index affine in loop variables of known range (None when not)."""
    terms, lo = linear_form(index)
    hi = lo
    for atom, c in terms.values():
        if not isinstance(atom, Var) or atom not in ranges:
            return None
        a, b = ranges[atom]
        lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
    return lo, hi


def _check_access(
    buf, index, bufs: set, where: Stmt, ranges: dict | None, first_line: bool
) -> None:
    """``ranges``: loop variable -> [lo, hi] outside any guard (None inside one); ``where``:
    the statement of the access (printed for an error, its first line with ``first_line``)."""
    if buf not in bufs:
        raise IRError(
            f"buffer {buf.name} is neither a parameter nor allocated here:"
            f" {_where(where, first_line)}"
        )
    guarded = ranges is None  # below an ``if`` (an unrolled tail's dead copy): not checked
    if isinstance(index, IntImm) and not guarded and not 0 <= index.value < buf.size_elems:
        raise IRError(
            f"constant index {index.value} out of bounds for {buf.name} "
            f"({buf.size_elems} elems): {_where(where, first_line)}"
        )
    span = _index_range(index, ranges) if ranges is not None else None
    if span is not None and (span[0] < 0 or span[1] >= buf.size_elems):
        raise IRError(
            f"index {expr_str(index)} of {buf.name} ranges over [{span[0]}, {span[1]}], outside"
            f" its {buf.size_elems} elems [0, {buf.size_elems}): {_where(where, first_line)}"
        )


def _walk(s: Stmt, vars_in_scope: set, bufs: set, ranges: dict | None) -> None:
    """``ranges``: the [lo, hi] of each enclosing loop variable with constant bounds, None
    below an ``if`` (whose condition may guard the accesses)."""
    for e in stmt_exprs(s):
        _check_expr(e, vars_in_scope, bufs, s, ranges)
    if isinstance(s, Store):
        _check_access(s.buffer, s.index, bufs, s, ranges, False)
    if isinstance(s, For):
        if s.kind in CONSTANT_EXTENT_KINDS and not isinstance(s.extent, IntImm):
            raise IRError(f"{s.kind} loop {s.var.name} needs a constant extent")
        if s.var in vars_in_scope:
            raise IRError(f"loop variable {s.var.name} is bound twice")
        inner = ranges
        known = isinstance(s.min, IntImm) and isinstance(s.extent, IntImm) and s.extent.value > 0
        if ranges is not None and known:
            inner = {**ranges, s.var: (s.min.value, s.min.value + s.extent.value - 1)}
        _walk(s.body, vars_in_scope | {s.var}, bufs, inner)
        return
    if isinstance(s, Let):
        _walk(s.body, vars_in_scope | {s.var}, bufs, ranges)
        return
    if isinstance(s, Allocate):
        _walk(s.body, vars_in_scope, bufs | {s.buffer}, ranges)
        return
    guarded = None if isinstance(s, IfThenElse) else ranges
    for c in stmt_children(s):
        _walk(c, vars_in_scope, bufs, guarded)


def verify(func: PrimFunc) -> PrimFunc:
    """Raise ``IRError`` if ``func`` is malformed; return it unchanged otherwise."""
    names = [b.name for b in func.params + func.workspace]
    if len(set(names)) != len(names):
        raise IRError(f"duplicate parameter names in {names}")
    _walk(func.body, set(), set(func.params + func.workspace), {})
    return func
