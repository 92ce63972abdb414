"""The golden model: a fast functional simulator and a cycle model of the four modules."""

import importlib

_HOMES = {
    "ProgramBuilder": "builder",
    "Counters": "counters",
    "CycleReport": "cycle",
    "ModuleStats": "cycle",
    "cycles_of": "cycle",
    "run_cycles": "cycle",
    "Dram": "dram",
    "DeadlockError": "errors",
    "HazardError": "errors",
    "OutOfBoundsError": "errors",
    "ProgramError": "errors",
    "QueueUsageError": "errors",
    "SimError": "errors",
    "SimLimitError": "errors",
    "ENGINES": "functional",
    "SimLimits": "functional",
    "SimResult": "functional",
    "run": "functional",
    "run_insns": "functional",
    "Program": "program",
    "RaceError": "races",
    "Timing": "timing",
    "trace_json": "trace",
    "write_trace": "trace",
}
"""Public name -> its module (imported when the name is first used, PEP 562: a package that
reads only ``sim.timing``, e.g. the compiler's cost model, does not load the simulator)."""

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


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
