"""Numpy arrays for compiled kernels, with or without llvmlite: SIMD-aligned buffers and the
check of the arrays a kernel is called with (its parameters' count, dtype, shape, layout)."""

from __future__ import annotations

import numpy as np

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


def check_arrays(func, arrays, written: frozenset | set = frozenset()) -> list[np.ndarray]:
    """``arrays`` if they match ``func``'s parameters (count, numpy, dtype, shape, C-contiguous,
    writable where ``written`` names the parameter); else a ``KernelArgumentError`` naming the
    first mismatch. ``func``: a ``PrimFunc`` or a shared object's ``cpu_code.KernelSig`` (its
    ``name`` and ``params``, each with ``name``, ``dtype``, ``shape``)."""
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
