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


def dot_i16x2(p, q) -> Expr:
    """int32 ``lo(p) * lo(q) + hi(p) * hi(q)`` where ``lo``/``hi`` are the signed low and high
    16-bit halves of the int32 operands (two int16 packed per lane): on an x86 vector of 4, 8
    or 16 lanes one ``pmaddwd`` (SSE2 / AVX2 / AVX-512BW)."""
    p, q = const(p), const(q)
    if p.dtype != "int32" or q.dtype != "int32":
        raise TypeError(f"dot_i16x2 needs int32 operands, got {p.dtype}, {q.dtype}")
    return Call("dot_i16x2", [p, q], "int32")


def dot_u8s8x4(p, q) -> Expr:
    """int32 ``sum_j ubyte_j(p) * sbyte_j(q)`` over the four bytes of each int32 operand (``p``'s
    unsigned, ``q``'s signed; no saturation): on an x86 vector of 8 or 16 lanes with AVX-512
    VNNI (or AVX-VNNI, 8 lanes) one ``vpdpbusd``."""
    p, q = const(p), const(q)
    if p.dtype != "int32" or q.dtype != "int32":
        raise TypeError(f"dot_u8s8x4 needs int32 operands, got {p.dtype}, {q.dtype}")
    return Call("dot_u8s8x4", [p, q], "int32")


def dot_u7s8x4(p, q) -> Expr:
    """:func:`dot_u8s8x4` of a ``p`` whose bytes are all 0..127 (the caller's guarantee): then
    no pair of products leaves int16, so without VNNI an x86 vector of 4, 8 or 16 lanes computes
    it as one ``pmaddubsw`` (u8 x s8 byte pairs summed to int16, saturating: a byte of ``p``
    over 127 may saturate) and one ``pmaddwd`` by ones (SSSE3 / AVX2 / AVX-512BW): 32 products
    per two multiplies on AVX2, where ``dot_i16x2`` gives 16; with VNNI one ``vpdpbusd``."""
    p, q = const(p), const(q)
    if p.dtype != "int32" or q.dtype != "int32":
        raise TypeError(f"dot_u7s8x4 needs int32 operands, got {p.dtype}, {q.dtype}")
    return Call("dot_u7s8x4", [p, q], "int32")


def dot_u7s8x4_sum(*operands) -> Expr:
    """``dot_u7s8x4(p0, q0) + dot_u7s8x4(p1, q1) + ...`` of ``operands = (p0, q0, p1, q1,
    ...)`` (two or more pairs) where, besides every ``p``'s bytes being 0..127, the caller
    guarantees that bytes ``2h, 2h + 1`` of all the products sum within int16 (``h`` = 0, 1;
    e.g. weights ``q`` proven small enough: ``compiler.ops.cpu.int8``'s ``sums_fit_int16``):
    then without VNNI an x86 vector computes it as one ``pmaddubsw`` per pair, their int16 sum
    and one ``pmaddwd`` by ones: ``k`` pairs' products in ``k + 1`` multiplies, where
    ``dot_u7s8x4`` takes ``2k``."""
    args = [const(a) for a in operands]
    if len(args) < 4 or len(args) % 2 or any(a.dtype != "int32" for a in args):
        raise TypeError(
            f"dot_u7s8x4_sum needs two or more pairs of int32 operands, got {[a.dtype for a in args]}"
        )
    return Call("dot_u7s8x4_sum", args, "int32")
