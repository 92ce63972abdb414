"""The host side of ``isa.launch``: a sync driver for any register port, and what a launch reports.

A port is anything with ``read32(offset) -> int``, ``write32(offset, value)`` and
``wait(cycles) -> cycles waited`` (may return early once the accelerator's ``irq`` rises): the fast
RTL device's C++ harness, a board's MMIO window. The cocotb testbench drives the same routines
asynchronously (``hw.cocotb_bench``).
"""

from __future__ import annotations

from typing import Protocol

from pyvta.driver.device import DeviceError
from pyvta.driver.stats import Stats
from pyvta.isa import DecodeError, HwConfig
from pyvta.isa import launch as protocol
from pyvta.isa.regmap import Fault
from pyvta.sim.errors import OutOfBoundsError, ProgramError, QueueUsageError


class RegisterPort(Protocol):
    def read32(self, offset: int) -> int: ...

    def write32(self, offset: int, value: int) -> None: ...

    def wait(self, cycles: int) -> int: ...


class DeviceStuck(DeviceError):
    """A launch did not reach DONE: ``outcome.status`` is "deadlock" or "timeout" and
    ``outcome.stuck`` says which unit waits for which token."""

    def __init__(self, outcome: protocol.Outcome, note: str = ""):
        self.outcome = outcome
        note = f" ({note})" if note else ""
        super().__init__(
            f"the accelerator did not finish ({outcome.status}{note}): {outcome.message}"
        )


class DeviceFault(DeviceError):
    """The accelerator stopped at a bad instruction (STATUS.ERROR): ``outcome.fault`` names its
    index and kind. Each kind's class is also the error the simulator raises for it
    (``FAULT_ERRORS``), so ``except sim.OutOfBoundsError`` catches the RTL's and the simulator's."""

    simulator_error: type[Exception] | None = None  # what sim.run raises for this kind

    def __init__(self, outcome: protocol.Outcome):
        self.outcome = outcome
        super().__init__(
            f"{outcome.message} (the accelerator stopped there: STATUS.ERROR, ERROR_INDEX)"
        )


class DecodeFault(DeviceFault, DecodeError):
    simulator_error = DecodeError


class QueueUsageFault(DeviceFault, QueueUsageError):
    simulator_error = QueueUsageError


class StorePadFault(DeviceFault, ProgramError):
    simulator_error = ProgramError


class OutOfBoundsFault(DeviceFault, OutOfBoundsError):
    simulator_error = OutOfBoundsError


FAULT_ERRORS: dict[Fault, type[DeviceFault]] = {
    Fault.DECODE: DecodeFault,
    Fault.DEP_QUEUE: QueueUsageFault,
    Fault.STORE_PAD: StorePadFault,
    Fault.OUT_OF_BOUNDS: OutOfBoundsFault,
}


def fault_kind(error: Exception) -> Fault | None:
    """The kind of fault a simulator error is (the inverse of ``FAULT_ERRORS``); None if none."""
    for kind, cls in FAULT_ERRORS.items():
        if isinstance(error, cls.simulator_error):
            return kind
    return None


class WrongHardware(DeviceError):
    """The ID / CONFIG_HASH registers name another ISA version or HwConfig than the host's."""


def run(routine: protocol.Routine, port: RegisterPort):
    """Step a routine of ``isa.launch`` against ``port``; returns the routine's result."""
    try:
        op = next(routine)
        while True:
            if isinstance(op, protocol.Read):
                op = routine.send(port.read32(op.offset))
            elif isinstance(op, protocol.Write):
                port.write32(op.offset, op.value)
                op = routine.send(None)
            else:
                op = routine.send(port.wait(op.cycles))
    except StopIteration as stop:
        return stop.value


def check_id(port: RegisterPort, config: HwConfig) -> None:
    """Refuse a device whose ID registers do not match ``config`` (part of opening a device)."""
    problem = run(protocol.check_id(config), port)
    if problem:
        raise WrongHardware(f"refusing the device: {problem}")


def launch(port: RegisterPort, insn_addr: int, insn_count: int, **kwargs) -> Stats:
    """Run a program already in the device's DRAM; ``kwargs`` go to ``isa.launch.launch``.
    Raises what ``check`` raises."""
    return check(run(protocol.launch(insn_addr, insn_count, **kwargs), port))


def check(outcome: protocol.Outcome) -> Stats:
    """The stats of a launch that finished. Raises a ``DeviceFault`` of the fault's kind when
    the accelerator stopped at a bad instruction, ``DeviceStuck`` (with the decoded token state)
    when it did not finish."""
    if outcome.status == "fault":
        raise FAULT_ERRORS.get(outcome.fault.kind, DeviceFault)(outcome)
    if outcome.status != "done":
        raise DeviceStuck(outcome)
    return Stats.from_registers(outcome.counters)
