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


def _simp(s, ranges: dict, env: dict, memo: tuple):
    """``s`` simplified under ``ranges`` (a loop variable's bounds), with the variables of the
    extent-1 loops dropped above it replaced by their values (``env``: one substitution per
    expression, not one walk of the body per dropped loop). ``memo``: the substitution's and
    the simplification's results of the nodes seen under this ``env`` and ``ranges`` (an
    unrolled body's copies share their nodes that do not depend on the copy)."""

    def ex(e):
        return simplify(substitute(e, env, memo[0]), ranges, memo[1])

    if isinstance(s, For):
        ext = ex(s.extent)
        if isinstance(ext, IntImm) and ext.value == 1 and s.kind not in _KEPT_KINDS:
            return _simp(s.body, ranges, {**env, s.var: ex(s.min)}, ({}, {}))
        mn = ex(s.min)
        if isinstance(ext, IntImm) and isinstance(mn, IntImm):
            ranges = {**ranges, s.var: (mn.value, mn.value + ext.value - 1)}
            memo = (memo[0], {})
        body = _simp(s.body, ranges, env, memo)
        return None if body is None else For(s.var, mn, ext, s.kind, body)
    if isinstance(s, Store):
        return Store(s.buffer, ex(s.index), ex(s.value))
    if isinstance(s, IfThenElse):
        c = ex(s.cond)
        if isinstance(c, IntImm):
            branch = s.then if c.value else s.orelse
            return None if branch is None else _simp(branch, ranges, env, memo)
        then = _simp(s.then, ranges, env, memo)
        orelse = None if s.orelse is None else _simp(s.orelse, ranges, env, memo)
        return IfThenElse(c, then, orelse) if then is not None else None
    if isinstance(s, Seq):
        kids = [_simp(c, ranges, env, memo) for c in s.stmts]
        kids = [k for k in kids if k is not None]
        return seq(*kids) if kids else None
    if isinstance(s, Allocate):
        body = _simp(s.body, ranges, env, memo)
        return None if body is None else Allocate(s.buffer, body)
    if isinstance(s, Let):
        return Let(s.var, ex(s.value), _simp(s.body, ranges, env, memo))
    if isinstance(s, Evaluate):
        return Evaluate(ex(s.value))
    raise TypeError(f"unknown statement {type(s).__name__}")


def simplify_stmt(func: PrimFunc) -> PrimFunc:
    body = _simp(func.body, {}, {}, ({}, {}))
    return func.with_body(body if body is not None else Seq([]))
