"""Matrix products: ``matmul`` (A @ B) and ``dense`` (X @ W^T)."""

from __future__ import annotations

from pyvta.compiler.te.tensor import Tensor, compute, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum


def _acc(x, dtype):
    return x if x.dtype == dtype else x.astype(dtype)


def matmul(a: Tensor, b: Tensor, out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    """``C[M, N] = sum_k A[M, K] * B[K, N]``; int8 inputs accumulate in ``out_dtype``
    (default: int32 for int8 inputs, else the input dtype)."""
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or a.dtype != b.dtype:
        raise ValueError(
            f"matmul shapes/dtypes mismatch: {a.shape}/{a.dtype} @ {b.shape}/{b.dtype}"
        )
    out_dtype = out_dtype or ("int32" if a.dtype == "int8" else a.dtype)
    r = reduce_axis(k, "k")
    return compute(
        (m, n), lambda i, j: te_sum(_acc(a[i, r], out_dtype) * _acc(b[r, j], out_dtype), r), name
    )


def dense(x: Tensor, w: Tensor, out_dtype: str | None = None, name: str = "dense") -> Tensor:
    """``Y[M, N] = sum_k X[M, K] * W[N, K]`` (a fully connected layer)."""
    (m, k), (n, k2) = x.shape, w.shape
    if k != k2 or x.dtype != w.dtype:
        raise ValueError(f"dense shapes/dtypes mismatch: {x.shape}/{x.dtype}, {w.shape}/{w.dtype}")
    out_dtype = out_dtype or ("int32" if x.dtype == "int8" else x.dtype)
    r = reduce_axis(k, "k")
    return compute(
        (m, n), lambda i, j: te_sum(_acc(x[i, r], out_dtype) * _acc(w[j, r], out_dtype), r), name
    )
