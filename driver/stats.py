"""One record of what a launch did, filled the same way by every backend.

The simulator fills it from the cycle model (and the functional counters); the RTL and a board from
the accelerator's counter registers. Field names carry units; per-module maps are keyed by
``isa.Module`` values ("load", "compute", "store").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyvta.isa import Module

MODULES = tuple(m.value for m in Module)


@dataclass(frozen=True)
class Stats:
    """Counts of one launch.

    ``cycles``: START to DONE (or the cycle model's total). ``insns_fetched``: instructions fetch
    dispatched. ``gemm_uops`` / ``alu_uops``: micro-op iterations issued (GEMM resets included).
    ``busy_cycles`` / ``stall_cycles``: per module, cycles executing an instruction and cycles waiting
    for a dependency token. ``source``: where the figures come from ("cycle model", "rtl", ...).
    """

    cycles: int
    insns_fetched: int
    gemm_uops: int
    alu_uops: int
    busy_cycles: Mapping[str, int] = field(default_factory=dict)
    stall_cycles: Mapping[str, int] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self):
        for name in ("busy_cycles", "stall_cycles"):
            unknown = set(getattr(self, name)) - set(MODULES)
            if unknown:
                raise ValueError(
                    f"Stats.{name}: unknown modules {sorted(unknown)} (allowed: {MODULES})"
                )

    @classmethod
    def from_cycle_report(cls, report, counters) -> Stats:
        """From the simulator: ``report`` a ``sim.CycleReport``, ``counters`` a ``sim.Counters``."""
        mods = report.modules
        return cls(
            cycles=report.total_cycles,
            insns_fetched=mods["fetch"].insns if "fetch" in mods else 0,
            gemm_uops=counters.gemm_uop_iters + counters.gemm_reset_iters,
            alu_uops=counters.alu_uop_iters,
            busy_cycles={m: mods[m].busy_cycles for m in MODULES if m in mods},
            stall_cycles={m: mods[m].token_stall_cycles for m in MODULES if m in mods},
            source="cycle model",
        )

    @classmethod
    def from_registers(cls, counters: Mapping[str, int], source: str = "rtl") -> Stats:
        """From the accelerator's counter registers (``isa.regmap.COUNTERS`` name -> value)."""
        return cls(
            cycles=counters["CYCLES"],
            insns_fetched=counters["FETCHED"],
            gemm_uops=counters["GEMM_UOPS"],
            alu_uops=counters["ALU_UOPS"],
            busy_cycles={m: counters[f"{m.upper()}_BUSY"] for m in MODULES},
            stall_cycles={m: counters[f"{m.upper()}_STALL"] for m in MODULES},
            source=source,
        )

    def to_registers(self) -> dict[str, int]:
        """The counter registers (``isa.regmap.COUNTERS``) that read back as this record (what a
        model of the hardware presents); ``from_registers``'s inverse."""
        regs = {
            "CYCLES": self.cycles,
            "FETCHED": self.insns_fetched,
            "GEMM_UOPS": self.gemm_uops,
            "ALU_UOPS": self.alu_uops,
        }
        for m in MODULES:
            regs[f"{m.upper()}_BUSY"] = self.busy_cycles.get(m, 0)
            regs[f"{m.upper()}_STALL"] = self.stall_cycles.get(m, 0)
        return regs

    @property
    def gemm_utilisation(self) -> float:
        """Share of cycles the GEMM core issued a micro-op."""
        return self.gemm_uops / self.cycles if self.cycles else 0.0

    def to_dict(self) -> dict:
        return {
            "cycles": self.cycles,
            "insns_fetched": self.insns_fetched,
            "gemm_uops": self.gemm_uops,
            "alu_uops": self.alu_uops,
            "busy_cycles": dict(self.busy_cycles),
            "stall_cycles": dict(self.stall_cycles),
            "source": self.source,
        }
