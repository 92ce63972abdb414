"""A compiled CPU kernel callable on numpy arrays."""

from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

from pyvta.compiler.backend.llvm.vector import walk_stmts
from pyvta.compiler.ir.stmt import PrimFunc, Store
from pyvta.isa.errors import PyvtaError

_NP_DTYPE = {
    "int8": np.int8,
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "bool": np.bool_,
}


def aligned_empty(shape, dtype: str = "float32", align_bytes: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align_bytes`` boundary
    (full-width SIMD loads then never straddle cache lines)."""
    dt = np.dtype(_NP_DTYPE[dtype] if isinstance(dtype, str) else dtype)
    n = int(np.prod(shape)) * dt.itemsize
    raw = np.empty(n + align_bytes, np.uint8)
    off = (-raw.ctypes.data) % align_bytes
    return raw[off : off + n].view(dt).reshape(shape)


def aligned_copy(a: np.ndarray, align_bytes: int = 64) -> np.ndarray:
    out = aligned_empty(a.shape, a.dtype, align_bytes)
    out[...] = a
    return out


class KernelArgumentError(PyvtaError, TypeError, ValueError):
    """Arrays a compiled kernel cannot be called with (count, dtype, shape, layout, read-only)."""


def check_arrays(
    func: PrimFunc, arrays, written: frozenset | set = frozenset()
) -> list[np.ndarray]:
    """``arrays`` if they match ``func``'s parameters (count, numpy, dtype, shape, C-contiguous,
    writable where ``written`` names the parameter); else a ``KernelArgumentError`` naming the
    first mismatch."""
    params = func.params
    if len(arrays) != len(params):
        names = ", ".join(b.name for b in params)
        raise KernelArgumentError(
            f"{func.name} takes {len(params)} arrays ({names}), got {len(arrays)}"
        )
    for a, b in zip(arrays, params, strict=True):
        if not isinstance(a, np.ndarray):
            raise KernelArgumentError(
                f"argument {b.name} must be a numpy array, got {type(a).__name__}"
            )
        want = np.dtype(_NP_DTYPE[b.dtype])
        if a.dtype != want:
            raise KernelArgumentError(f"argument {b.name} has dtype {a.dtype}, expected {want}")
        if tuple(a.shape) != b.shape:
            raise KernelArgumentError(
                f"argument {b.name} has shape {tuple(a.shape)}, expected {b.shape}"
            )
        if not a.flags.c_contiguous:
            raise KernelArgumentError(
                f"argument {b.name} must be C-contiguous (use np.ascontiguousarray)"
            )
        if b.name in written and not a.flags.writeable:
            raise KernelArgumentError(
                f"argument {b.name} is written by {func.name} but its array is read-only"
                " (a read-only memmap, a view of bytes, ...); pass a writable array"
            )
    return list(arrays)


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

    def time_ms(self, *arrays, number: int = 10, repeat: int = 3) -> float:
        """Best-of-``repeat`` mean time per call in milliseconds."""
        import time

        ptrs = self._check(arrays)
        self._fn(*ptrs)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                self._fn(*ptrs)
            best = min(best, (time.perf_counter() - t0) / number)
        return best * 1e3
