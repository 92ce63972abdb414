"""GPU kernels as CPU loop IR, with GPU semantics (the MCUDA method, Stratton et al. 2008).

Each kernel becomes: block loops (``blockIdx`` bound loops, the outermost one ``parallel`` on
the CPU) around the block body, in which

* each loop bound to ``threadIdx.d`` is replaced by the thread index it stands for (guarded
  when narrower than the block), so the body is one thread's program;
* the body is cut at every barrier into *phases*; each phase runs as a loop over the block's
  threads, forward (thread 0 first) or in ``reverse`` (the last thread first). Loops and
  conditions around a barrier must not depend on the thread index (they run once per block);
* a ``local`` buffer live across a barrier gets one copy per thread; ``shared`` buffers are one
  copy per block.

A schedule whose threads communicate through shared memory without a barrier in between reads
values another thread has not written yet in one of the two orders: running both and comparing
(``cuda_emulated``) catches the missing barrier.
"""

from __future__ import annotations

from pyvta.compiler.backend.cuda.kernels import DIMS, block_loops
from pyvta.compiler.backend.cuda.limits import LaunchError
from pyvta.compiler.backend.cuda.passes import has_barrier, is_barrier, rebuffer
from pyvta.compiler.ir.expr import IntImm, Var, free_vars, substitute
from pyvta.compiler.ir.stmt import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    Let,
    PrimFunc,
    Seq,
    seq,
    stmt_map,
)


def _subst(s, vmap: dict):
    return stmt_map(s, None, lambda e: substitute(e, vmap))


class _Emulator:
    def __init__(self, kernel, reverse: bool):
        self.k, self.reverse = kernel, reverse
        self.dims = dict(zip(DIMS, kernel.block, strict=True))
        self.tv = {d: Var(f"threadIdx.{d}") for d in DIMS}
        self.phases = 0

    # -- thread-bound loops -> thread indices --------------------------------------------
    def bind_threads(self, s):
        def f(st):
            if isinstance(st, For) and st.kind.startswith("threadIdx."):
                d = st.kind[-1]
                body = _subst(st.body, {st.var: self.tv[d]})
                if st.extent.value < self.dims[d]:
                    return IfThenElse(self.tv[d] < IntImm(st.extent.value), body)
                return body
            return None

        return stmt_map(s, f)

    # -- phases --------------------------------------------------------------------------
    def thread_loop(self, s):
        """``s`` run by every thread of the block in turn (forward or reverse order)."""
        n = self.k.threads
        t = Var(f"emu.t{self.phases}")
        self.phases += 1
        lin = IntImm(n - 1) - t if self.reverse else t
        dx, dy = self.dims["x"], self.dims["y"]
        body = Let(
            self.tv["x"],
            lin % IntImm(dx),
            Let(
                self.tv["y"],
                (lin // IntImm(dx)) % IntImm(dy),
                Let(self.tv["z"], lin // IntImm(dx * dy), s),
            ),
        )
        return For(t, IntImm(0), IntImm(n), "serial", body)

    def _uniform(self, exprs, what: str) -> None:
        if any(free_vars(e) & set(self.tv.values()) for e in exprs):
            raise LaunchError(f"{self.k.name}: {what} around a barrier depends on the thread index")

    def split(self, s):
        if not has_barrier(s):
            return self.thread_loop(s)
        if is_barrier(s):
            return None
        if isinstance(s, Seq):
            out, group = [], []
            for c in s.stmts:
                if is_barrier(c) or has_barrier(c):
                    if group:
                        out.append(self.thread_loop(seq(*group)))
                        group = []
                    if not is_barrier(c):
                        out.append(self.split(c))
                else:
                    group.append(c)
            if group:
                out.append(self.thread_loop(seq(*group)))
            return seq(*out)
        if isinstance(s, For):
            self._uniform([s.min, s.extent], f"loop {s.var.name}")
            return For(s.var, s.min, s.extent, s.kind, self.split(s.body))
        if isinstance(s, IfThenElse):
            self._uniform([s.cond], "a condition")
            orelse = None if s.orelse is None else self.split(s.orelse)
            return IfThenElse(s.cond, self.split(s.then), orelse)
        if isinstance(s, Allocate):
            return self.per_thread(s)
        raise LaunchError(
            f"{self.k.name}: a {type(s).__name__} live across a barrier cannot be emulated"
        )

    def per_thread(self, s: Allocate):
        """A ``local`` buffer live across a barrier: one copy per thread."""
        b = s.buffer
        n = self.k.threads
        big = Buffer(b.name, b.dtype, (n * b.size_elems,), "local")
        tv, dx, dy = self.tv, self.dims["x"], self.dims["y"]
        lin = tv["x"] + IntImm(dx) * (tv["y"] + IntImm(dy) * tv["z"])
        body = rebuffer(s.body, b, big, lambda i: lin * IntImm(b.size_elems) + i)
        return Allocate(big, self.split(body))

    def kernel(self):
        loops, inner = block_loops(self.k.body)
        body = self.split(self.bind_threads(inner))
        for b in self.k.shared:  # one copy per block, on the CPU worker's stack
            cpu = Buffer(b.name, b.dtype, b.shape, "local")
            body = Allocate(cpu, rebuffer(body, b, cpu, lambda i: i))
        for n, f in enumerate(reversed(loops)):
            kind = "parallel" if n == len(loops) - 1 else "serial"
            body = For(f.var, f.min, f.extent, kind, body)
        return body


def emulate(func: PrimFunc, kernels, reverse: bool = False) -> PrimFunc:
    """CPU loop IR running ``kernels`` (from ``split_kernels(func)``) one after another, each
    block's threads phase by phase in forward or ``reverse`` order."""
    body = seq(*[_Emulator(k, reverse).kernel() for k in kernels])
    return PrimFunc(func.name, func.params, stmt_map(body, _keep_rolled), func.workspace)


def _keep_rolled(s):
    """``unrolled`` loops stay loops on the CPU (same operations and order, faster to build)."""
    if isinstance(s, For) and s.kind == "unrolled":
        return For(s.var, s.min, s.extent, "serial", s.body)
    return None
