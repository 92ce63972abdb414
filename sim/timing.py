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
    dram_latency_cycles: int = 32
    burst_max_beats: int = 16
    burst_overhead_cycles: int = 1
    cmd_queue_depth: int = 512
    fetch_insn_cycles: int = 1  # dispatch cost per instruction, beside its DRAM beats
    load_setup_cycles: int = 2
    store_setup_cycles: int = 2
    pad_cycles_per_elem: int = 1  # zero rows/columns written into SRAM by a padded load
    gemm_setup_cycles: int = 2
    gemm_pipeline_cycles: int = 4  # fill/drain of the GEMM pipeline, once per instruction
    gemm_cycles_per_uop: int = 1
    alu_setup_cycles: int = 2
    alu_pipeline_cycles: int = 4
    alu_cycles_per_uop: int = 2  # one ACC read port: read dst and src in turn
    alu_imm_cycles_per_uop: int = 1  # an immediate operand needs only the dst read
    finish_cycles: int = 1
    dep_only_cycles: int = 1  # a LOAD/STORE with x_size 0 (tokens only)

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)
