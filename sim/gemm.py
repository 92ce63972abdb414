"""GEMM semantics, vectorised: ACC[dst] += INP[src] . WGT[wgt]^T over the micro-op loops.

Per chunk of iterations the (dst, src, wgt) triples are grouped by weight row, each group is one
batched float32 matrix product (exact: every lane sums block_in products of at most 2^14), and the
int32 partial products are summed per ACC row with wrapping int32 arithmetic. No Python loop runs
per micro-op or per element.
"""

from __future__ import annotations

import numpy as np

from pyvta.isa import GemmInsn
from pyvta.sim.loops import LoopBounds, check_bounds, check_hazard, chunks, expand, n_iters, n_uops
from pyvta.sim.state import SramState


def _group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.concatenate(([0], change))


def _sort_key(values: np.ndarray) -> np.ndarray:
    # numpy's stable sort is a radix sort for 16-bit keys: O(n). SRAM indices fit 16 bits.
    return values.astype(np.uint16) if values.size and values.max() < 1 << 16 else values


def _batched_products(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (g, r, bi) int8, w (g, bo, bi) int8 -> (g, r, bo) int32, exact via float32."""
    prod = np.matmul(x.astype(np.float32), w.astype(np.float32).transpose(0, 2, 1))
    return prod.astype(np.int32)


def _grouped_products(x: np.ndarray, w_idx: np.ndarray, wgt_sram: np.ndarray) -> np.ndarray:
    """x (g, r, bi) with one weight row per group -> (g, r, bo) int32. Groups that share a weight
    row are merged into one taller product (fewer, larger matrix products)."""
    uniq, inv = np.unique(w_idx, return_inverse=True)
    counts = np.bincount(inv)
    if uniq.size == w_idx.size or counts.min() != counts.max():
        return _batched_products(x, wgt_sram[w_idx])
    g, r, bi = x.shape
    order = np.argsort(inv, kind="stable")
    merged = x[order].reshape(uniq.size, counts[0] * r, bi)
    prod = _batched_products(merged, wgt_sram[uniq]).reshape(g, r, -1)
    out = np.empty_like(prod)
    out[order] = prod
    return out


def products(
    st: SramState,
    src: np.ndarray,
    wgt: np.ndarray,
    shape: tuple[int, int, int],
    wgt_shared_axis: int | None,
) -> np.ndarray:
    """INP[src] . WGT[wgt]^T for every iteration: (n, batch, block_out) int32, execution order.

    ``shape`` is the loop nest (outer, inner, uops) of the flat index arrays. When the weight row
    does not depend on one loop axis (``wgt_shared_axis``: 0 outer, 1 inner), the iterations
    along that axis share a weight and form one matrix product each; otherwise iterations are
    grouped by sorting on the weight row.
    """
    _, batch, bi = st.inp.shape
    bo = st.wgt.shape[1]
    if wgt_shared_axis is not None:
        x = st.inp[src].reshape(shape + (batch, bi))
        x = np.moveaxis(x, wgt_shared_axis, 2)  # (other, uops, shared, batch, bi)
        g_other, g_uops, g_shared = x.shape[:3]
        w_idx = np.moveaxis(wgt.reshape(shape), wgt_shared_axis, 2)[:, :, 0]
        prod = _grouped_products(
            x.reshape(g_other * g_uops, g_shared * batch, bi), w_idx.reshape(-1), st.wgt
        ).reshape(g_other, g_uops, g_shared, batch, bo)
        prod = np.moveaxis(prod, 2, wgt_shared_axis)  # back to (outer, inner, uops, ...)
        return np.ascontiguousarray(prod).reshape(-1, batch, bo)
    order = np.argsort(_sort_key(wgt), kind="stable")
    w_sorted = wgt[order]
    starts = _group_starts(w_sorted)
    sizes = np.diff(np.append(starts, w_sorted.size))
    x = st.inp[src[order]]
    result = np.empty((src.size, batch, bo), np.int32)
    for size in np.unique(sizes):  # usually one distinct group size
        g_starts = starts[sizes == size]
        rows = (g_starts[:, None] + np.arange(size)[None, :]).reshape(-1)
        xg = x[rows].reshape(len(g_starts), size * batch, bi)
        result[order[rows]] = _batched_products(xg, st.wgt[w_sorted[g_starts]]).reshape(
            -1, batch, bo
        )
    return result


def accumulate(
    acc: np.ndarray,
    dst: np.ndarray,
    values: np.ndarray,
    shape: tuple[int, int, int],
    dst_shared_axis: int | None,
) -> np.ndarray:
    """acc[dst] += values with repeated dst summed (wrapping int32); returns the rows touched.

    When dst does not depend on one loop axis and is distinct over the others
    (``dst_shared_axis``), that axis is summed directly; otherwise rows are grouped by sorting.
    """
    if dst_shared_axis is not None:
        summed = values.reshape(shape + values.shape[1:]).sum(axis=dst_shared_axis, dtype=np.int32)
        rows = np.take(dst.reshape(shape), 0, axis=dst_shared_axis).reshape(-1)
        acc[rows] += summed.reshape((-1,) + values.shape[1:])
        return rows
    order = np.argsort(_sort_key(dst), kind="stable")
    d_sorted = dst[order]
    starts = _group_starts(d_sorted)
    rows = d_sorted[starts]
    sums = np.add.reduceat(values[order], starts, axis=0, dtype=np.int32)
    acc[rows] += sums
    return rows


def _shared_axis(f_out: int, f_in: int, shape: tuple[int, int, int]) -> int | None:
    """The loop axis (0 outer, 1 inner) an operand's row does not depend on, if any (>1 long)."""
    if f_in == 0 and shape[1] > 1:
        return 1
    if f_out == 0 and shape[0] > 1:
        return 0
    return None


def _dst_shared_axis(insn: GemmInsn, dst: np.ndarray, shape: tuple[int, int, int]) -> int | None:
    axis = _shared_axis(insn.dst_factor_out, insn.dst_factor_in, shape)
    if axis is None:
        return None
    plane = np.take(dst.reshape(shape), 0, axis=axis)
    return axis if np.unique(plane).size == plane.size else None


def gemm(st: SramState, insn: GemmInsn, index: int, max_iters: int) -> None:
    total = n_iters(insn)
    if total == 0:
        return
    cfg = st.cfg
    uops = st.decoded_uops(insn.uop_bgn, insn.uop_end, index)
    check_bounds(insn, uops, LoopBounds(cfg.acc_depth, cfg.inp_depth, cfg.wgt_depth), index)
    prev_last = None
    for lo, hi in chunks(insn, max_iters):
        idx = expand(insn, uops, lo, hi)
        dst = idx["dst"]
        if insn.reset_reg:
            rows = np.unique(dst)
            st.acc[rows] = 0
        else:
            check_hazard(insn, dst, index, lo, prev_last)
            prev_last = dst[-1]
            shape = (hi - lo, insn.iter_in, n_uops(insn))
            wgt_axis = _shared_axis(insn.wgt_factor_out, insn.wgt_factor_in, shape)
            prods = products(st, idx["src"], idx["wgt"], shape, wgt_axis)
            rows = accumulate(st.acc, dst, prods, shape, _dst_shared_axis(insn, dst, shape))
        st.out[rows] = st.acc[rows].astype(np.int8)
