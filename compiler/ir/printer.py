"""Stable text form of expressions, statements and functions.

The text is part of the contract: golden tests compare it and the kernel cache hashes it, so a
change here invalidates both deliberately. Integers of ``int32`` print bare; other immediates
carry their dtype, e.g. ``int8(3)`` and ``1.5f``.
"""

from __future__ import annotations

from pyvta.compiler.ir.expr import (
    BinOp,
    Call,
    Cast,
    Compare,
    Expr,
    FloatImm,
    IntImm,
    Load,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from pyvta.compiler.ir.stmt import (
    Allocate,
    Evaluate,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Seq,
    Stmt,
    Store,
)


def expr_str(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        if e.dtype == "int32":
            return str(e.value)
        if e.dtype == "bool":
            return "true" if e.value else "false"
        return f"{e.dtype}({e.value})"
    if isinstance(e, FloatImm):
        return f"{e.value!r}f"
    if isinstance(e, BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
        return f"({expr_str(e.a)} {e.op} {expr_str(e.b)})"
    if isinstance(e, Compare):
        return f"({expr_str(e.a)} {e.op} {expr_str(e.b)})"
    if isinstance(e, Not):
        return f"!{expr_str(e.a)}"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{expr_str(e.index)}]"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}({', '.join(expr_str(i) for i in e.indices)})"
    if isinstance(e, Reduce):
        axes = ", ".join(a.var.name for a in e.axes)
        where = "" if e.where is None else f", where={expr_str(e.where)}"
        return f"{e.combiner}({expr_str(e.source)}, axis=[{axes}]{where})"
    raise TypeError(f"cannot print {type(e).__name__}")


def _lines(s: Stmt, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(s, For):
        lo, n = expr_str(s.min), expr_str(s.extent)
        out.append(f"{pad}for {s.var.name} in range({lo}, {n}) {s.kind}:")
        _lines(s.body, depth + 1, out)
    elif isinstance(s, Allocate):
        b = s.buffer
        out.append(f"{pad}allocate {b.name}: {b.dtype}{list(b.shape)} in {b.scope!r}")
        _lines(s.body, depth, out)
    elif isinstance(s, Store):
        out.append(f"{pad}{s.buffer.name}[{expr_str(s.index)}] = {expr_str(s.value)}")
    elif isinstance(s, Let):
        out.append(f"{pad}let {s.var.name} = {expr_str(s.value)}")
        _lines(s.body, depth, out)
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if {expr_str(s.cond)}:")
        _lines(s.then, depth + 1, out)
        if s.orelse is not None:
            out.append(f"{pad}else:")
            _lines(s.orelse, depth + 1, out)
    elif isinstance(s, Evaluate):
        out.append(f"{pad}{expr_str(s.value)}")
    elif isinstance(s, Seq):
        for c in s.stmts:
            _lines(c, depth, out)
    else:
        raise TypeError(f"cannot print {type(s).__name__}")


def stmt_str(s: Stmt) -> str:
    out: list[str] = []
    _lines(s, 0, out)
    return "\n".join(out)


def func_str(f: PrimFunc) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in f.params)
    if f.workspace:
        params += "; workspace " + ", ".join(
            f"{b.name}: {b.dtype}{list(b.shape)}" for b in f.workspace
        )
    out = [f"func {f.name}({params}):"]
    _lines(f.body, 1, out)
    return "\n".join(out)
