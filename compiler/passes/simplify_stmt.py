"""``simplify_stmt``: simplify every expression under the ranges of the enclosing loops, drop
loops of extent 1 (their variable becomes 0; not parallel loops, nor loops bound to a GPU index,
which define the launch) and branches whose condition is constant."""

from __future__ import annotations

from pyvta.compiler.ir.expr import IntImm, substitute
from pyvta.compiler.ir.simplify import simplify
from pyvta.compiler.ir.stmt import (
    THREAD_TAGS,
    Allocate,
    Evaluate,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Seq,
    Store,
    seq,
)

_KEPT_KINDS = ("parallel", *THREAD_TAGS)


def _simp(s, ranges: dict):
    if isinstance(s, For):
        ext = simplify(s.extent, ranges)
        if isinstance(ext, IntImm) and ext.value == 1 and s.kind not in _KEPT_KINDS:
            body = _subst(s.body, s.var, simplify(s.min, ranges))
            return _simp(body, ranges)
        mn = simplify(s.min, ranges)
        if isinstance(ext, IntImm) and isinstance(mn, IntImm):
            ranges = {**ranges, s.var: (mn.value, mn.value + ext.value - 1)}
        body = _simp(s.body, ranges)
        return None if body is None else For(s.var, mn, ext, s.kind, body)
    if isinstance(s, Store):
        return Store(s.buffer, simplify(s.index, ranges), simplify(s.value, ranges))
    if isinstance(s, IfThenElse):
        c = simplify(s.cond, ranges)
        if isinstance(c, IntImm):
            branch = s.then if c.value else s.orelse
            return None if branch is None else _simp(branch, ranges)
        then = _simp(s.then, ranges)
        orelse = None if s.orelse is None else _simp(s.orelse, ranges)
        return IfThenElse(c, then, orelse) if then is not None else None
    if isinstance(s, Seq):
        kids = [_simp(c, ranges) for c in s.stmts]
        kids = [k for k in kids if k is not None]
        return seq(*kids) if kids else None
    if isinstance(s, Allocate):
        body = _simp(s.body, ranges)
        return None if body is None else Allocate(s.buffer, body)
    if isinstance(s, Let):
        return Let(s.var, simplify(s.value, ranges), _simp(s.body, ranges))
    if isinstance(s, Evaluate):
        return Evaluate(simplify(s.value, ranges))
    raise TypeError(f"unknown statement {type(s).__name__}")


def _subst(s, var, value):
    from pyvta.compiler.ir.stmt import stmt_map

    return stmt_map(s, None, lambda e: substitute(e, {var: value}))


def simplify_stmt(func: PrimFunc) -> PrimFunc:
    body = _simp(func.body, {})
    return func.with_body(body if body is not None else Seq([]))
