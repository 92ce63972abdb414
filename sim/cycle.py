"""The cycle model: fetch, load, compute and store run concurrently, blocked by dependency tokens,
by their command queues and by one shared DRAM port.

It is an event simulation at instruction granularity: the instruction that can start earliest runs
next, so DRAM requests are granted in time order. All costs come from ``sim.timing.Timing``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

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
from pyvta.sim.dispatch import Dispatched, deadlock_error, dispatch
from pyvta.sim.loops import n_iters
from pyvta.sim.program import Program
from pyvta.sim.races import check_static_bounds
from pyvta.sim.timing import Timing


@dataclass
class ModuleStats:
    insns: int = 0
    busy_cycles: int = 0
    token_stall_cycles: int = 0  # waiting for a dependency token
    dram_stall_cycles: int = 0  # waiting for the shared DRAM port


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
    """The shared AXI port: grants transfers in request order, one beat per cycle."""

    def __init__(self, cfg: HwConfig, timing: Timing):
        self.bus_bytes = cfg.bus_width_bytes
        self.t = timing
        self.free_at = 0

    def transfer(self, ready: int, rows: int, row_bytes: int) -> tuple[int, int]:
        """Move ``rows`` rows of ``row_bytes``; returns (end cycle, cycles spent waiting for the port)."""
        busy = self.t.port_cycles(rows, row_bytes, self.bus_bytes)
        first = ready + self.t.dram_latency_cycles
        start = max(first, self.free_at)
        self.free_at = start + busy
        return self.free_at, start - first


def _compute_cycles(insn: Insn, t: Timing) -> tuple[int, int]:
    """(cycles until the instruction's last micro-op has entered the pipeline, the cycles the
    pipeline then needs to drain) of a compute-module instruction other than a LOAD."""
    if isinstance(insn, GemmInsn):
        n = n_iters(insn)
        return t.gemm_issue_cycles(n), t.gemm_drain_cycles(n)
    if isinstance(insn, AluInsn):
        n = n_iters(insn)
        return t.alu_issue_cycles(n, insn.use_imm), t.alu_drain_cycles(n)
    return t.finish_cycles, 0


def _waits_for_drain(module: Module, insn: Insn) -> bool:
    """Compute starts a LOAD (into UOP/ACC, which the pipeline reads) or FINISH only once the
    GEMM/ALU pipeline is empty; GEMM/ALU micro-ops follow the previous instruction's at once."""
    return module is Module.COMPUTE and not isinstance(insn, GemmInsn | AluInsn)


def _mem_duration(
    d: Dispatched, start: int, cfg: HwConfig, t: Timing, port: _Dram
) -> tuple[int, int]:
    insn: MemInsn = d.insn  # type: ignore[assignment]
    if insn.x_size == 0 or insn.y_size == 0:
        return start + t.dep_only_cycles, 0
    elem = cfg.elem_bytes_of(insn.memory_type.dram_elem)
    setup = t.store_setup_cycles if insn.is_store else t.load_setup_cycles
    contiguous = insn.x_stride == insn.x_size or insn.y_size == 1
    rows, row_bytes = (
        (1, insn.y_size * insn.x_size * elem) if contiguous else (insn.y_size, insn.x_size * elem)
    )
    end, wait = port.transfer(start + setup, rows, row_bytes)
    if insn.memory_type is MemType.UOP:  # one micro-op written per cycle, whatever the bus width
        end = max(end, start + setup + insn.y_size * insn.x_size * t.uop_cycles_per_elem)
    if not insn.is_store and insn.memory_type in PADDED_MEM_TYPES:
        width = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        total = (insn.y_pad_0 + insn.y_size + insn.y_pad_1) * width
        end += (total - insn.y_size * insn.x_size) * t.pad_cycles_per_elem
    return end, wait


def run_cycles(program: Program, timing: Timing | None = None, trace: bool = False) -> CycleReport:
    """Estimate the cycles a program takes (the functional result is ``sim.run``'s job).

    A program whose instructions statically pass a buffer's or DRAM's end raises
    OutOfBoundsError (as ``sim.run`` does) instead of being timed."""
    insns = program.insns()
    check_static_bounds(insns, program.config, program.dram.size)
    return cycles_of(insns, program.config, timing, trace)


