"""Every constant of the cycle model, in one place, so it can be calibrated against the RTL."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Cycle costs of the modules and the DRAM port (defaults: a PYNQ-Z1-class build, 100 MHz).

    DRAM: one AXI port shared by fetch, load, compute (UOP/ACC loads) and store, moving
    ``HwConfig.bus_width_bytes`` per cycle. A transfer pays ``dram_latency_cycles`` once (requests
    are pipelined), one cycle per data beat, and ``burst_overhead_cycles`` per burst; a burst is at
    most ``burst_max_beats`` beats and never spans two rows of a 2-D transfer.
    """

    clock_mhz: float = 100.0
    dram_latency_cycles: int = 32  # PYNQ DDR; the cocotb RAM model answers in 3 (rtl_testbench)
    burst_max_beats: int = 256  # AXI4 INCR bursts (the RTL also splits at 4 KiB)
    burst_overhead_cycles: int = 1
    cmd_queue_depth: int = 512
    fetch_insn_cycles: int = 3  # dispatch cost per instruction, beside its DRAM beats
    load_setup_cycles: int = 1
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
    finish_cycles: int = 3
    dep_only_cycles: int = 0  # a LOAD/STORE with x_size 0 (tokens only)

    # How the constants were set: the per-instruction costs were fitted to the Amaranth RTL under
    # Verilator (the compute constants refitted for the pipelined compute unit of issue 19 on the
    # directed programs and random seeds 0..39). benchmarks/rtl_speed.py --no-cocotb (directed,
    # GEMM-heavy, held-out seeds 1000..1019): mean error 2.2%, 35 of 39 within 5% (the misses:
    # back-to-back RAW stalls inside one ALU instruction, which the model does not see, and tiny
    # loads); ResNet-18 (benchmarks/rtl_network.py): +0.47%. The DRAM latency is the board's.
    # With the two compute pipes of the overlap contract (isa.layout.OVERLAP_DOC) and rule 8,
    # against that RTL (issue 19): directed + seeds 1000..1019 mean 2.6%, 34 of 39 within 5%;
    # seeds 1000..1019 with overlap bits (rtl_speed.py --overlap 20) all within 4.1%; ResNet-18
    # compiled with the epilogue overlapped: +0.01% (7,075,633 vs 7,074,647 RTL cycles).

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

    def alu_drain_cycles(self, n_iters: int) -> int:
        """As ``gemm_drain_cycles`` for an ALU instruction."""
        return self.alu_pipeline_cycles if n_iters else 0

    def port_cycles(self, rows: int, row_bytes: int, bus_bytes: int) -> int:
        """Cycles a transfer of ``rows`` rows of ``row_bytes`` holds the DRAM port (one per beat
        of ``bus_bytes``, ``burst_overhead_cycles`` per burst; latency and waits not included)."""
        beats_per_row = -(-row_bytes // bus_bytes)
        bursts = rows * -(-beats_per_row // self.burst_max_beats)
        return rows * beats_per_row + bursts * self.burst_overhead_cycles

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)
