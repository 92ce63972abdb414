"""ALU semantics, vectorised: ACC[dst] = op(ACC[dst], imm or ACC[src]) lane by lane over int32.

The hardware runs the iterations in order, so an iteration may read a row an earlier one wrote.
The loop is cut into the longest runs in which no iteration reads or rewrites a row written earlier
in the same run; each run is one numpy operation (one run in every compiled program).
"""

from __future__ import annotations

import numpy as np

from pyvta.isa import AluInsn, AluOp
from pyvta.isa.opcodes import clip_bounds
from pyvta.sim.loops import LoopBounds, check_bounds, check_hazard, chunks, expand, n_iters
from pyvta.sim.state import SramState

SHIFT_MAX = 31


def apply(op: AluOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One ALU operation on int32 lanes with pyvta's exact semantics (wrapping, clamped shifts,
    CLIP's bounds from the operand's low 16 bits)."""
    a = a.astype(np.int32, copy=False)
    b = np.broadcast_to(np.asarray(b, dtype=np.int32), a.shape)
    if op is AluOp.MIN:
        return np.minimum(a, b)
    if op is AluOp.MAX:
        return np.maximum(a, b)
    if op is AluOp.ADD:
        return a + b
    if op is AluOp.MUL:
        return a * b
    if op is AluOp.CLIP:  # isa.opcodes.CLIP_DOC
        lo, hi = clip_bounds(b)
        return np.minimum(np.maximum(a, lo), hi)
    if op is AluOp.SHR:
        right = a >> np.minimum(np.maximum(b, 0), SHIFT_MAX)
        left_amount = np.minimum(np.maximum(-b.astype(np.int64), 0), SHIFT_MAX).astype(np.uint32)
        left = (a.view(np.uint32) << left_amount).view(np.int32)
        return np.where(b >= 0, right, left)
    raise ValueError(f"unknown ALU opcode {op!r} (allowed: {', '.join(o.name for o in AluOp)})")


def _last_write_before(dst: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """For each iteration m: the latest iteration n < m whose dst is one of the rows m reads.

    ``reads`` is (r, n_iter): the rows each iteration reads. Returns int64 (n_iter,), -1 if none.
    """
    n = dst.size
    idx = np.arange(n)
    r = reads.shape[0]
    values = np.concatenate([dst] + list(reads))
    iters = np.concatenate([idx] * (r + 1))
    is_write = np.concatenate([np.ones(n, np.int8)] + [np.zeros(n, np.int8)] * r)
    order = np.lexsort((is_write, iters, values))  # within a row: by iteration, reads first
    v, it, w = values[order], iters[order], is_write[order]
    group = np.concatenate(([0], np.cumsum(v[1:] != v[:-1])))
    span = n + 1
    key = group * span + np.where(w == 1, it + 1, 0)
    latest = np.maximum.accumulate(key) - group * span - 1  # -1: no write yet in this row
    result = np.full(n, -1, np.int64)
    reads_mask = w == 0
    np.maximum.at(result, it[reads_mask], latest[reads_mask])
    return result


def _runs(dst: np.ndarray, src: np.ndarray | None) -> list[tuple[int, int]]:
    """Cut [0, n) into runs free of read-after-write and write-after-write inside a run."""
    n = dst.size
    if src is None:
        if np.unique(dst).size == n:
            return [(0, n)]
        reads = dst[None, :]
    else:
        pos = np.full(int(max(dst.max(), src.max())) + 1, n, np.int64)
        pos[dst] = np.arange(n)  # with unique dst: the iteration that writes each row
        if np.unique(dst).size == n and not (pos[src] < np.arange(n)).any():
            return [(0, n)]
        reads = np.stack([dst, src])
    dep = _last_write_before(dst, reads)
    runs, start = [], 0
    while start < n:
        later = np.flatnonzero(dep[start:] >= start)
        end = start + int(later[0]) if later.size else n
        runs.append((start, end))
        start = end
    return runs


def alu(st: SramState, insn: AluInsn, index: int, max_iters: int) -> None:
    total = n_iters(insn)
    if total == 0:
        return
    cfg = st.cfg
    uops = st.decoded_uops(insn.uop_bgn, insn.uop_end, index)
    check_bounds(insn, uops, LoopBounds(cfg.acc_depth, cfg.acc_depth, None), index)
    prev_last = None
    for lo, hi in chunks(insn, max_iters):
        idx = expand(insn, uops, lo, hi)
        dst = idx["dst"]
        check_hazard(insn, dst, index, lo, prev_last)
        prev_last = dst[-1]
        src = None if insn.use_imm else idx["src"]
        for a, b in _runs(dst, src):
            d = dst[a:b]
            operand = np.int32(insn.imm) if insn.use_imm else st.acc[src[a:b]]
            st.acc[d] = apply(insn.alu_opcode, st.acc[d], operand)
        rows = np.unique(dst)
        st.out[rows] = st.acc[rows].astype(np.int8)
