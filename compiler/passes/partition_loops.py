"""``partition_loops``: split a loop whose body is guarded by a tail check into a main part,
where every guard is provably true, and a tail that keeps the guards.

A tile that does not divide its dimension leaves guards such as ``if i.o * 6 + i.c < 512`` in
the innermost loops; evaluated every iteration they cost branches and register copies in the
micro-kernel. For a guard ``a * v + rest < bound`` (``a > 0``, ``rest`` bounded by the loops
around and inside it; a conjunction of such guards too) the loop over ``v`` is split where a
guard can first fail; the
following ``simplify_stmt`` folds the guards of the main part away. A parallel loop keeps its
main part parallel; a one-iteration tail runs serially. Vectorized loops are left alone.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import BinOp, Compare, IntImm, Var, substitute
from pyvta.compiler.ir.simplify import linear_bound, linear_form, var_coef
from pyvta.compiler.ir.stmt import (
    Allocate,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Seq,
    stmt_children,
    stmt_map,
)

_SPLITTABLE = ("serial", "unrolled", "parallel")


def partition_loops(func: PrimFunc) -> PrimFunc:
    return func.with_body(_part(func.body, {}))


def _part(s, ranges: dict):
    """Rebuild ``s`` (loop ranges of the enclosing loops in ``ranges``), splitting loops."""
    if isinstance(s, For):
        parts = _split(s, ranges) if s.kind in _SPLITTABLE else [s]
        out = [
            For(p.var, p.min, p.extent, p.kind, _part(p.body, _with_loop(ranges, p))) for p in parts
        ]
        return out[0] if len(out) == 1 else Seq(out)
    if isinstance(s, Seq):
        return Seq([_part(k, ranges) for k in s.stmts])
    if isinstance(s, IfThenElse):
        orelse = None if s.orelse is None else _part(s.orelse, ranges)
        return IfThenElse(s.cond, _part(s.then, ranges), orelse)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _part(s.body, ranges))
    if isinstance(s, Let):
        return Let(s.var, s.value, _part(s.body, ranges))
    return s  # Store, Evaluate: no loops inside


def _with_loop(ranges: dict, s: For) -> dict:
    if isinstance(s.min, IntImm) and isinstance(s.extent, IntImm):
        return {**ranges, s.var: (s.min.value, s.min.value + s.extent.value - 1)}
    return ranges


def _split(loop: For, ranges: dict) -> list[For]:
    """``[loop]``, or ``[main, tail]`` when the loop's guards hold for a prefix of it."""
    if loop.var not in _with_loop(ranges, loop):
        return [loop]
    lo = loop.min.value
    hi = lo + loop.extent.value  # exclusive
    clean = hi
    for cond, scope in _guards(loop.body, _with_loop(ranges, loop)):
        limit = _clean_until(cond, loop.var, lo, scope)
        if limit is not None:
            clean = min(clean, limit)
    if not lo < clean < hi:
        return [loop]
    tail_var = Var(loop.var.name + ".tail", loop.var.dtype)
    tail_body = stmt_map(loop.body, None, lambda e: substitute(e, {loop.var: tail_var}))
    tail_kind = "serial" if loop.kind == "parallel" and hi - clean == 1 else loop.kind
    return [
        For(loop.var, lo, clean - lo, loop.kind, loop.body),
        For(tail_var, clean, hi - clean, tail_kind, tail_body),
    ]


def _guards(s, ranges: dict):
    """``(condition, loop ranges at that point)`` of every ``if`` under ``s``."""
    if isinstance(s, For):
        ranges = _with_loop(ranges, s)
    if isinstance(s, IfThenElse):
        yield s.cond, ranges
    for k in stmt_children(s):
        yield from _guards(k, ranges)


def _clean_until(cond, var: Var, lo: int, ranges: dict) -> int | None:
    """The first value of ``var`` (from ``lo``) for which ``cond``, of the form
    ``a * var + rest < bound`` with ``a > 0`` (or a conjunction of such), might be false; None
    when ``cond`` sets no such limit (it does not have that form, or does not involve ``var``).
    Any split is correct; this only chooses one that frees the main part of its guards."""
    if isinstance(cond, BinOp) and cond.op == "&&":
        limits = [_clean_until(c, var, lo, ranges) for c in (cond.a, cond.b)]
        limits = [x for x in limits if x is not None]
        return min(limits) if limits else None
    if not isinstance(cond, Compare) or cond.op not in ("<", "<="):
        return None
    terms, c = linear_form(cond.a - cond.b)  # cond: terms + c < 0 (or <= 0)
    a = var_coef((terms, c), var)
    if not a or a < 0:
        return None
    rest = ({k: t for k, t in terms.items() if t[0] is not var}, c)
    bound = linear_bound(rest, ranges)
    if bound is None:
        return None
    rest_max = bound[1] + (1 if cond.op == "<=" else 0)
    # a * v + rest_max < 0  <=>  v < -rest_max / a  <=>  v <= floor((-rest_max - 1) / a)
    return max(lo, (-rest_max - 1) // a + 1)
