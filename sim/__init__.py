"""The golden model: a fast functional simulator and a cycle model of the four modules."""

from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.counters import Counters
from pyvta.sim.cycle import CycleReport, ModuleStats, cycles_of, run_cycles
from pyvta.sim.dram import Dram
from pyvta.sim.errors import (
    DeadlockError,
    HazardError,
    OutOfBoundsError,
    ProgramError,
    QueueUsageError,
    SimError,
    SimLimitError,
)
from pyvta.sim.functional import ENGINES, SimLimits, SimResult, run, run_insns
from pyvta.sim.program import Program
from pyvta.sim.races import RaceError
from pyvta.sim.timing import Timing
from pyvta.sim.trace import trace_json, write_trace

__all__ = [
    "ENGINES",
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
