"""The cycle model: fetch, load, compute and store run concurrently, blocked by dependency tokens,
by their command queues and by the DRAM port's AXI channels (fetch, load and the compute unit's
loads share the read channel; the store has the write channel).

It is an event simulation at instruction granularity: the instruction that can start earliest runs
next, so DRAM requests are granted in time order. All costs come from ``sim.timing.Timing``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa import (
    PADDED_MEM_TYPES,
    AluInsn,
    DepQueue,
    FinishInsn,
    GemmInsn,
    HwConfig,
    Insn,
    MemInsn,
    MemType,
    Module,
)
from pyvta.sim import dma
from pyvta.sim.dispatch import Dispatched, deadlock_error, dispatch
from pyvta.sim.loops import loop_shape, n_iters, n_uops
from pyvta.sim.program import Program
from pyvta.sim.races import accesses, check_static_bounds
from pyvta.sim.state import SramState
from pyvta.sim.timing import Timing, expanded_rows, src_cached


@dataclass
class ModuleStats:
    insns: int = 0
    busy_cycles: int = 0
    token_stall_cycles: int = 0  # waiting for a dependency token
    dram_stall_cycles: int = 0  # waiting for the DRAM port's channel


@dataclass
class TraceEvent:
    module: str
    name: str
    index: int
    start_cycle: int
    dur_cycles: int


@dataclass
class CycleReport:
    total_cycles: int
    modules: dict[str, ModuleStats]
    gemm_cycles: int  # cycles the GEMM core did MACs (non-reset micro-op iterations)
    macs: int
    timing: Timing
    events: list[TraceEvent] = field(default_factory=list)

    @property
    def gemm_utilisation(self) -> float:
        return self.gemm_cycles / self.total_cycles if self.total_cycles else 0.0

    @property
    def time_us(self) -> float:
        return self.total_cycles / self.timing.clock_mhz

    @property
    def effective_gops(self) -> float:
        """Operations (2 per MAC) per second at the timing's clock."""
        return 2 * self.macs / (self.time_us * 1e3) if self.total_cycles else 0.0

    def to_dict(self) -> dict:
        return {
            "total_cycles": self.total_cycles,
            "gemm_cycles": self.gemm_cycles,
            "gemm_utilisation": self.gemm_utilisation,
            "macs": self.macs,
            "time_us": self.time_us,
            "effective_gops": self.effective_gops,
            "modules": {k: vars(v) for k, v in self.modules.items()},
        }

    def table(self) -> str:
        lines = [
            f"total cycles {self.total_cycles}  ({self.time_us:.1f} us at"
            f" {self.timing.clock_mhz:g} MHz)  GEMM utilisation {100 * self.gemm_utilisation:.1f}%"
            f"  effective {self.effective_gops:.2f} GOPS",
            f"{'module':<8} {'insns':>7} {'busy':>10} {'token stall':>12} {'dram stall':>11}",
        ]
        for name, s in self.modules.items():
            lines.append(
                f"{name:<8} {s.insns:>7} {s.busy_cycles:>10} {s.token_stall_cycles:>12}"
                f" {s.dram_stall_cycles:>11}"
            )
        return "\n".join(lines)


class _Dram:
    """One AXI data channel (read, or write): grants transfers in request order, one beat per
    cycle; a transfer's rows come no faster than the DMA requests them (``Timing.transfer_cycles``),
    and other transfers' beats fill the gaps."""

    def __init__(self, timing: Timing):
        self.t = timing
        self.free_at = 0

    def transfer(self, ready: int, rows: int, row_beats: int) -> tuple[int, int]:
        """Move ``rows`` rows of ``row_beats`` beats requested from ``ready``; returns (the cycle
        of the first beat, cycles spent waiting for the channel)."""
        first = ready + self.t.dram_latency_cycles
        start = max(first, self.free_at)
        self.free_at = start + rows * row_beats
        return start, start - first


def alu_src_repeats(insn: AluInsn, fields: dict[str, np.ndarray] | None = None) -> int:
    """Register-operand micro-ops of an ALU instruction whose src row is the previous micro-op's
    and was not just written by it (overlap contract rule 8: they skip the src read; counted
    within one instruction). ``fields``: the kernel's decoded micro-ops; without them only a
    one-micro-op kernel is counted (exactly, from the loop factors), a longer one as none."""
    if insn.use_imm or n_iters(insn) < 2:
        return 0
    n_in, n_out = insn.iter_in, insn.iter_out
    if fields is None or n_iters(insn) > _MAX_EXPANDED_ITERS:
        if n_uops(insn) != 1:
            return 0
        sfo, sfi = insn.src_factor_out, insn.src_factor_in
        inner = n_out * (n_in - 1) if sfi == 0 else 0
        across = n_out - 1 if sfo == (n_in - 1) * sfi else 0
        return inner + across
    src, dst = expanded_rows(insn, fields, "src"), expanded_rows(insn, fields, "dst")
    return int(src_cached(src, dst).sum())


