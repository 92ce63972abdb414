"""GEMM schedule for the CPU: packed B panels, register-blocked micro-kernel, parallel tiles.

``C[M, N] = A[M, K] @ B[K, N]``; B is repacked to ``[N/bn, K, bn]`` so the micro-kernel reads
unit-stride vectors; each ``bm x bn`` tile of C is accumulated in a ``local`` buffer (registers)
with ``bm`` unrolled rows and ``bn`` vector lanes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum


@dataclass(frozen=True)
class GemmKnobs:
    """``bm``: rows per register tile; ``bn``: columns per tile (a multiple of the vector
    lanes); ``bk``: unroll of the reduction; ``parallel``: run the outer tiles across threads;
    ``panels_outer``: loop over B's column panels outside the row tiles (each panel stays in
    the core's cache while every row tile uses it; A is streamed once per panel instead);
    ``pack_b``: repack B into column panels first (unit-stride vectors for the micro-kernel; it
    pays off when several row tiles reuse a panel, not for a single row)."""

    bm: int = 8
    bn: int = 32
    bk: int = 4
    parallel: bool = True
    panels_outer: bool = False
    pack_b: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def for_target(target) -> GemmKnobs:
        """A starting point sized to ``target``'s SIMD registers: two vectors of columns and
        as many rows as keep the accumulators within the register file (32 registers with
        AVX-512, 16 otherwise)."""
        lanes = target.vector_lanes("float32")
        regs = target.vector_registers
        return GemmKnobs(bm=min(8, (regs - 4) // 2), bn=2 * lanes, bk=4)


def matmul_packed(m: int, n: int, k: int, knobs: GemmKnobs = GemmKnobs(), dtype="float32"):
    """Schedule and arguments ``(sch, [A, B, C])`` of a float32 GEMM. ``n`` must be a multiple
    of ``knobs.bn``; ``m`` and ``k`` may be anything (tails are guarded)."""
    bm, bn, bk = knobs.bm, knobs.bn, knobs.bk
    if n % bn:
        raise ValueError(f"n={n} must be a multiple of bn={bn}")
    a = placeholder((m, k), dtype, "A")
    b = placeholder((k, n), dtype, "B")
    r = reduce_axis(k, "k")
    if knobs.pack_b:
        bp = compute((n // bn, k, bn), lambda jo, kk, ji: b[kk, jo * bn + ji], name="B.packed")
        c = compute((m, n), lambda i, j: te_sum(a[i, r] * bp[j // bn, r, j % bn], r), name="C")
    else:
        c = compute((m, n), lambda i, j: te_sum(a[i, r] * b[r, j], r), name="C")
    s = create_schedule(c)
    cc = s.cache_write(c, "local")
    io, jo, ii, ji = s[c].tile("i", "j", bm, bn)
    outer, inner = (jo, io) if knobs.panels_outer else (io, jo)
    if knobs.panels_outer:
        s[c].reorder(jo, io, ii, ji)
    s[cc].compute_at(s[c], inner)
    ko, ki = s[cc].split("k", bk)
    s[cc].reorder(ko, ki, "i.c", "j.c")
    s[cc].vectorize("j.c")
    s[cc].unroll("i.c")
    s[cc].unroll(ki)
    s[c].vectorize(ji)
    if knobs.pack_b:
        s[bp].vectorize("ji")
    if knobs.parallel:
        s[c].parallel(outer)
        if knobs.pack_b:
            s[bp].parallel("jo")
    return s, [a, b, c]
