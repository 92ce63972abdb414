"""The GPU backend's pass list, and the barrier it inserts.

``insert_barriers`` places a CTA barrier (``sync_threads()``, an ``Evaluate`` of the
``BARRIER`` call) wherever one statement of a sequence reads a ``shared`` buffer that an earlier
one wrote since the last barrier (read after write), or writes one that an earlier one read
(write after read); a loop whose body ends with accesses that conflict with the accesses its
next iteration starts with gets a barrier at the top of its body. The analysis is per
statement, not per element: two threads racing inside one statement are caught by the
emulator's forward / reverse check (``cuda_emulated``), not here.
"""

from __future__ import annotations

from pyvta.compiler.backend.llvm.vector import stmt_exprs_deep, walk_stmts
from pyvta.compiler.ir.expr import (
    Call,
    IntImm,
    Load,
    Var,
    children,
    free_vars,
    substitute,
    transform,
)
from pyvta.compiler.ir.stmt import (
    Allocate,
    Buffer,
    Evaluate,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Seq,
    Store,
    seq,
    stmt_exprs,
    stmt_map,
)
from pyvta.compiler.passes.lift_workspace import lift_workspace
from pyvta.compiler.passes.simplify_stmt import simplify_stmt
from pyvta.compiler.passes.unroll_loops import unroll_loops

BARRIER = "sync_threads"


def sync_threads() -> Evaluate:
    """A barrier across the threads of one block (``__syncthreads()``)."""
    return Evaluate(Call(BARRIER, [], "int32"))


def is_barrier(s) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.name == BARRIER


def has_barrier(s) -> bool:
    return any(is_barrier(x) for x in walk_stmts(s))


def _shared_access(stmts) -> tuple[set, set]:
    """(read, written) ``shared`` buffers of the statements ``stmts`` (and below)."""
    reads, writes = set(), set()
    for s in stmts:
        for st in walk_stmts(s):
            if isinstance(st, Store) and st.buffer.scope == "shared":
                writes.add(st.buffer)
            stack = list(stmt_exprs(st))
            while stack:
                e = stack.pop()
                if isinstance(e, Load) and e.buffer.scope == "shared":
                    reads.add(e.buffer)
                stack.extend(children(e))
    return reads, writes


def _conflict(before: tuple[set, set], after: tuple[set, set]) -> bool:
    (r0, w0), (r1, w1) = before, after
    return bool(r1 & w0) or bool(w1 & r0)


def _edges(s) -> tuple[tuple, tuple]:
    """Accesses of ``s`` before its first barrier and after its last one (top level only)."""
    while isinstance(s, Allocate | Let):
        s = s.body
    stmts = list(s.stmts) if isinstance(s, Seq) else [s]
    cut = [i for i, x in enumerate(stmts) if is_barrier(x)]
    if not cut:
        acc = _shared_access(stmts)
        return acc, acc
    return _shared_access(stmts[: cut[0]]), _shared_access(stmts[cut[-1] + 1 :])


def _sync_seq(stmts) -> list:
    out, pending = [], (set(), set())
    for s in stmts:
        acc = _shared_access([s])
        if has_barrier(s):
            first, last = _edges(s)
            if _conflict(pending, first):
                out.append(sync_threads())
            out.append(s)
            pending = (set(last[0]), set(last[1]))
            continue
        if _conflict(pending, acc):
            out.append(sync_threads())
            pending = (set(), set())
        out.append(s)
        pending = (pending[0] | acc[0], pending[1] | acc[1])
    return out


def _sync_loop(s: For):
    if s.kind not in ("serial", "unrolled") or not has_barrier(s.body):
        return None
    first, last = _edges(s.body)
    if not _conflict(last, first):
        return None
    return For(s.var, s.min, s.extent, s.kind, Seq([sync_threads(), s.body]))


def insert_barriers(func: PrimFunc) -> PrimFunc:
    def f(s):
        if isinstance(s, Seq):
            return Seq(_sync_seq(s.stmts))
        if isinstance(s, For):
            return _sync_loop(s)
        return None

    return func.with_body(stmt_map(func.body, f))


