"""The graph's heavy float CPU ops (conv2d by im2col, dense) on the compiler's llvmlite GEMM
template: the CPU parts of a partitioned network are compiled code, not numpy BLAS.

One kernel per (M, N, K) shape, built on first use and cached (in memory and on disk by the
compiler). N is padded to the template's column block.
"""

from __future__ import annotations

import numpy as np

_KERNELS: dict[tuple[int, int, int], tuple[object, int]] = {}


def _kernel(m: int, n: int, k: int):
    key = (m, n, k)
    if key not in _KERNELS:
        from pyvta import compiler
        from pyvta.compiler.backend.llvm import CpuTarget
        from pyvta.compiler.ops.cpu import GemmKnobs, matmul_packed

        knobs = GemmKnobs.for_target(CpuTarget.host())
        n_pad = -(-n // knobs.bn) * knobs.bn
        sch, args = matmul_packed(m, n_pad, k, knobs)
        _KERNELS[key] = (compiler.build(sch, args), n_pad)
    return _KERNELS[key]


def gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 ``a (M, K) @ b (K, N)`` with a compiled kernel."""
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"gemm: inner dimensions differ ({a.shape} @ {b.shape})")
    mod, n_pad = _kernel(m, n, k)
    a32 = np.ascontiguousarray(a, np.float32)
    if n_pad == n:
        b32 = np.ascontiguousarray(b, np.float32)
    else:
        b32 = np.zeros((k, n_pad), np.float32)
        b32[:, :n] = b
    c = np.empty((m, n_pad), np.float32)
    mod(a32, b32, c)
    return c[:, :n] if n_pad != n else c
