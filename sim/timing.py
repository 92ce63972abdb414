"""Every constant of the cycle model, in one place, so it can be calibrated against the RTL."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timing:
    """Cycle costs of the modules and the DRAM port (defaults: a PYNQ-Z1-class build, 100 MHz).

    DRAM: an AXI port whose read channel is shared by fetch, load and compute (UOP/ACC loads) and
    whose write channel the store module has to itself, each moving one beat per cycle: an
    element of ``HwConfig`` ``elem_bytes`` in ``ceil(elem_bytes / bus_width_bytes)`` beats (a
    narrower one, a micro-op, in one narrow beat). A transfer pays ``dram_latency_cycles`` once
    (requests run ahead of the data), then its rows' beats, each row no sooner than the DMA can
    request it (``transfer_cycles``); a burst is at most ``burst_max_beats`` beats and never
    spans two rows of a 2-D transfer.
    """

    clock_mhz: float = 100.0
    dram_latency_cycles: int = 32  # PYNQ DDR; the cocotb RAM model answers in 3 (rtl_testbench)
    burst_max_beats: int = 256  # AXI4 INCR bursts (the RTL also splits at 4 KiB)
    # hw.dma issues one request per DRAM row (also where rows are contiguous) to hw.burst's
    # BurstSplitter, which accepts it in a cycle and spends three registered steps on each burst:
    # a row of one burst is requested every 4 cycles, so rows of fewer beats (a 1- or 2-pixel
    # INP/OUT row: 2 or 4 beats) stream at that rate, not the bus's.
    row_request_cycles: int = 1
    burst_split_cycles: int = 3
    cmd_queue_depth: int = 512
    # hw.fetch reads 8 instructions a burst (two bursts staged or in flight at most), checks
    # each (hw.check.InsnCheck: 2 cycles) into its staging FIFO (1) and dispatches one a cycle
    fetch_burst_insns: int = 8
    fetch_insn_cycles: int = 3  # an instruction's last beat to its dispatch
    fetch_dispatch_cycles: int = 1
    # The load and store units run each DMA through hw.queues.sequence: IDLE, POP and PUSH
    # around its EXEC state.
    dma_sequence_cycles: int = 3
    # The compute unit's sequencer runs back to back (the next word's POP at once): 1 cycle
    # beside a UOP/ACC load's EXEC
    compute_load_sequence_cycles: int = 1
    # EXEC before the first address: the row's hand-off and the splitter's first two steps (load);
    # for a store also the burst length through its FIFO to W and the last B response's return
    load_setup_cycles: int = 3
    store_setup_cycles: int = 5
    pad_cycles_per_elem: int = 1  # zero rows/columns written into SRAM by a padded load
    uop_cycles_per_elem: int = 1  # the RTL writes one micro-op per cycle (not per bus beat)
    # A GEMM/ALU instruction occupies compute for setup + its micro-ops; the next one's micro-ops
    # follow at once. The pipeline's drain (*_pipeline_cycles) is paid only where the RTL waits for
    # it: by an instruction that pushes a token, and before a compute LOAD or FINISH.
    gemm_setup_cycles: int = 2
    gemm_pipeline_cycles: int = 9  # drain: the last micro-op's issue to its ACC write
    gemm_cycles_per_uop: int = 1
    alu_setup_cycles: int = 2
    alu_pipeline_cycles: int = 10
    alu_cycles_per_uop: int = 2  # one ACC read port: read dst and src in turn
    alu_imm_cycles_per_uop: int = 1  # an immediate operand needs only the dst read
    # a register operand whose src row is the previous micro-op's (the bias broadcast) is not
    # read again (overlap contract rule 8): the micro-op costs what an immediate one does
    alu_repeat_src_cycles_per_uop: int = 1
    # Read-after-write on ACC rows (hw.compute: the ISSUE stage S2 holds a micro-op whose ACC row
    # a micro-op past ISSUE still writes): a row is written at S8 and read at S5 (dst: the GEMM's
    # accumulate, every ALU op) or S4 (an ALU register operand's src), and the read port does not
    # see a same-cycle write, so the reader issues at least S8 - S5 + 1 (S8 - S4 + 1) cycles
    # after the writer. Micro-ops two apart on one row (a 2-pixel-wide tile, its output pixels
    # innermost) run at 2 cycles each.
    # A lane's loop counters (S0) and UOP row (S1) run ahead of ISSUE: where ISSUE holds each of
    # the last micro-ops (an ALU register operand: 2 cycles), they take the next instruction of
    # the lane while the last ones wait, and its setup is hidden (lane_ahead_cycles)
    lane_stages_ahead: int = 2
    acc_dst_raw_cycles: int = 4
    acc_src_raw_cycles: int = 5
    finish_cycles: int = 3
    dep_only_cycles: int = 1  # EXEC of a LOAD/STORE with x_size 0 (tokens only): done at once

    # How the constants were set: the compute constants were fitted to the Amaranth RTL under
    # Verilator (the pipelined compute unit of issue 19, directed programs and seeds 0..39); the
    # DMA, fetch and sequencer constants and the read-after-write holds follow the RTL's structure
    # (hw/dma.py, hw/burst.py, hw/fetch.py, hw/queues.py, hw/compute.py) and were checked with
    # one-instruction probes on the fast RTL device (every LOAD/STORE shape of 1..64 rows of 1..32
    # elements: busy cycles the RTL's EXEC + dma_sequence_cycles, totals a constant 1-2 cycles
    # apart). benchmarks/rtl_speed.py --no-cocotb --random 20 (directed, GEMM-heavy, ResNet-18 C8
    # on a 14x2 tile with its pixels innermost, seeds 1000..1019, which set nothing): mean 0.7%,
    # max 4.0% (dep_only: 24 vs 25 cycles), 41 of 41 within 5% (before: mean 2.6%, max 40% on
    # that C8 tile, whose read-after-write holds the model did not see); with overlap bits
    # (--overlap 20) all within 2.7%; ResNet-18 (benchmarks/rtl_network.py): 6,877,089 vs the
    # RTL's 6,879,303 (-0.03%). The DRAM latency is the board's.

    @classmethod
    def rtl_testbench(cls) -> Timing:
        """The same model with the DRAM latency of the cocotb RAM model the RTL is tested on."""
        return cls(dram_latency_cycles=3)

    def gemm_issue_cycles(self, n_iters: int) -> int:
        """Cycles a GEMM instruction of ``n_iters`` micro-op iterations holds the compute module
        until its last micro-op has entered the pipeline (the next one's follow at once)."""
        return self.gemm_setup_cycles + n_iters * self.gemm_cycles_per_uop

    def gemm_drain_cycles(self, n_iters: int) -> int:
        """The pipeline's drain after a GEMM instruction, paid where the RTL waits for it (the
        instruction pushes a token; a compute LOAD or FINISH follows)."""
        return self.gemm_pipeline_cycles if n_iters else 0

    def alu_issue_cycles(self, n_iters: int, use_imm: bool, src_repeats: int = 0) -> int:
        """As ``gemm_issue_cycles`` for an ALU instruction (an immediate operand reads only the
        destination; so do the ``src_repeats`` register-operand micro-ops whose src row is the
        previous micro-op's, ``sim.cycle.alu_src_repeats``)."""
        if use_imm:
            return self.alu_setup_cycles + n_iters * self.alu_imm_cycles_per_uop
        fresh = n_iters - src_repeats
        return (
            self.alu_setup_cycles
            + fresh * self.alu_cycles_per_uop
            + src_repeats * self.alu_repeat_src_cycles_per_uop
        )

    def lane_ahead_cycles(self, last_uop_cycles: int) -> int:
        """How far before its last micro-op's issue slot ends a lane may start its next
        instruction, when ISSUE holds that micro-op ``last_uop_cycles``: one cycle per stage
        ahead of ISSUE for each cycle of hold, at most the setup it hides."""
        held = self.lane_stages_ahead * (last_uop_cycles - 1)
        return min(held, self.alu_setup_cycles, self.gemm_setup_cycles)

    def alu_drain_cycles(self, n_iters: int) -> int:
        """As ``gemm_drain_cycles`` for an ALU instruction."""
        return self.alu_pipeline_cycles if n_iters else 0

    def gemm_raw_stall_cycles(self, dst: np.ndarray, reset: bool = False) -> int:
        """Cycles the ISSUE stage holds a GEMM instruction's micro-ops (``dst``: the ACC row of
        each micro-op iteration, in issue order) for their own earlier writes; a reset reads
        no ACC row."""
        if reset:
            return 0
        return raw_stall_cycles(dst, [(dst, self.acc_dst_raw_cycles)], self.gemm_cycles_per_uop)

    def alu_raw_stall_cycles(self, dst: np.ndarray, src: np.ndarray | None) -> int:
        """As ``gemm_raw_stall_cycles`` for an ALU instruction: every micro-op reads its dst row;
        with a register operand (``src``, else None) it reads its src row a stage earlier at
        ``alu_cycles_per_uop``, unless the src is the previous micro-op's (not just written by
        it: the src-row register holds it, ``alu_repeat_src_cycles_per_uop``)."""
        reads = [(dst, self.acc_dst_raw_cycles)]
        if src is None:
            return raw_stall_cycles(dst, reads, self.alu_imm_cycles_per_uop)
        cached = src_cached(src, dst)
        period = np.where(cached, self.alu_repeat_src_cycles_per_uop, self.alu_cycles_per_uop)
        fresh_src = np.where(cached, -1, src)
        return raw_stall_cycles(dst, reads + [(fresh_src, self.acc_src_raw_cycles)], period)

    @staticmethod
    def row_beats(x_elems, elem_bytes: int, bus_bytes: int):
        """Beats of a DRAM row of ``x_elems`` elements (numpy arrays too): whole bus words, or
        one narrow beat per element narrower than the bus (hw.sram.mem_type_info's chunks)."""
        return x_elems * -(-elem_bytes // bus_bytes)

    def transfer_cycles(self, rows, row_beats):
        """Cycles from a transfer's first beat to its last (numpy arrays too): ``rows`` rows of
        ``row_beats``, each row at the bus's rate or the DMA's request rate, whichever is slower
        (``row_request_cycles`` + ``burst_split_cycles`` per burst of the row)."""
        bursts = -(-row_beats // self.burst_max_beats)
        period = np.maximum(row_beats, self.row_request_cycles + self.burst_split_cycles * bursts)
        return (rows - 1) * period + row_beats

    def write_cycles(self, rows, x_elems, row_beats, pads=(0, 0, 0, 0), slack=0):
        """Cycles from a LOAD's first beat to its last SRAM write (numpy arrays too): ``rows``
        DRAM rows of ``x_elems`` elements, ``row_beats`` beats, in a rectangle padded by
        ``pads`` = (y_pad_0, y_pad_1, x_pad_0, x_pad_1) zero elements, one a cycle
        (hw.dma's writer walks the rectangle: the padding before the first data element is
        written in the ``slack`` cycles it has before the first beat, that between two rows
        while the next row's beats may wait). A STORE: the same without padding."""
        y0, y1, x0, x1 = pads
        width = x0 + x_elems + x1
        pad = self.pad_cycles_per_elem
        lead = np.maximum((y0 * width + x0) * pad - slack, 0)
        period = np.maximum(
            self.transfer_cycles(2, row_beats) - row_beats, row_beats + (x0 + x1) * pad
        )
        return lead + (rows - 1) * period + row_beats + (x1 + y1 * width) * pad

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


def expanded_rows(
    insn, fields: dict[str, np.ndarray], name: str, i_lo: int = 0, i_hi: int | None = None
) -> np.ndarray:
    """The ``name`` ("dst", "src", "wgt") row of each micro-op iteration of a GEMM or ALU
    instruction (``fields``: its kernel's decoded micro-ops) for the outer iterations
    [i_lo, i_hi) (default: all), in issue order (outer loop, inner loop, micro-op); int64."""
    i_hi = insn.iter_out if i_hi is None else i_hi
    o = np.arange(i_lo, i_hi, dtype=np.int64)[:, None, None]
    i = np.arange(insn.iter_in, dtype=np.int64)[None, :, None]
    f_out, f_in = getattr(insn, f"{name}_factor_out"), getattr(insn, f"{name}_factor_in")
    return (fields[name][None, None, :] + o * f_out + i * f_in).reshape(-1)


def src_cached(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Per micro-op iteration of an ALU register-operand instruction: whether its src row is the
    previous iteration's and that one did not write it, so the ALU's src-row register holds it
    (overlap contract rule 8: no ACC read); False for the first."""
    cached = np.zeros(src.size, bool)
    cached[1:] = (src[1:] == src[:-1]) & (dst[:-1] != src[:-1])
    return cached


def raw_stall_cycles(
    written: np.ndarray, reads: list[tuple[np.ndarray, int]], period: int | np.ndarray
) -> int:
    """Stall cycles of one in-order issue stream with read-after-write holds.

    ``written[j]``: the row micro-op ``j`` writes; ``reads``: (rows ``r`` with ``r[j]`` the row
    micro-op ``j`` reads (-1: none), ``gap``: the cycles from a writer's issue to the earliest
    issue of a reader of its row); ``period``: the cycles from one micro-op's issue to the
    next's without holds (a scalar, or per micro-op: ``period[j]`` before ``j``). Returns how
    much later the last micro-op issues than it would without holds."""
    n = written.size
    need: dict[int, list[tuple[int, int]]] = {}  # micro-op -> [(distance back, gap)]
    for rows, gap in reads:
        for d in range(1, min(gap, n)):
            for j in (np.flatnonzero(rows[d:] == written[:-d]) + d).tolist():
                need.setdefault(j, []).append((d, gap))
    if not need:
        return 0
    base = np.cumsum(np.broadcast_to(np.asarray(period, np.int64), (n,))).tolist()
    hits = sorted(need)
    stall_at: list[int] = []  # the stall reached at each hit, in ``hits`` order
    pos: list[int] = []
    stall = 0
    for j in hits:
        for d, gap in need[j]:
            k = j - d
            # stall of micro-op k: that of the last hit at or before it
            i = _last_at_or_before(pos, k)
            sk = stall_at[i] if i >= 0 else 0
            stall = max(stall, base[k] + sk + gap - base[j])
        pos.append(j)
        stall_at.append(stall)
    return stall


def _last_at_or_before(sorted_pos: list[int], k: int) -> int:
    return bisect_right(sorted_pos, k) - 1
