"""``unroll_loops``: replace each ``unrolled`` loop by copies of its body, one per iteration."""

from __future__ import annotations

from pyvta.compiler.ir.expr import IntImm, substitute
from pyvta.compiler.ir.stmt import For, PrimFunc, Seq, stmt_map

MAX_UNROLL = 256


def unroll_loops(func: PrimFunc) -> PrimFunc:
    def f(s):
        if isinstance(s, For) and s.kind == "unrolled":
            n, lo = s.extent.value, s.min.value
            if n > MAX_UNROLL:
                raise ValueError(
                    f"unrolled loop {s.var.name} has extent {n}; at most {MAX_UNROLL} is allowed"
                )
            copies = []
            for i in range(n):
                vmap, memo = {s.var: IntImm(lo + i)}, {}  # the body's shared nodes once a copy
                copies.append(stmt_map(s.body, None, lambda e, m=vmap, d=memo: substitute(e, m, d)))
            return Seq(copies)
        return None

    return func.with_body(stmt_map(func.body, f))
