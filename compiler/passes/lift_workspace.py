"""``lift_workspace``: turn allocations at the top of the function (outside every loop) in
heap scopes into caller-provided workspace buffers.

A kernel then allocates nothing per call: the CPU module keeps one workspace per calling
thread and reuses it, which avoids fresh memory (and its page faults) on every call."""

from __future__ import annotations

from pyvta.compiler.ir.stmt import Allocate, PrimFunc, Seq, seq

HEAP_SCOPES = ("global",)


def _lift(s, out: list):
    if isinstance(s, Allocate) and s.buffer.scope in HEAP_SCOPES:
        out.append(s.buffer)
        return _lift(s.body, out)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _lift(s.body, out))
    if isinstance(s, Seq):
        return seq(*[_lift(c, out) for c in s.stmts])
    return s


def lift_workspace(func: PrimFunc) -> PrimFunc:
    lifted: list = []
    body = _lift(func.body, lifted)
    return PrimFunc(func.name, func.params, body, func.workspace + tuple(lifted))
