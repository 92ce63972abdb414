"""insert_dep_tokens: the pass that makes load, compute and store wait for each other.

For every instruction, in program order, it finds the latest instruction of each other module
whose accesses conflict with it (read-after-write, write-after-read, write-after-write on an SRAM
range or DRAM bytes) and is not already known to be complete (tracked transitively with vector
clocks). It then sets a pop flag on the instruction and the matching push flag on that producer.
Pushes and pops on each token queue therefore pair up in order. A dependency between load and
store, which share no queue, is relayed through a token-only compute instruction.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pyvta.compiler.backend.vta.emitter import Access
from pyvta.isa import (
    DEP_FLAG_NAMES,
    DEP_QUEUES,
    AluInsn,
    GemmInsn,
    HwConfig,
    Insn,
    Load,
    MemType,
    Module,
)

_SRAMS = ("inp", "wgt", "acc", "out", "uop")


_ENDS = {"l": Module.LOAD, "c": Module.COMPUTE, "s": Module.STORE}
# (producer, consumer) -> the header flag the producer pushes with / the consumer pops with.
PUSH_FLAG: dict[tuple[Module, Module], str] = {}
POP_FLAG: dict[tuple[Module, Module], str] = {}
for _module, _queues in DEP_QUEUES.items():
    for _flag_name, _queue in zip(DEP_FLAG_NAMES, _queues, strict=True):
        if _queue is not None:
            _pair = (_ENDS[_queue.value[0]], _ENDS[_queue.value[2]])
            (PUSH_FLAG if _flag_name.startswith("push") else POP_FLAG)[_pair] = _flag_name


class _Tracker:
    def __init__(self, hw: HwConfig):
        self.last_r = {
            m: {s: np.full(hw.depth_of(s), -1, np.int64) for s in _SRAMS} for m in Module
        }
        self.last_w = {
            m: {s: np.full(hw.depth_of(s), -1, np.int64) for s in _SRAMS} for m in Module
        }
        self.dram: dict[Module, list[tuple[int, int, bool, int]]] = {m: [] for m in Module}

    def latest_conflict(self, other: Module, acc: Access) -> int:
        if acc.space == "dram":
            best = -1
            for lo, hi, write, idx in reversed(self.dram[other]):
                if idx <= best:
                    break
                if lo < acc.hi and acc.lo < hi and (write or acc.write):
                    best = idx
            return best
        lo, hi = max(acc.lo, 0), acc.hi
        if hi <= lo:
            return -1
        found = int(self.last_w[other][acc.space][lo:hi].max())
        if acc.write:
            found = max(found, int(self.last_r[other][acc.space][lo:hi].max()))
        return found

    def record(self, module: Module, acc: Access, idx: int) -> None:
        if acc.space == "dram":
            self.dram[module].append((acc.lo, acc.hi, acc.write, idx))
            return
        table = self.last_w if acc.write else self.last_r
        table[module][acc.space][max(acc.lo, 0) : acc.hi] = idx


class _Knowledge:
    """What one module knows complete: a prefix of each module's instructions (positions in the
    output stream), less ``holes``: compute instructions inside the prefix it does not know
    (an overlapped instruction's partner, which its push does not cover: rule 5 of
    ``isa.layout.OVERLAP_DOC``)."""

    def __init__(self) -> None:
        self.upto = {m: -1 for m in Module}
        self.holes: frozenset[int] = frozenset()

    def knows(self, module: Module, idx: int) -> bool:
        return idx <= self.upto[module] and not (module is Module.COMPUTE and idx in self.holes)

    def copy(self) -> _Knowledge:
        k = _Knowledge()
        k.upto, k.holes = dict(self.upto), self.holes
        return k

    def merge(self, other: _Knowledge) -> None:
        holes = {
            h
            for h in self.holes | other.holes
            if not self.knows(Module.COMPUTE, h) and not other.knows(Module.COMPUTE, h)
        }
        for m, v in other.upto.items():
            self.upto[m] = max(self.upto[m], v)
        self.holes = frozenset(holes)


def insert_dep_tokens(insns: list[Insn], accesses: list[list[Access]], hw: HwConfig) -> list[Insn]:
    """Return the stream with dependency flags (and relay instructions where needed).

    An instruction with ``overlap`` set (``mark_overlaps``) is not known to complete after its
    partner, so its pushes do not cover the partner: a later consumer that needs the partner
    pops from a compute instruction that covers it, or from a token-only compute LOAD (which
    waits for both pipes) placed before it."""
    out: list[Insn] = []
    out_accs: list[list[Access]] = []
    clocks: list[_Knowledge] = []  # per output instruction: what its pushes tell
    known = {m: _Knowledge() for m in Module}
    tracker = _Tracker(hw)
    last_push: dict[tuple[Module, Module], int] = {}  # (producer, consumer) -> its latest push
    partners = _Partners()
    blocked = _partners_of_overlapped(insns)
    out_blocked: list[bool] = []  # per output instruction: an overlapped one's partner

    def covers(z: int, other: Module, idx: int) -> bool:
        return out[z].module is other and clocks[z].knows(other, idx) and not out_blocked[z]

    def producer(other: Module, me: Module, idx: int) -> int | None:
        """idx itself, or a later compute instruction whose push covers it: for a compute
        hole (pushes pair in order), and for an overlapped instruction's partner, whose push
        would hold back the overlapped one (rule 5), where a later one exists that is short
        (not a GEMM that multiplies: the consumer would wait for it as well). None: none."""
        first = last_push.get((other, me), -1)
        if idx > first and not out_blocked[idx]:
            return idx
        for z in range(max(first, idx) + 1, len(out)):
            if covers(z, other, idx):
                if idx > first and isinstance(out[z], GemmInsn) and not out[z].reset_reg:
                    return idx
                return z
        return idx if idx > first else None

    def holes_hit(k: _Knowledge, accs: list[Access]) -> bool:
        """Whether a compute instruction ``k`` does not know conflicts with ``accs``."""
        return any(_conflict(a, b) for h in k.holes for a in accs for b in out_accs[h])

    def merged_hits(k: _Knowledge, clock: _Knowledge, accs: list[Access]) -> bool:
        trial = k.copy()
        trial.merge(clock)
        return holes_hit(trial, accs)

    def append(insn: Insn, needs: dict[Module, int], source: int | None, accs) -> int:
        me = insn.module
        flags = {}
        for other, idx in needs.items():
            if other is me or idx < 0:
                continue
            hole = other is Module.COMPUTE and holes_hit(known[me], accs)
            if known[me].knows(other, idx) and not hole:
                continue
            z = producer(other, me, idx)
            if other is Module.COMPUTE and (z is None or merged_hits(known[me], clocks[z], accs)):
                z = append(Load(MemType.UOP), {}, None, [])  # waits for both pipes: covers all
            if z is None:
                raise ValueError(f"insert_dep_tokens: no push can order instruction {idx}")
            flags[POP_FLAG[(other, me)]] = True
            out[z] = dataclasses.replace(out[z], **{PUSH_FLAG[(other, me)]: True})
            last_push[(other, me)] = z
            known[me].merge(clocks[z])
        out.append(dataclasses.replace(insn, **flags) if flags else insn)
        out_accs.append(accs)
        out_blocked.append(source is not None and source in blocked)
        pos = len(out) - 1
        known[me].upto[me] = pos
        mine = known[me].copy()
        if me is Module.COMPUTE:  # in program order, less an overlapped one's partner
            partner = partners.step(out[pos], pos)
            overlapped = partner is not None and out[pos].overlap
            mine.holes = frozenset({partner}) if overlapped else frozenset()
        clocks.append(mine)
        return pos

    for n, (insn, accs) in enumerate(zip(insns, accesses, strict=True)):
        me = insn.module
        needs = {m: -1 for m in Module if m is not me}
        for acc in accs:
            for other in needs:
                needs[other] = max(needs[other], tracker.latest_conflict(other, acc))
        far = [m for m in needs if (m, me) not in POP_FLAG and not known[me].knows(m, needs[m])]
        far = [m for m in far if needs[m] >= 0]
        for m in far:  # load <-> store: relay through a token-only compute instruction
            append(Load(MemType.UOP), {m: needs[m]}, None, [])
            needs[Module.COMPUTE] = max(needs[Module.COMPUTE], len(out) - 1)
            needs[m] = -1
        pos = append(insn, needs, n, accs)
        for acc in accs:
            tracker.record(me, acc, pos)
    return out


def _conflict(a: Access, b: Access) -> bool:
    return a.space == b.space and (a.write or b.write) and a.lo < b.hi and b.lo < a.hi


class _Partners:
    """Walks the compute instructions in order and names each GEMM/ALU instruction's partner:
    the other pipe's latest GEMM/ALU instruction (None when the pipes were drained since: a compute
    LOAD or FINISH came after it)."""

    def __init__(self) -> None:
        self.latest: dict[type, int] = {}

    def step(self, insn: Insn, pos: int) -> int | None:
        if insn.module is not Module.COMPUTE:
            return None
        if not isinstance(insn, GemmInsn | AluInsn):
            self.latest.clear()
            return None
        mine = GemmInsn if isinstance(insn, GemmInsn) else AluInsn
        other = AluInsn if mine is GemmInsn else GemmInsn
        partner = self.latest.get(other)
        self.latest[mine] = pos
        return partner


def _partners_of_overlapped(insns: list[Insn]) -> set[int]:
    """Indices of the instructions that an overlapped instruction runs beside."""
    partners = _Partners()
    found = set()
    for i, insn in enumerate(insns):
        partner = partners.step(insn, i)
        if partner is not None and insn.overlap:
            found.add(partner)
    return found


def mark_overlaps(insns: list[Insn], accesses: list[list[Access]]) -> list[Insn]:
    """Set ``overlap`` on every GEMM/ALU instruction whose ACC and OUT rows are disjoint from
    its partner's (``_Partners``), so it runs beside it (``isa.layout.OVERLAP_DOC``). Run before
    ``insert_dep_tokens``, which then orders what the overlapped pushes do not cover."""
    out = list(insns)
    partners = _Partners()
    for i, insn in enumerate(insns):
        partner = partners.step(insn, i)
        if partner is not None and _disjoint(accesses[i], accesses[partner]):
            out[i] = dataclasses.replace(insn, overlap=True)
    return out


def _disjoint(a: list[Access], b: list[Access]) -> bool:
    """No ACC or OUT row touched by both (reads included)."""
    for x in a:
        for y in b:
            if x.space == y.space and x.space in ("acc", "out") and x.lo < y.hi and y.lo < x.hi:
                return False
    return True
