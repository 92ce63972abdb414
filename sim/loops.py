"""The two-level micro-op loop of GEMM and ALU instructions, expanded into index arrays.

For i in iter_out, j in iter_in, k in [uop_bgn, uop_end), in that order:
    dst = uop.dst[k] + i*dst_factor_out + j*dst_factor_in      (and likewise src, wgt).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pyvta.isa import AluInsn, GemmInsn
from pyvta.sim.errors import HazardError, OutOfBoundsError
from pyvta.sim.timing import expanded_rows


@dataclass(frozen=True)
class LoopBounds:
    """SRAM depths an expanded loop must stay inside (rows)."""

    dst_depth: int
    src_depth: int
    wgt_depth: int | None  # None for ALU (no weight operand)


def loop_shape(insn: GemmInsn | AluInsn) -> tuple[int, int, int, int, int, int]:
    """The two hardware loops: (iter_out, iter_in, dst_factor_out, dst_factor_in,
    src_factor_out, src_factor_in)."""
    return (
        insn.iter_out,
        insn.iter_in,
        insn.dst_factor_out,
        insn.dst_factor_in,
        insn.src_factor_out,
        insn.src_factor_in,
    )


def n_uops(insn: GemmInsn | AluInsn) -> int:
    return max(insn.uop_end - insn.uop_bgn, 0)


def n_iters(insn: GemmInsn | AluInsn) -> int:
    """Micro-op iterations the instruction performs."""
    return insn.iter_out * insn.iter_in * n_uops(insn)


def _operands(insn: GemmInsn | AluInsn) -> list[tuple[str, int, int]]:
    ops = [
        ("dst", insn.dst_factor_out, insn.dst_factor_in),
        ("src", insn.src_factor_out, insn.src_factor_in),
    ]
    if isinstance(insn, GemmInsn):
        ops.append(("wgt", insn.wgt_factor_out, insn.wgt_factor_in))
    return ops


def check_bounds(
    insn: GemmInsn | AluInsn, uops: dict[str, np.ndarray], bounds: LoopBounds, index: int
) -> None:
    """Raise OutOfBoundsError if any iteration indexes outside its SRAM (checked analytically)."""
    if n_iters(insn) == 0:
        return
    kind = "GEMM" if isinstance(insn, GemmInsn) else "ALU"
    depth = {"dst": bounds.dst_depth, "src": bounds.src_depth, "wgt": bounds.wgt_depth}
    buf = {"dst": "ACC", "src": "INP" if kind == "GEMM" else "ACC", "wgt": "WGT"}
    for name, f_out, f_in in _operands(insn):
        base = uops[name]
        k = int(np.argmax(base))
        top = int(base[k]) + (insn.iter_out - 1) * f_out + (insn.iter_in - 1) * f_in
        if top >= depth[name]:
            raise OutOfBoundsError(
                f"instruction {index} ({kind}): {name} index reaches {top}, outside the"
                f" {buf[name]} buffer of {depth[name]} rows (uop {insn.uop_bgn + k} base"
                f" {int(base[k])}, factors out={f_out} in={f_in},"
                f" iter_out={insn.iter_out} iter_in={insn.iter_in})"
            )


def expand(
    insn: GemmInsn | AluInsn, uops: dict[str, np.ndarray], i_lo: int, i_hi: int
) -> dict[str, np.ndarray]:
    """Index arrays (int64, execution order) for outer iterations [i_lo, i_hi)."""
    return {name: expanded_rows(insn, uops, name, i_lo, i_hi) for name, _, _ in _operands(insn)}


def chunks(insn: GemmInsn | AluInsn, max_iters: int) -> Iterator[tuple[int, int]]:
    """Split the outer loop so that each chunk holds at most ``max_iters`` iterations."""
    per_out = max(insn.iter_in * n_uops(insn), 1)
    step = max(max_iters // per_out, 1)
    for lo in range(0, insn.iter_out, step):
        yield lo, min(lo + step, insn.iter_out)


def check_hazard(
    insn: GemmInsn | AluInsn, dst: np.ndarray, index: int, i_lo: int = 0, prev: int | None = None
) -> None:
    """Two consecutive micro-ops may not write the same ACC row (read-modify-write hazard).

    ``dst`` holds the rows of outer iterations from ``i_lo``; ``prev`` is the row written just
    before them (by the previous chunk), if any.
    """
    joined = dst if prev is None else np.concatenate(([prev], dst))
    if joined.size < 2:
        return
    same = joined[1:] == joined[:-1]
    if same.any():
        nu = max(n_uops(insn), 1)
        n = int(np.argmax(same)) + 1 - (prev is not None) + i_lo * insn.iter_in * nu
        i, rest = divmod(n, insn.iter_in * nu)
        j, k = divmod(rest, nu)
        raise HazardError(
            f"instruction {index}: consecutive micro-ops write ACC row"
            f" {int(joined[int(np.argmax(same)) + 1])} (iteration i={i} j={j} uop"
            f" {insn.uop_bgn + k} repeats the row of the micro-op before it); the hardware does"
            " not check this read-modify-write hazard, so the compiler must order loops to avoid it"
        )