_MAX_EXPANDED_ITERS = 1 << 20


def raw_stall_cycles(
    insn: GemmInsn | AluInsn, t: Timing, fields: dict[str, np.ndarray] | None, cache: dict
) -> int:
    """Cycles the ISSUE stage holds the instruction's micro-ops for read-after-write on ACC rows
    among themselves (``Timing.gemm_raw_stall_cycles``, ``alu_raw_stall_cycles``); 0 without
    the micro-ops' contents. Instructions alike (micro-ops, loops) are costed once (``cache``:
    key -> cycles, kept by the caller for one program)."""
    if fields is None or n_iters(insn) < 2 or n_iters(insn) > _MAX_EXPANDED_ITERS:
        return 0
    if isinstance(insn, GemmInsn) and insn.reset_reg:
        return 0
    key = (
        type(insn),
        getattr(insn, "use_imm", False),
        *loop_shape(insn),
        fields["dst"].tobytes(),
        fields["src"].tobytes(),
    )
    if key not in cache:
        dst = expanded_rows(insn, fields, "dst")
        if isinstance(insn, GemmInsn):
            stall = t.gemm_raw_stall_cycles(dst)
        else:
            src = None if insn.use_imm else expanded_rows(insn, fields, "src")
            stall = t.alu_raw_stall_cycles(dst, src)
        cache[key] = stall
    return cache[key]


def _compute_cycles(
    insn: Insn, t: Timing, fields: dict[str, np.ndarray] | None, cache: dict
) -> tuple[int, int]:
    """(cycles until the instruction's last micro-op has entered the pipeline, the cycles the
    pipeline then needs to drain) of a compute-module instruction other than a LOAD."""
    if isinstance(insn, GemmInsn):
        n = n_iters(insn)
        return t.gemm_issue_cycles(n) + raw_stall_cycles(
            insn, t, fields, cache
        ), t.gemm_drain_cycles(n)
    if isinstance(insn, AluInsn):
        n = n_iters(insn)
        repeats = alu_src_repeats(insn, fields)
        issue = t.alu_issue_cycles(n, insn.use_imm, repeats) + raw_stall_cycles(
            insn, t, fields, cache
        )
        return issue, t.alu_drain_cycles(n)
    return t.finish_cycles, 0


def _last_uop_cycles(insn: GemmInsn | AluInsn, t: Timing, fields) -> int:
    """The cycles the instruction's last micro-op holds ISSUE without read-after-write holds:
    an ALU register operand's ``alu_cycles_per_uop`` unless its src row is the previous
    micro-op's (``alu_src_repeats``), else one."""
    if isinstance(insn, GemmInsn) or insn.use_imm or not n_iters(insn):
        return t.gemm_cycles_per_uop if isinstance(insn, GemmInsn) else t.alu_imm_cycles_per_uop
    if n_iters(insn) >= 2 and fields is not None and n_iters(insn) <= _MAX_EXPANDED_ITERS:
        src, dst = expanded_rows(insn, fields, "src"), expanded_rows(insn, fields, "dst")
        if src_cached(src[-2:], dst[-2:])[-1]:
            return t.alu_repeat_src_cycles_per_uop
    elif alu_src_repeats(insn, fields) == n_iters(insn) - 1:  # every micro-op after the first
        return t.alu_repeat_src_cycles_per_uop
    return t.alu_cycles_per_uop


@dataclass
class _Pipe:
    """One compute pipe's timeline: when its last micro-op issued and its last write lands, and
    the same before its latest instruction (what an overlapped instruction of the other pipe
    waits for); which ACC banks that latest instruction uses (None: not known), whether it
    pushed, when it started."""

    issued: int = 0
    drained: int = 0
    issued_before: int = 0
    drained_before: int = 0
    banks: frozenset | None = None
    pushed: bool = False
    start: int = 0
    ahead: int = 0  # its loop counters ran this far ahead of ISSUE (Timing.lane_ahead_cycles)


