"""Parallel loops: the body is outlined into ``i8* body(i8* closure)`` and handed to the
runtime pool (``runtime.py``); participants take chunks from an atomic counter.

``emit_parallel`` works on a ``CodeGen`` (``self``): it builds the outlined function with the
same statement emitter, then the closure and the launch call in the current function."""

from __future__ import annotations

from llvmlite import ir

from pyvta.compiler.backend.llvm.frame import I8P, I32, I64, LLTYPE, MEM_TYPE, FnState
from pyvta.compiler.backend.llvm.vector import stmt_exprs_deep, walk_stmts
from pyvta.compiler.ir.expr import Load, Var
from pyvta.compiler.ir.stmt import For, Store


def emit_parallel(self, s: For, lo, ext) -> None:
    """Outline ``s``'s body; ``num_threads`` pool threads (the caller included) claim
    guided chunks (a share of what is left, at least one iteration) from a shared atomic
    counter until none are left, so a thread slowed down by other load does not hold the
    others back and all finish within about one iteration of each other."""
    nthreads = self.target.num_threads
    captured_vars = sorted((v for v in _used_vars(s) if v in self.st.vars), key=lambda v: v.name)
    captured_bufs = [bf for bf in _used_bufs(s) if bf in self.st.bufs]
    nfixed = 4  # counter pointer, loop min, extent, divisor of the iterations left
    slot_ty = ir.ArrayType(I64, nfixed + len(captured_vars) + len(captured_bufs))
    self._par_count += 1
    name = f"{self.func.name}_par{self._par_count}"
    pfn = ir.Function(self.module, ir.FunctionType(I8P, [I8P]), name=name)
    outer = self.st
    self.st = inner = FnState(pfn)
    ib = inner.builder
    slots = ib.bitcast(pfn.args[0], slot_ty.as_pointer())

    def slot(i):
        return ib.load(ib.gep(slots, [ir.Constant(I32, 0), ir.Constant(I32, i)]))

    counter = ib.inttoptr(slot(0), I32.as_pointer())
    p_lo, p_ext, share = (ib.trunc(slot(i), I32) for i in (1, 2, 3))
    for i, v in enumerate(captured_vars):
        inner.vars[v] = ib.trunc(slot(nfixed + i), LLTYPE[v.dtype])
    for i, bf in enumerate(captured_bufs):
        raw = slot(nfixed + len(captured_vars) + i)
        inner.bufs[bf] = ib.inttoptr(raw, MEM_TYPE[bf.dtype].as_pointer())
    grab = ib.append_basic_block("grab")
    claim = ib.append_basic_block("claim")
    work = ib.append_basic_block("work")
    done = ib.append_basic_block("done")
    ib.branch(grab)
    # guided chunks: claim max(1, left / share) iterations, so chunks shrink as the work runs
    # out and the participants finish together (fixed chunks of ext / 4n could leave one
    # thread a whole chunk behind: GEMM 512^3's 86 row tiles split 50 / 36 on two threads)
    ib.position_at_end(grab)
    cur = ib.load_atomic(counter, "monotonic", 4)
    ib.cbranch(ib.icmp_signed("<", cur, p_ext), claim, done)
    ib.position_at_end(claim)
    size = ib.sdiv(ib.sub(p_ext, cur), share)
    size = ib.select(ib.icmp_signed(">", size, ir.Constant(I32, 0)), size, ir.Constant(I32, 1))
    stop = ib.add(cur, size)
    swapped = ib.extract_value(ib.cmpxchg(counter, cur, stop, "monotonic", "monotonic"), 1)
    ib.cbranch(swapped, work, grab)
    ib.position_at_end(work)
    self._par_depth += 1
    self._serial_loop(s.var, ib.add(p_lo, cur), ib.sub(stop, cur), lambda: self.stmt(s.body))
    self._par_depth -= 1
    ib.branch(grab)
    ib.position_at_end(done)
    self._finish(inner, ir.Constant(I8P, None))
    self.st = outer
    # -- launch
    b = self.b
    with b.goto_block(outer.entry):
        args = b.alloca(slot_ty, name=f"{name}.args")
        ctr = b.alloca(I32, name=f"{name}.counter")
    b.store(ir.Constant(I32, 0), ctr)
    g = ir.Constant(I32, 2 * nthreads)  # divisor of the iterations left (see "claim")
    vals = [b.ptrtoint(ctr, I64), b.sext(lo, I64), b.sext(ext, I64), b.sext(g, I64)]
    vals += [
        b.sext(outer.vars[v], I64) if v.dtype != "bool" else b.zext(outer.vars[v], I64)
        for v in captured_vars
    ]
    vals += [b.ptrtoint(outer.bufs[bf], I64) for bf in captured_bufs]
    for i, val in enumerate(vals):
        b.store(val, b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
    arg = b.bitcast(args, I8P)
    launch = self._decl("pyvta_parallel_launch", ir.VoidType(), [pfn.type, I8P, I32])
    b.call(launch, [pfn, arg, ir.Constant(I32, nthreads)])


def _used_vars(s):
    out = set()
    for e in stmt_exprs_deep(s):
        if isinstance(e, Var):
            out.add(e)
    return out


def _used_bufs(s):
    out = {}
    for st in walk_stmts(s):
        if isinstance(st, Store):
            out.setdefault(st.buffer, None)
    for e in stmt_exprs_deep(s):
        if isinstance(e, Load):
            out.setdefault(e.buffer, None)
    return list(out)
