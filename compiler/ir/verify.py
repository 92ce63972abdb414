"""Checker for lowered functions; cheap enough to run after every pass.

``verify(func)`` raises ``IRError`` naming the first problem: a variable used outside the loop
or ``let`` that binds it, a buffer used outside its ``allocate`` (and not a parameter), a
tensor-expression node left in loop IR, a constant index out of bounds, or a vectorized /
unrolled loop whose extent is not a constant.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import IntImm, Load, Reduce, TensorRead, Var, children
from pyvta.compiler.ir.printer import expr_str
from pyvta.compiler.ir.stmt import (
    Allocate,
    For,
    Let,
    PrimFunc,
    Stmt,
    Store,
    stmt_children,
    stmt_exprs,
)
from pyvta.isa.errors import PyvtaError


class IRError(PyvtaError, ValueError):
    pass


def _check_expr(e, vars_in_scope: set, bufs: set, where: str) -> None:
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Var) and n not in vars_in_scope:
            raise IRError(f"variable {n.name} used outside its binding in: {where}")
        if isinstance(n, TensorRead | Reduce):
            raise IRError(f"tensor-expression node {expr_str(n)} left in loop IR: {where}")
        if isinstance(n, Load):
            _check_access(n.buffer, n.index, bufs, where)
        stack.extend(children(n))


def _check_access(buf, index, bufs: set, where: str) -> None:
    if buf not in bufs:
        raise IRError(f"buffer {buf.name} is neither a parameter nor allocated here: {where}")
    if isinstance(index, IntImm) and not 0 <= index.value < buf.size_elems:
        raise IRError(
            f"constant index {index.value} out of bounds for {buf.name} "
            f"({buf.size_elems} elems): {where}"
        )


def _walk(s: Stmt, vars_in_scope: set, bufs: set) -> None:
    from pyvta.compiler.ir.printer import stmt_str

    for e in stmt_exprs(s):
        _check_expr(e, vars_in_scope, bufs, stmt_str(s).split("\n")[0])
    if isinstance(s, Store):
        _check_access(s.buffer, s.index, bufs, stmt_str(s))
    if isinstance(s, For):
        if s.kind in ("vectorized", "unrolled") and not isinstance(s.extent, IntImm):
            raise IRError(f"{s.kind} loop {s.var.name} needs a constant extent")
        if s.var in vars_in_scope:
            raise IRError(f"loop variable {s.var.name} is bound twice")
        _walk(s.body, vars_in_scope | {s.var}, bufs)
        return
    if isinstance(s, Let):
        _walk(s.body, vars_in_scope | {s.var}, bufs)
        return
    if isinstance(s, Allocate):
        _walk(s.body, vars_in_scope, bufs | {s.buffer})
        return
    for c in stmt_children(s):
        _walk(c, vars_in_scope, bufs)


def verify(func: PrimFunc) -> PrimFunc:
    """Raise ``IRError`` if ``func`` is malformed; return it unchanged otherwise."""
    names = [b.name for b in func.params + func.workspace]
    if len(set(names)) != len(names):
        raise IRError(f"duplicate parameter names in {names}")
    _walk(func.body, set(), set(func.params + func.workspace))
    return func
