"""The graph's heavy float CPU ops (conv2d by im2col, dense) on the compiler's llvmlite GEMM
template: the CPU parts of a partitioned network are compiled code, not numpy BLAS.

One kernel per (M, N, K) shape, built on first use by the host's JIT (``runtime.jit``) and
cached (in memory and on disk by the compiler). N is padded to the template's column block. Where llvmlite is not installed (the
board-side runtime), the product is numpy's, or an artifact's kernel for the board's CPU
(``shared_gemms``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util

import numpy as np

from pyvta.runtime.jit import jit

_NUMPY_ONLY: list[bool] = []  # set by numpy_only(): compute as the board runtime does


@functools.cache
def llvmlite_installed() -> bool:
    """Whether llvmlite is installed here (the host's JIT can build kernels; a board has none)."""
    return importlib.util.find_spec("llvmlite") is not None


def have_llvmlite() -> bool:
    """Whether the compiled kernels are used here (the board runtime has no llvmlite; within
    :func:`numpy_only` the float CPU ops and new int8 backends compute with numpy)."""
    return llvmlite_installed() and not _NUMPY_ONLY


@contextlib.contextmanager
def numpy_only():
    """Within the block, the float CPU ops compute with numpy, as on a board without llvmlite
    (to make a board's reference outputs on the host)."""
    _NUMPY_ONLY.append(True)
    try:
        yield
    finally:
        _NUMPY_ONLY.pop()


# GEMMs of the artifact whose node runs now (``shared_gemms``), innermost last
_SHARED: list[dict[tuple[int, int, int], tuple[object, int]]] = []


@contextlib.contextmanager
def shared_gemms(kernels: dict[tuple[int, int, int], tuple[object, int]]):
    """Within the block, the products of these shapes use these kernels (``(M, N, K)`` ->
    ``(kernel called as Module, its N padded)``: an artifact's shared object for this CPU,
    ``cpu_code.CpuCode.load_gemms``), with or without llvmlite."""
    _SHARED.append(kernels)
    try:
        yield
    finally:
        _SHARED.pop()


def _n_pad(n: int) -> int:
    return jit().gemm_n_pad(n)


def gemm_operand(b: np.ndarray) -> np.ndarray:
    """``b (K, N)`` as :func:`gemm` reads it (float32, C-contiguous, zero columns up to the
    kernel's column block), for a ``b`` used in many products: ``gemm(a, gemm_operand(b))[:,
    :N]`` is ``gemm(a, b)`` bit for bit, without its per-call copy."""
    if not have_llvmlite():
        return np.ascontiguousarray(b, np.float32)
    k, n = b.shape
    out = np.zeros((k, _n_pad(n)), np.float32)
    out[:, :n] = b
    return out


def gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 ``a (M, K) @ b (K, N)`` with a compiled kernel."""
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"gemm: inner dimensions differ ({a.shape} @ {b.shape})")
    a32 = np.ascontiguousarray(a, np.float32)
    shared = _SHARED[-1].get((m, n, k)) if _SHARED and not _NUMPY_ONLY else None
    if shared is not None:
        mod, n_pad = shared
    elif not have_llvmlite():
        return a32 @ np.asarray(b, np.float32)
    else:
        mod, n_pad = jit().gemm_kernel(m, n, k)
    if n_pad == n:
        b32 = np.ascontiguousarray(b, np.float32)
    else:
        b32 = np.zeros((k, n_pad), np.float32)
        b32[:, :n] = b
    c = np.empty((m, n_pad), np.float32)
    mod(a32, b32, c)
    return c[:, :n] if n_pad != n else c
