"""The golden model: a fast functional simulator and a cycle model of the four modules."""

from sim.builder import ProgramBuilder
from sim.counters import Counters
from sim.cycle import CycleReport, ModuleStats, cycles_of, run_cycles
from sim.dram import Dram
from sim.errors import (
    DeadlockError,
    HazardError,
    OutOfBoundsError,
    ProgramError,
    QueueUsageError,
    SimError,
    SimLimitError,
)
from sim.functional import SimLimits, SimResult, run, run_insns
from sim.program import Program
from sim.races import RaceError
from sim.timing import Timing
from sim.trace import trace_json, write_trace

__all__ = [
    "Counters",
    "CycleReport",
    "DeadlockError",
    "Dram",
    "HazardError",
    "ModuleStats",
    "OutOfBoundsError",
    "Program",
    "ProgramBuilder",
    "ProgramError",
    "QueueUsageError",
    "RaceError",
    "SimError",
    "SimLimitError",
    "SimLimits",
    "SimResult",
    "Timing",
    "cycles_of",
    "run",
    "run_cycles",
    "run_insns",
    "trace_json",
    "write_trace",
]
