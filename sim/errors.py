"""Errors the simulator raises for programs the hardware would run wrongly or never finish."""

import re

from pyvta.isa.errors import PyvtaError

_INDEX = re.compile(r"instruction (\d+)\b")


class SimError(PyvtaError):
    """A program error found while simulating; the message names the instruction index."""


class DeadlockError(SimError):
    """Every module with work left waits for a dependency token that will never come."""


class QueueUsageError(SimError):
    """An instruction sets a dependency flag its module has no queue for."""


class OutOfBoundsError(SimError):
    """An access outside an SRAM buffer or outside DRAM."""


class HazardError(SimError):
    """Two consecutive micro-ops write the same ACC row (a pipeline hazard the hardware does not check)."""


class ProgramError(SimError):
    """A malformed program: no FINISH, misaligned instruction address, a STORE with padding..."""


class SimLimitError(SimError):
    """An instruction larger than the simulator's configured work limit."""


class ArgumentError(PyvtaError, ValueError):
    """A public API argument of the wrong type, dtype, shape or range (nothing was simulated)."""


def instruction_index(error: Exception) -> int | None:
    """The instruction a program error names (its message starts "instruction N"), else None."""
    found = _INDEX.match(str(error))
    return int(found.group(1)) if found else None
