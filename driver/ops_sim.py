"""The simulator backend: the functional simulator for results, the cycle model for cycles."""

from __future__ import annotations

import time

from pyvta import sim
from pyvta.driver.device import RunResult
from pyvta.driver.host_dram import HostDramDevice
from pyvta.driver.stats import Stats
from pyvta.isa import INSN_BYTES, HwConfig

DEFAULT_DRAM_BYTES = 1 << 28


class SimDevice(HostDramDevice):
    """A simulated accelerator with ``dram_bytes`` of DRAM (allocated lazily by the OS).

    ``cycles=True`` also runs the cycle model on every launch; ``trace=True`` keeps its
    per-instruction events for a Perfetto trace. Programs run in place on the device's DRAM;
    ``engine`` picks the functional simulator's engine (``sim.ENGINES``: "auto" is the native
    one wherever llvmlite is installed).
    """

    def __init__(
        self,
        config: HwConfig | None = None,
        dram_bytes: int = DEFAULT_DRAM_BYTES,
        cycles: bool = True,
        trace: bool = False,
        timing: sim.Timing | None = None,
        limits: sim.SimLimits | None = None,
        engine: str = "auto",
    ):
        if engine not in sim.ENGINES:
            raise ValueError(f"unknown engine {engine!r} (allowed: {', '.join(sim.ENGINES)})")
        super().__init__(config or HwConfig(), dram_bytes)
        self.cycles, self.trace, self.timing, self.limits = cycles, trace, timing, limits
        self.engine = engine
        self.last_program: sim.Program | None = None

    def estimate_cycles(self, insns) -> int:
        """The cycle model's total for an instruction stream (nothing is executed)."""
        return sim.cycles_of(list(insns), self.config, self.timing).total_cycles

    def snapshot(self, insn_addr: int, insn_count: int) -> sim.Program:
        """The allocated part of DRAM as a program bundle (to rerun on the RTL or a board)."""
        used = max(self.dram.used_bytes, insn_addr + insn_count * INSN_BYTES)
        return sim.Program(self.dram.data[:used].copy(), insn_addr, insn_count, self.config)

    def launch(self, insn_addr: int, insn_count: int) -> RunResult:
        program = sim.Program(self.dram.data, insn_addr, insn_count, self.config)
        t0 = time.perf_counter()
        result = sim.run(program, self.limits, engine=self.engine, in_place=True)
        wall_s = time.perf_counter() - t0
        report = None
        if self.cycles:
            report = sim.cycles_of(
                program.insns(), self.config, self.timing, self.trace, program.dram
            )
        return RunResult(
            stats=Stats.from_cycle_report(report, result.counters) if report else None,
            counters=result.counters.to_dict(),
            wall_s=wall_s,
            report=report,
        )


DEVICE = SimDevice
