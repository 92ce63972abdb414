"""A race detector: conflicting accesses of two modules that no chain of dependency tokens
orders are reported, even when this run's interleaving happened to give the right answer.

Happens-before is tracked with vector clocks: each token carries the clock of the instruction
that pushed it, and a pop merges it into the popping module's clock. An access by module M
conflicts with an earlier access by module X to an overlapping SRAM row range or DRAM byte range
(one of them a write) unless M's clock already covers X's instruction. Ranges are conservative
(min..max of an instruction's rows), as the compiler's token pass uses them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from pyvta.isa import (
    PADDED_MEM_TYPES,
    AluInsn,
    DepQueue,
    GemmInsn,
    HwConfig,
    Insn,
    MemInsn,
    Module,
)
from pyvta.sim.errors import OutOfBoundsError, SimError
from pyvta.sim.loops import n_iters
from pyvta.sim.state import SramState

_SPACES = ("uop", "inp", "wgt", "acc", "out")


class RaceError(SimError):
    """Two modules access the same memory, at least one writing, with no token ordering them."""


@dataclass(frozen=True)
class Access:
    space: str  # "uop", "inp", "wgt", "acc", "out" (rows) or "dram" (bytes)
    lo: int
    hi: int
    write: bool


def accesses(insn: Insn, st: SramState) -> list[Access]:
    """What one instruction reads and writes (conservative ranges)."""
    if isinstance(insn, MemInsn):
        return mem_accesses(insn, st.cfg)
    if isinstance(insn, (GemmInsn, AluInsn)) and n_iters(insn):
        if insn.uop_end > st.uop.shape[0]:
            return []  # past the UOP buffer: executing it raises OutOfBoundsError by index
        u = st.decoded_uops(insn.uop_bgn, insn.uop_end, -1)
        lo_o, lo_i = insn.iter_out - 1, insn.iter_in - 1

        def span(name: str, f_out: int, f_in: int) -> tuple[int, int]:
            return int(u[name].min()), int(u[name].max()) + lo_o * f_out + lo_i * f_in + 1

        d = span("dst", insn.dst_factor_out, insn.dst_factor_in)
        out = [
            Access("uop", insn.uop_bgn, insn.uop_end, False),
            Access("acc", *d, True),
            Access("out", *d, True),
        ]
        if isinstance(insn, GemmInsn):
            if not insn.reset_reg:
                out += [
                    Access("acc", *d, False),
                    Access("inp", *span("src", insn.src_factor_out, insn.src_factor_in), False),
                    Access("wgt", *span("wgt", insn.wgt_factor_out, insn.wgt_factor_in), False),
                ]
        else:
            out.append(Access("acc", *d, False))
            if not insn.use_imm:
                out.append(
                    Access("acc", *span("src", insn.src_factor_out, insn.src_factor_in), False)
                )
        return out
    return []


def mem_accesses(insn: MemInsn, cfg: HwConfig) -> list[Access]:
    """The SRAM rows and DRAM bytes a LOAD or STORE touches (padding rows included)."""
    if insn.x_size == 0 or insn.y_size == 0:
        return []
    mt = insn.memory_type
    elem = cfg.elem_bytes_of(mt.dram_elem)
    d_lo = insn.dram_base * elem
    d_hi = d_lo + ((insn.y_size - 1) * insn.x_stride + insn.x_size) * elem
    if insn.is_store:
        n = insn.y_size * insn.x_size
        return [
            Access("out", insn.sram_base, insn.sram_base + n, False),
            Access("dram", d_lo, d_hi, True),
        ]
    pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
    if mt not in PADDED_MEM_TYPES:
        pads = (0, 0, 0, 0)
    rows = (pads[0] + insn.y_size + pads[1]) * (pads[2] + insn.x_size + pads[3])
    return [
        Access(mt.sram, insn.sram_base, insn.sram_base + rows, True),
        Access("dram", d_lo, d_hi, False),
    ]


def check_static_bounds(insns: list[Insn], cfg: HwConfig, dram_bytes: int) -> None:
    """Raise OutOfBoundsError for the first instruction whose SRAM rows, DRAM bytes or
    micro-op range pass a buffer's end: what is known without executing (rows named by micro-op
    contents are checked by ``sim.run``)."""
    for i, insn in enumerate(insns):
        if isinstance(insn, MemInsn):
            what = f"{'STORE' if insn.is_store else 'LOAD'} {insn.memory_type.name}"
            for a in mem_accesses(insn, cfg):
                size = dram_bytes if a.space == "dram" else cfg.depth_of(a.space)
                unit = "bytes" if a.space == "dram" else "rows"
                if a.hi > size:
                    raise OutOfBoundsError(
                        f"instruction {i} ({what}): {a.space.upper()} {unit} [{a.lo}, {a.hi})"
                        f" pass the end of the buffer ({size} {unit})"
                    )
        elif (
            isinstance(insn, GemmInsn | AluInsn) and n_iters(insn) and insn.uop_end > cfg.uop_depth
        ):
            raise OutOfBoundsError(
                f"instruction {i}: micro-ops [{insn.uop_bgn}, {insn.uop_end}) pass the end"
                f" of the UOP buffer ({cfg.uop_depth} rows)"
            )


class RaceDetector:
    def __init__(self, cfg: HwConfig):
        self.clock = {m: {x: 0 for x in Module} for m in Module}
        self.token_clocks: dict[DepQueue, deque] = {q: deque() for q in DepQueue}
        self.last = {
            kind: {m: {s: np.zeros(cfg.depth_of(s), np.int64) for s in _SPACES} for m in Module}
            for kind in ("w", "r")
        }
        self.index_of: dict[tuple[Module, int], int] = {}
        self.dram: dict[Module, list[tuple[int, int, bool, int]]] = {m: [] for m in Module}

    def before(self, module: Module, pops) -> None:
        for q in pops:
            for x, n in self.token_clocks[q].popleft().items():
                self.clock[module][x] = max(self.clock[module][x], n)

    def after(self, module: Module, pushes) -> None:
        for q in pushes:
            self.token_clocks[q].append(dict(self.clock[module]))

    def access(self, module: Module, index: int, accs: list[Access]) -> None:
        mine = self.clock[module]
        mine[module] += 1
        stamp = mine[module]
        self.index_of[(module, stamp)] = index
        for a in accs:
            for x in Module:
                if x is module:
                    continue
                seen = mine[x]
                worst = self._latest(x, a)
                if worst > seen:
                    other = self.index_of[(x, worst)]
                    what = "writes" if a.write else "reads"
                    raise RaceError(
                        f"instruction {index} ({module.value}) {what} {a.space} [{a.lo}, {a.hi})"
                        f" which instruction {other} ({x.value}) also accesses, and no dependency"
                        " token orders the two"
                    )
        for a in accs:
            if a.space == "dram":
                self.dram[module].append((a.lo, a.hi, a.write, stamp))
            else:
                self.last["w" if a.write else "r"][module][a.space][max(a.lo, 0) : a.hi] = stamp

    def _latest(self, x: Module, a: Access) -> int:
        if a.space == "dram":
            best = 0
            for lo, hi, write, stamp in self.dram[x]:
                if lo < a.hi and a.lo < hi and (write or a.write):
                    best = max(best, stamp)
            return best
        # clipped to the buffer: an access past its end is the executor's to report (by index)
        lo, hi = max(a.lo, 0), min(a.hi, self.last["w"][x][a.space].size)
        if hi <= lo:
            return 0
        found = int(self.last["w"][x][a.space][lo:hi].max())
        if a.write:
            found = max(found, int(self.last["r"][x][a.space][lo:hi].max()))
        return found