def rebuffer(s, old: Buffer, new: Buffer, index):
    """``s`` with every access to ``old`` going to ``new`` at ``index(old_index)``."""

    def load(n):
        return Load(new, index(n.index)) if isinstance(n, Load) and n.buffer is old else None

    def fs(st):
        if isinstance(st, Store) and st.buffer is old:
            return Store(new, index(st.index), st.value)
        return None

    return stmt_map(s, fs, lambda e: transform(e, load))


def _uses(s, v) -> bool:
    return any(isinstance(e, Var) and e is v for e in stmt_exprs_deep(s))


def _inject(s, v: Var, n: int):
    """Virtual thread ``v`` (``n`` of them) pushed into ``s``: loops, conditions and lets that
    do not depend on it are kept once, a ``local`` buffer gets one copy per virtual thread,
    and the statements that depend on ``v`` are repeated for ``v = 0 .. n-1``. What does not
    depend on ``v`` (a shared tile's fetch) runs once for all of them."""
    if not _uses(s, v):
        return s
    if isinstance(s, Seq):
        return seq(*[_inject(c, v, n) for c in s.stmts])
    if isinstance(s, For) and v not in free_vars(s.min) | free_vars(s.extent):
        return For(s.var, s.min, s.extent, s.kind, _inject(s.body, v, n))
    if isinstance(s, IfThenElse) and v not in free_vars(s.cond):
        orelse = None if s.orelse is None else _inject(s.orelse, v, n)
        return IfThenElse(s.cond, _inject(s.then, v, n), orelse)
    if isinstance(s, Let) and v not in free_vars(s.value):
        return Let(s.var, s.value, _inject(s.body, v, n))
    if isinstance(s, Allocate) and s.buffer.scope == "local":
        b = s.buffer
        big = Buffer(b.name, b.dtype, (n * b.size_elems,), "local")
        body = rebuffer(s.body, b, big, lambda i: v * IntImm(b.size_elems) + i)
        return Allocate(big, _inject(body, v, n))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _inject(s.body, v, n))
    return seq(*[stmt_map(s, None, lambda e, i=i: substitute(e, {v: IntImm(i)})) for i in range(n)])


def inject_vthread(func: PrimFunc) -> PrimFunc:
    """Each ``vthread`` loop interleaved into its body (``_inject``): on a GPU, virtual threads
    are register tiles of one thread spread across the block's tile (strided, so the threads
    of a warp read neighbouring shared-memory words and write neighbouring outputs)."""

    def f(s):
        if isinstance(s, For) and s.kind == "vthread":
            return _inject(s.body, s.var, s.extent.value)
        return None

    return func.with_body(stmt_map(func.body, f))


def serialize_loops(func: PrimFunc) -> PrimFunc:
    """Inside a GPU kernel a ``parallel`` loop runs serially in each thread and a
    ``vectorized`` one is unrolled (the bound thread indices carry the parallelism)."""
    kinds = {"parallel": "serial", "vectorized": "unrolled"}

    def f(s):
        if isinstance(s, For) and s.kind in kinds:
            return For(s.var, s.min, s.extent, kinds[s.kind], s.body)
        return None

    return func.with_body(stmt_map(func.body, f))


CUDA_PASSES = [
    ("lift_workspace", lift_workspace),
    ("inject_vthread", inject_vthread),
    ("serialize_loops", serialize_loops),
    ("simplify_stmt", simplify_stmt),
    ("insert_barriers", insert_barriers),
]
"""Run before PTX generation and before emulation alike: both see the same kernels."""

PTX_PASSES = [
    ("unroll_loops", unroll_loops),
    ("simplify_stmt", simplify_stmt),
]
"""Then, for PTX only: ``unrolled`` loops are expanded (register tiles with constant indices).
The emulator runs them as loops: the same operations in the same order, compiled much
faster by the CPU backend."""