class _ComputePipes:
    """The compute module as the overlap contract (``isa.layout.OVERLAP_DOC``) describes it: a
    GEMM and an ALU pipe, fed in program order. An instruction with ``overlap = 0`` waits until
    the other pipe has issued everything (the ACC read-after-write check orders the writes, as
    in one pipeline); with ``overlap = 1`` everything except its partner, the other pipe's
    latest instruction (rule 3). A push waits for the writes it covers (rule 5), and later
    instructions for the push; LOAD and FINISH for both pipes to drain (rule 4). Two pipes on
    one ACC bank (rule 7): the ALU waits for the GEMM's micro-ops."""

    def __init__(self, cfg: HwConfig, t: Timing, dram: np.ndarray | None):
        self.t = t
        self.pipes = {"gemm": _Pipe(), "alu": _Pipe()}
        self.dispatch = 0  # no compute instruction starts before this (in order; pushes)
        self.state = SramState(cfg) if dram is not None else None
        self.dram = dram
        self.half = cfg.acc_depth // 2
        self.raw_stalls: dict[tuple, int] = {}  # raw_stall_cycles of instructions seen
        # the micro-ops' fields and ACC banks of the instructions since the last UOP load
        self._decoded: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        self._bank_sets: dict[Insn, frozenset] = {}

    @staticmethod
    def _names(insn: Insn) -> tuple[str, str] | None:
        if isinstance(insn, GemmInsn):
            return "gemm", "alu"
        if isinstance(insn, AluInsn):
            return "alu", "gemm"
        return None

    def _partner_runs(self, insn: Insn, other: _Pipe) -> bool:
        return bool(insn.overlap) and not other.pushed

    def ready(self, insn: Insn) -> int:
        """The earliest cycle the instruction may start on compute (tokens and arrival aside)."""
        names = self._names(insn)
        if names is None:
            return max(self.dispatch, *(p.drained for p in self.pipes.values()))
        mine, other = self.pipes[names[0]], self.pipes[names[1]]
        waits = other.issued_before if self._partner_runs(insn, other) else other.issued
        return max(self.dispatch, mine.issued - mine.ahead, waits)

    def run(self, index: int, insn: Insn, start: int, pushes: bool) -> int:
        """Time the instruction from ``start``; returns its end (the push, for a pushing one)."""
        names = self._names(insn)
        if names is None:
            self.dispatch = start
            return start  # a LOAD: timed by the caller, which sets ``dispatch`` to its end
        fields = self._fields(index, insn)
        issue, drain = _compute_cycles(insn, self.t, fields, self.raw_stalls)
        mine, other = self.pipes[names[0]], self.pipes[names[1]]
        beside = self._partner_runs(insn, other) and other.issued > start
        banks = self._banks(insn, fields)
        shared = beside and banks is not None and other.banks is not None and banks & other.banks
        if shared:
            if names[0] == "alu":  # the ALU waits for the GEMM's micro-ops (rule 7)
                start = max(start, other.issued)
            else:  # the ALU's remaining micro-ops wait for this GEMM's
                other.issued += issue
                other.drained += issue
        mine.issued_before, mine.drained_before = mine.issued, mine.drained
        mine.issued = start + issue
        mine.drained = max(mine.drained, mine.issued + drain)
        mine.banks, mine.pushed, mine.start = banks, pushes, start
        mine.ahead = self.t.lane_ahead_cycles(_last_uop_cycles(insn, self.t, fields))
        self.dispatch = start
        end = mine.issued
        if pushes:
            covered = other.drained_before if self._partner_runs(insn, other) else other.drained
            end = max(mine.drained, covered)
            self.dispatch = end
        return end

    def after_load(self, end: int) -> None:
        self.dispatch = end

    def _fields(self, index: int, insn: Insn) -> dict[str, np.ndarray] | None:
        if self.state is None or not n_iters(insn) or insn.uop_end > self.state.uop.shape[0]:
            return None
        key = (insn.uop_bgn, insn.uop_end)
        if key not in self._decoded:  # (emptied by each UOP load)
            self._decoded[key] = self.state.decoded_uops(insn.uop_bgn, insn.uop_end, index)
        return self._decoded[key]

    def _banks(self, insn: Insn, fields) -> frozenset | None:
        """ACC banks (rule 7: the top bit of the row) of the instruction's ACC rows."""
        if fields is None:
            return None
        if insn not in self._bank_sets:  # (emptied by each UOP load)
            banks = set()
            for a in accesses(insn, self.state):
                if a.space == "acc" and a.hi > a.lo:
                    banks.update({a.lo >= self.half, a.hi - 1 >= self.half})
            self._bank_sets[insn] = frozenset(banks)
        return self._bank_sets[insn]

    def load_uops(self, index: int, insn: MemInsn) -> None:
        """Replay a UOP load (the micro-op contents decide rules 7 and 8)."""
        if self.state is not None and insn.memory_type is MemType.UOP:
            dma.load(self.state, self.dram, insn, index)
            self._decoded.clear()
            self._bank_sets.clear()


