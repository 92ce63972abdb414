"""Elementwise helpers for tensor expressions: conditionals, min/max, casts, intrinsics."""

from __future__ import annotations

from pyvta.compiler.ir.expr import (
    BinOp,
    Call,
    Cast,
    Expr,
    Not,
    Select,
    all_,
    binary,
    compare,
    const,
)


def select(cond: Expr, t, f) -> Expr:
    """``t`` where ``cond`` else ``f``; a branch that reads memory is only evaluated when chosen."""
    return Select(cond, t, f)


if_then_else = select


def maximum(a, b) -> Expr:
    return binary("max", a, b)


def minimum(a, b) -> Expr:
    return binary("min", a, b)


def equal(a, b) -> Expr:
    return compare("==", a, b)


def not_equal(a, b) -> Expr:
    return compare("!=", a, b)


def logical_and(*conds) -> Expr:
    return all_(*conds)


def logical_or(a: Expr, b: Expr) -> Expr:
    return BinOp("||", a, b)


def logical_not(a: Expr) -> Expr:
    return Not(a)


def cast(dtype: str, value) -> Expr:
    return Cast(dtype, const(value))


def exp(x: Expr) -> Expr:
    if x.dtype != "float32":
        raise TypeError(f"exp needs float32, got {x.dtype}")
    return Call("exp", [x], x.dtype)


def sqrt(x: Expr) -> Expr:
    if x.dtype != "float32":
        raise TypeError(f"sqrt needs float32, got {x.dtype}")
    return Call("sqrt", [x], x.dtype)
