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
from pyvta.isa import DEP_FLAG_NAMES, DEP_QUEUES, HwConfig, Insn, Load, MemType, Module

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


def insert_dep_tokens(insns: list[Insn], accesses: list[list[Access]], hw: HwConfig) -> list[Insn]:
    """Return the stream with dependency flags (and relay instructions where needed)."""
    out: list[Insn] = []
    clocks: list[dict[Module, int]] = []  # per output instruction: what is known complete
    known = {m: {o: -1 for o in Module} for m in Module}
    tracker = _Tracker(hw)

    def append(insn: Insn, needs: dict[Module, int]) -> int:
        me = insn.module
        flags = {}
        for other, idx in needs.items():
            if other is me or idx <= known[me][other]:
                continue
            flags[POP_FLAG[(other, me)]] = True
            out[idx] = dataclasses.replace(out[idx], **{PUSH_FLAG[(other, me)]: True})
            for m, v in clocks[idx].items():
                known[me][m] = max(known[me][m], v)
        out.append(dataclasses.replace(insn, **flags) if flags else insn)
        pos = len(out) - 1
        known[me][me] = pos
        clocks.append(dict(known[me]))
        return pos

    for insn, accs in zip(insns, accesses, strict=True):
        me = insn.module
        needs = {m: -1 for m in Module if m is not me}
        for acc in accs:
            for other in needs:
                needs[other] = max(needs[other], tracker.latest_conflict(other, acc))
        far = [m for m in needs if (m, me) not in POP_FLAG and needs[m] > known[me][m]]
        for m in far:  # load <-> store: relay through a token-only compute instruction
            append(Load(MemType.UOP), {m: needs[m]})
            needs[Module.COMPUTE] = max(needs[Module.COMPUTE], len(out) - 1)
            needs[m] = -1
        pos = append(insn, needs)
        for acc in accs:
            tracker.record(me, acc, pos)
    return out
