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
from pyvta.isa import HwConfig
from pyvta.isa import launch as protocol


class RegisterPort(Protocol):
    def read32(self, offset: int) -> int: ...

    def write32(self, offset: int, value: int) -> None: ...

    def wait(self, cycles: int) -> int: ...


class DeviceStuck(DeviceError):
    """A launch did not reach DONE: ``outcome.status`` is "deadlock" or "timeout" and
    ``outcome.stuck`` says which unit waits for which token."""

    def __init__(self, outcome: protocol.Outcome):
        self.outcome = outcome
        super().__init__(f"the accelerator did not finish ({outcome.status}): {outcome.message}")


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
    Raises ``DeviceStuck`` (with the decoded token state) when it does not finish."""
    outcome = run(protocol.launch(insn_addr, insn_count, **kwargs), port)
    if outcome.status != "done":
        raise DeviceStuck(outcome)
    return Stats.from_registers(outcome.counters)
