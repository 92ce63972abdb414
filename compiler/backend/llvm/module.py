"""A compiled CPU kernel callable on numpy arrays."""

from __future__ import annotations

import ctypes
import functools
import threading

from pyvta.compiler.backend.llvm.vector import walk_stmts
from pyvta.compiler.ir.stmt import PrimFunc, Store
from pyvta.runtime.arrays import aligned_empty, check_arrays


class Module:
    """``module(*arrays)`` runs the kernel; arrays must be C-contiguous numpy arrays whose
    shapes and dtypes match the parameters (outputs are written in place). Scratch buffers
    the kernel needs (``func.workspace``) are allocated once per calling thread and reused.

    ``ir`` is the loop IR it was built from; ``llvm_ir`` the optimised LLVM IR."""

    def __init__(self, func: PrimFunc, jit, target, from_cache: str):
        self.func, self.jit, self.target = func, jit, target
        self.from_cache = from_cache  # "memory", "disk" or "none"
        self._local = threading.local()
        self._written = {st.buffer.name for st in walk_stmts(func.body) if isinstance(st, Store)}
        nbufs = len(func.params) + len(func.workspace)
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nbufs))
        self._fn = proto(jit.address)

    @property
    def ir(self) -> PrimFunc:
        return self.func

    @property
    def llvm_ir(self) -> str:
        return self.jit.ir_text

    def assembly(self) -> str:
        return self.jit.assembly(self.target)

    def _check(self, arrays) -> list[int]:
        arrays = check_arrays(self.func, arrays, self._written)
        return [a.ctypes.data for a in arrays] + self._workspace()

    def _workspace(self) -> list[int]:
        """Scratch buffers of this calling thread (allocated on its first call, then reused)."""
        ws = getattr(self._local, "ptrs", None)
        if ws is None:
            arrays = [aligned_empty(b.shape, b.dtype) for b in self.func.workspace]
            self._local.arrays = arrays  # keeps them alive
            ws = self._local.ptrs = [a.ctypes.data for a in arrays]
        return ws

    def __call__(self, *arrays) -> None:
        self._fn(*self._check(arrays))

    def bind(self, *arrays):
        """A no-argument call of the kernel on ``arrays``, checked once now (a graph runtime
        calling a kernel on the same buffers every inference skips the per-call checks). The
        caller keeps ``arrays`` alive while it uses the call."""
        return functools.partial(self._fn, *self._check(arrays))

    def time_ms(self, *arrays, number: int = 10, repeat: int = 3, clock=None) -> float:
        """Best-of-``repeat`` mean time per call in milliseconds. ``clock``: a function
        returning seconds (default ``time.perf_counter``, wall time; ``time.thread_time``
        counts only the calling thread's CPU time, a one-threaded kernel's own time on a
        loaded machine). On the thread pool the calling thread is bound to its CPU while it
        times (``runtime.caller_bound``), as in a network."""
        import contextlib
        import time

        from pyvta.compiler.backend.llvm.runtime import caller_bound

        clock = clock or time.perf_counter
        ptrs = self._check(arrays)
        threads = self.target.num_threads
        with caller_bound(threads) if threads > 1 else contextlib.nullcontext():
            self._fn(*ptrs)
            best = float("inf")
            for _ in range(repeat):
                t0 = clock()
                for _ in range(number):
                    self._fn(*ptrs)
                best = min(best, (clock() - t0) / number)
        return best * 1e3
