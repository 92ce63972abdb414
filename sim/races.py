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


# The agents happens-before is tracked for: the load and store modules, and the compute module
# split into its two pipes (OVERLAP_DOC) and the rest of its instructions (LOADs, FINISH), which
# wait for both pipes to be empty.
_GEMM_PIPE, _ALU_PIPE = "gemm pipe", "alu pipe"
_AGENTS = (Module.LOAD, Module.COMPUTE, Module.STORE, _GEMM_PIPE, _ALU_PIPE)


def pipe_of(insn: Insn) -> str | None:
    """The compute pipe a GEMM (resets included) or ALU instruction issues to (None otherwise)."""
    if isinstance(insn, GemmInsn):
        return _GEMM_PIPE
    if isinstance(insn, AluInsn):
        return _ALU_PIPE
    return None


def _label(agent) -> str:
    return agent.value if isinstance(agent, Module) else "compute"


class RaceDetector:
    """Vector clocks over the agents of ``_AGENTS``. Inside the compute module (rules 1-5 of the
    overlap contract, ``isa.layout.OVERLAP_DOC``): instructions dispatch in order, so each knows
    every token popped and every push made before it, its own pipe's earlier instructions and
    the compute LOADs; a GEMM/ALU instruction knows all of the other pipe, except, when it has
    ``overlap = 1``, its partner (the other pipe's most recent instruction, unless that one
    pushed a token: later instructions wait for a push)."""

    def __init__(self, cfg: HwConfig):
        self.clock = {a: {x: 0 for x in _AGENTS} for a in _AGENTS}
        self.before_last = {a: {x: 0 for x in _AGENTS} for a in _AGENTS}  # before its latest
        self.last_pushed = {a: False for a in _AGENTS}
        self.dispatched = {x: 0 for x in _AGENTS}  # what every later compute instruction knows
        self.token_clocks: dict[DepQueue, deque] = {q: deque() for q in DepQueue}
        self.last = {
            kind: {a: {s: np.zeros(cfg.depth_of(s), np.int64) for s in _SPACES} for a in _AGENTS}
            for kind in ("w", "r")
        }
        self.index_of: dict[tuple, int] = {}
        self.latest_index = {a: -1 for a in _AGENTS}
        self.dram: dict = {a: [] for a in _AGENTS}
        self._current = None

    def _agent(self, module: Module, insn: Insn | None):
        return (pipe_of(insn) if insn is not None else None) or module

    def before(self, module: Module, pops, insn: Insn | None = None) -> None:
        agent = self._agent(module, insn)
        for q in pops:
            popped = self.token_clocks[q].popleft()
            _merge(self.clock[agent], popped)
            if module is Module.COMPUTE:
                _merge(self.dispatched, popped)
        if module is not Module.COMPUTE:
            return
        mine = self.clock[agent]
        _merge(mine, self.dispatched)
        _merge(mine, self.clock[Module.COMPUTE])
        pipe = pipe_of(insn) if insn is not None else None
        others = [a for a in (_GEMM_PIPE, _ALU_PIPE) if a != pipe]
        for other in others:
            partner = self.latest_index[other]
            if pipe and insn.overlap and partner >= 0 and not self.last_pushed[other]:
                _merge(mine, self.before_last[other])
                self._current = partner
            else:
                _merge(mine, self.clock[other])

    def after(self, module: Module, pushes, insn: Insn | None = None) -> None:
        agent = self._agent(module, insn)
        self.last_pushed[agent] = bool(pushes)
        for q in pushes:
            self.token_clocks[q].append(dict(self.clock[agent]))
        if module is Module.COMPUTE and pushes:
            _merge(self.dispatched, self.clock[agent])

    def access(self, module: Module, index: int, accs: list[Access], insn: Insn | None = None):
        agent = self._agent(module, insn)
        partner, self._current = self._current, None
        mine = self.clock[agent]
        self.before_last[agent] = dict(mine)
        mine[agent] += 1
        stamp = mine[agent]
        self.index_of[(agent, stamp)] = index
        self.latest_index[agent] = index
        for a in accs:
            for x in _AGENTS:
                if x == agent:
                    continue
                seen = mine[x]
                worst = self._latest(x, a)
                if worst > seen:
                    other = self.index_of[(x, worst)]
                    what = "writes" if a.write else "reads"
                    why = "no dependency token orders the two"
                    if other == partner:
                        why = (
                            f"the two run side by side on the {agent} and the {x} (instruction"
                            f" {index} has overlap = 1 and {other} is its partner): an overlapped"
                            " pair must touch disjoint ACC and OUT rows"
                        )
                    raise RaceError(
                        f"instruction {index} ({_label(agent)}) {what} {a.space} [{a.lo}, {a.hi})"
                        f" which instruction {other} ({_label(x)}) also accesses, and {why}"
                    )
        for a in accs:
            if a.space == "dram":
                self.dram[agent].append((a.lo, a.hi, a.write, stamp))
            else:
                self.last["w" if a.write else "r"][agent][a.space][max(a.lo, 0) : a.hi] = stamp

    def _latest(self, x, a: Access) -> int:
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


def _merge(into: dict, other: dict) -> None:
    for x, n in other.items():
        if n > into[x]:
            into[x] = n
