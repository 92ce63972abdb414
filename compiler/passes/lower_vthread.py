"""``lower_vthread``: on the CPU a virtual-thread loop is a plain serial loop."""

from __future__ import annotations

from pyvta.compiler.ir.stmt import For, PrimFunc, stmt_map


def lower_vthread(func: PrimFunc) -> PrimFunc:
    def f(s):
        if isinstance(s, For) and s.kind == "vthread":
            return For(s.var, s.min, s.extent, "serial", s.body)
        return None

    return func.with_body(stmt_map(func.body, f))