def _mem_duration(
    d: Dispatched, start: int, cfg: HwConfig, t: Timing, channel: _Dram, on_compute: bool
) -> tuple[int, int]:
    """(end, cycles waiting for the channel) of a LOAD or STORE from ``start``: the sequencer
    and setup, the channel's latency and wait, then the rows and the zero padding a padded load
    writes (``Timing.write_cycles``). ``on_compute``: a UOP/ACC load, which the compute unit
    sequences (``Timing.compute_load_sequence_cycles``)."""
    insn: MemInsn = d.insn  # type: ignore[assignment]
    sequence = t.compute_load_sequence_cycles if on_compute else t.dma_sequence_cycles
    if insn.x_size == 0 or insn.y_size == 0:
        return start + sequence + t.dep_only_cycles, 0
    elem = cfg.elem_bytes_of(insn.memory_type.dram_elem)
    setup = t.store_setup_cycles if insn.is_store else t.load_setup_cycles
    beats = t.row_beats(insn.x_size, elem, cfg.bus_width_bytes)
    first, wait = channel.transfer(start + sequence + setup, insn.y_size, beats)
    pads = (0, 0, 0, 0)
    if not insn.is_store and insn.memory_type in PADDED_MEM_TYPES:
        pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
    slack = first - (start + sequence)  # the SRAM writer's cycles before the first beat
    return first + int(t.write_cycles(insn.y_size, insn.x_size, beats, pads, slack)), wait


class _Fetch:
    """hw.fetch: instructions read in bursts of ``Timing.fetch_burst_insns``, a burst requested
    once the staging buffer has room for it (it holds two bursts: burst ``b + 1`` waits for
    burst ``b - 1`` to be dispatched), through the same request path as a load; each
    instruction dispatched ``fetch_insn_cycles`` after its last beat, one a cycle, in order."""

    def __init__(self, cfg: HwConfig, t: Timing, n_insns: int, port: _Dram):
        self.t, self.n, self.port = t, n_insns, port
        self.insn_beats = t.row_beats(1, cfg.insn_bytes, cfg.bus_width_bytes)
        self.first_beat: dict[int, int] = {}  # burst -> the cycle of its first beat
        self.request_free = 0  # the burst splitter takes the next request
        self.free = 0  # the next instruction may be dispatched

    def _request(self, burst: int, ready: int) -> None:
        t, size = self.t, self.t.fetch_burst_insns
        if burst in self.first_beat or burst * size >= self.n:
            return
        at = max(ready, self.request_free)
        self.request_free = at + t.row_request_cycles + t.burst_split_cycles
        beats = min(size, self.n - burst * size) * self.insn_beats
        self.first_beat[burst], _ = self.port.transfer(at + t.load_setup_cycles, 1, beats)

    def dispatch(self, k: int, start: int, arrival: dict[int, int]) -> int:
        """The cycle instruction ``k`` reaches its module's queue, from ``start`` (when fetch
        may dispatch it); ``arrival``: the earlier instructions'."""
        burst, i = divmod(k, self.t.fetch_burst_insns)
        if i == 0:
            self._request(burst, start)
            self._request(burst + 1, arrival[k - 1] if k else start)
        data = self.first_beat[burst] + (i + 1) * self.insn_beats
        end = max(start, data + self.t.fetch_insn_cycles)
        self.free = end + self.t.fetch_dispatch_cycles
        return end


def run_cycles(program: Program, timing: Timing | None = None, trace: bool = False) -> CycleReport:
    """Estimate the cycles a program takes (the functional result is ``sim.run``'s job).

    A program whose instructions statically pass a buffer's or DRAM's end raises
    OutOfBoundsError (as ``sim.run`` does) instead of being timed."""
    insns = program.insns()
    check_static_bounds(insns, program.config, program.dram.size)
    return cycles_of(insns, program.config, timing, trace, program.dram)