def cycles_of(
    insns: list[Insn], cfg: HwConfig, timing: Timing | None = None, trace: bool = False
) -> CycleReport:
    t = timing or Timing()
    queues = dispatch(insns)
    port = _Dram(cfg, t)
    heads = {m: 0 for m in Module}
    free = {m: 0 for m in Module}
    tokens: dict[DepQueue, deque[int]] = {q: deque() for q in DepQueue}
    stats = {m.value: ModuleStats() for m in Module}
    stats["fetch"] = ModuleStats()
    arrival: dict[int, int] = {}
    started: dict[Module, list[int]] = {m: [] for m in Module}  # start cycles, in queue order
    fetched = 0
    fetch_free = 0
    burst_data = 0
    insn_beats = -(-cfg.insn_bytes // cfg.bus_width_bytes)
    insns_per_burst = max(t.burst_max_beats // insn_beats, 1)
    position = {}  # instruction index -> (module, position in its queue)
    for m, q in queues.items():
        for pos, d in enumerate(q):
            position[d.index] = (m, pos)
    events: list[TraceEvent] = []
    pipe_empty = 0  # when compute's GEMM/ALU pipeline has written its last micro-op
    gemm_cycles = macs = 0
    end_cycle = 0
    remaining = len(insns)
    while remaining:
        best = None  # (start, kind, module)
        if fetched < len(insns):
            m, pos = position[fetched]
            if pos < t.cmd_queue_depth:
                best = (fetch_free, 0, None)
            elif pos - t.cmd_queue_depth < len(started[m]):  # a command-queue slot is free
                best = (max(fetch_free, started[m][pos - t.cmd_queue_depth]), 0, None)
        for m in Module:
            h = heads[m]
            if h >= len(queues[m]):
                continue
            d = queues[m][h]
            if d.index not in arrival or any(not tokens[p] for p in d.pops):
                continue
            ready = max(free[m], arrival[d.index], pipe_empty if _waits_for_drain(m, d.insn) else 0)
            start = max([ready] + [tokens[p][0] for p in d.pops])
            if best is None or start < best[0]:
                best = (start, 1, m)
        if best is None:
            raise deadlock_error(queues, heads, {q: len(v) for q, v in tokens.items()})
        start, kind, m = best
        if kind == 0:  # fetch one instruction; a burst of them is requested at once
            k = fetched % insns_per_burst
            if k == 0:
                n_burst = min(insns_per_burst, len(insns) - fetched)
                burst_end, _ = port.transfer(start, 1, n_burst * cfg.insn_bytes)
                burst_data = burst_end - n_burst * insn_beats - t.burst_overhead_cycles
            end = max(start, burst_data + (k + 1) * insn_beats) + t.fetch_insn_cycles
            arrival[fetched] = end
            stats["fetch"].insns += 1
            stats["fetch"].busy_cycles += end - start
            fetch_free = end
            fetched += 1
            continue
        d = queues[m][heads[m]]
        ready = max(free[m], arrival[d.index], pipe_empty if _waits_for_drain(m, d.insn) else 0)
        for p in d.pops:
            tokens[p].popleft()
        s = stats[m.value]
        s.token_stall_cycles += start - ready
        started[m].append(start)
        if isinstance(d.insn, MemInsn):
            end, wait = _mem_duration(d, start, cfg, t, port)
            s.dram_stall_cycles += wait
        else:
            issued, drain = _compute_cycles(d.insn, t)
            end = start + issued
            pipe_empty = max(pipe_empty, end + drain)
            if d.pushes:  # the other module must see the writes: drain first
                end = pipe_empty
            if isinstance(d.insn, GemmInsn) and not d.insn.reset_reg:
                gemm_cycles += n_iters(d.insn) * t.gemm_cycles_per_uop
                macs += n_iters(d.insn) * cfg.gemm_macs_per_cycle
        for p in d.pushes:
            tokens[p].append(end)
        s.insns += 1
        s.busy_cycles += end - start
        free[m] = end
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