def cycles_of(
    insns: list[Insn],
    cfg: HwConfig,
    timing: Timing | None = None,
    trace: bool = False,
    dram: np.ndarray | None = None,
) -> CycleReport:
    """The cycle model of an instruction stream. ``dram``: the program's DRAM image, from which
    the UOP loads are replayed so the micro-ops' rows are known (ALU src-row repeats of any
    kernel, ACC bank conflicts between the pipes); without it only one-micro-op kernels' repeats
    are counted and no bank conflicts are seen."""
    t = timing or Timing()
    pipes = _ComputePipes(cfg, t, dram)
    queues = dispatch(insns)
    port, write_port = _Dram(t), _Dram(t)  # AXI's read and write channels
    heads = {m: 0 for m in Module}
    free = {m: 0 for m in Module}
    tokens: dict[DepQueue, deque[int]] = {q: deque() for q in DepQueue}
    stats = {m.value: ModuleStats() for m in Module}
    stats["fetch"] = ModuleStats()
    arrival: dict[int, int] = {}
    started: dict[Module, list[int]] = {m: [] for m in Module}  # start cycles, in queue order
    fetched = 0
    fetch = _Fetch(cfg, t, len(insns), port)
    position = {}  # instruction index -> (module, position in its queue)
    for m, q in queues.items():
        for pos, d in enumerate(q):
            position[d.index] = (m, pos)
    events: list[TraceEvent] = []
    gemm_cycles = macs = 0
    end_cycle = 0
    remaining = len(insns)
    while remaining:
        best = None  # (start, kind, module)
        if fetched < len(insns):
            m, pos = position[fetched]
            if pos < t.cmd_queue_depth:
                best = (fetch.free, 0, None)
            elif pos - t.cmd_queue_depth < len(started[m]):  # a command-queue slot is free
                best = (max(fetch.free, started[m][pos - t.cmd_queue_depth]), 0, None)
        for m in Module:
            h = heads[m]
            if h >= len(queues[m]):
                continue
            d = queues[m][h]
            if d.index not in arrival or any(not tokens[p] for p in d.pops):
                continue
            ready = max(free[m], arrival[d.index])
            if m is Module.COMPUTE:
                ready = max(ready, pipes.ready(d.insn))
            start = max([ready] + [tokens[p][0] for p in d.pops])
            if best is None or start < best[0]:
                best = (start, 1, m)
        if best is None:
            raise deadlock_error(queues, heads, {q: len(v) for q, v in tokens.items()})
        start, kind, m = best
        if kind == 0:  # dispatch one instruction
            end = fetch.dispatch(fetched, start, arrival)
            arrival[fetched] = end
            stats["fetch"].insns += 1
            stats["fetch"].busy_cycles += end - start
            fetched += 1
            continue
        d = queues[m][heads[m]]
        ready = max(free[m], arrival[d.index])
        if m is Module.COMPUTE:
            ready = max(ready, pipes.ready(d.insn))
        for p in d.pops:
            tokens[p].popleft()
        s = stats[m.value]
        s.token_stall_cycles += start - ready
        started[m].append(start)
        if isinstance(d.insn, MemInsn):
            channel = write_port if d.insn.is_store else port
            end, wait = _mem_duration(d, start, cfg, t, channel, m is Module.COMPUTE)
            s.dram_stall_cycles += wait
            if m is Module.COMPUTE:
                pipes.load_uops(d.index, d.insn)
                pipes.after_load(end)
        elif isinstance(d.insn, GemmInsn | AluInsn):
            end = pipes.run(d.index, d.insn, start, bool(d.pushes))
            if isinstance(d.insn, GemmInsn) and not d.insn.reset_reg:
                gemm_cycles += n_iters(d.insn) * t.gemm_cycles_per_uop
                macs += n_iters(d.insn) * cfg.gemm_macs_per_cycle
        else:  # FINISH
            end = start + t.finish_cycles
            pipes.after_load(end)
        for p in d.pushes:
            tokens[p].append(end)
        s.insns += 1
        s.busy_cycles += end - start
        free[m] = pipes.dispatch if m is Module.COMPUTE else end
        heads[m] += 1
        remaining -= 1
        end_cycle = max(end_cycle, end)
        if trace:
            events.append(TraceEvent(m.value, _event_name(d.insn), d.index, start, end - start))
    return CycleReport(end_cycle, stats, gemm_cycles, macs, t, events)


def _event_name(insn: Insn) -> str:
    if isinstance(insn, MemInsn):
        return f"{'STORE' if insn.is_store else 'LOAD'} {insn.memory_type.name}"
    if isinstance(insn, GemmInsn):
        return "GEMM reset" if insn.reset_reg else "GEMM"
    if isinstance(insn, AluInsn):
        return f"ALU {insn.alu_opcode.name}"
    if isinstance(insn, FinishInsn):
        return "FINISH"
    return type(insn).__name__
