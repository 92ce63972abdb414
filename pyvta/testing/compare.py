"""An accelerator's run of a program against the golden model's (``sim.run``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pyvta import sim

SHOWN_BYTES = 8  # differing DRAM bytes a message lists


def accelerator_mismatch(name: str, program: sim.Program, result) -> str | None:
    """None when ``result`` (``status`` and final ``dram``, as ``hw.runner.HwResult`` has them)
    finished and left the DRAM image ``sim.run(program)`` computes; else what went wrong."""
    if result.status != "done":
        return f"{name}: accelerator {result.status}: {result.message}"
    ref = sim.run(program).dram
    if ref.shape != result.dram.shape:
        return f"{name}: DRAM image of {result.dram.size} bytes, the simulator's has {ref.size}"
    diff = np.flatnonzero(ref != result.dram)
    if diff.size == 0:
        return None
    first = diff[:SHOWN_BYTES]
    return (
        f"{name}: {diff.size} DRAM bytes differ, first at {first.tolist()}:"
        f" sim {ref[first].tolist()} accelerator {result.dram[first].tolist()}"
    )


def accelerator_mismatches(named_programs: Iterable[tuple[str, sim.Program]], results) -> list[str]:
    """``accelerator_mismatch`` of each (name, program) and its result, in order; empty when
    every run matches."""
    pairs = zip(named_programs, results, strict=True)
    return [msg for (name, p), r in pairs if (msg := accelerator_mismatch(name, p, r))]


@dataclass
class DeviceRun:
    """One program's run on a ``driver.Device``, shaped like ``hw.runner.HwResult``."""

    dram: np.ndarray | None
    status: str
    message: str = ""
    result: object | None = None  # the driver.RunResult when done
    error: Exception | None = None  # the driver.launch.DeviceFault when status is "fault"

    @property
    def cycles(self) -> int | None:
        return self.result.cycles if self.result else None


def device_runs(device, programs: Iterable[sim.Program]) -> list[DeviceRun]:
    """Each program on ``device`` (``Device.run_program``); a program that does not finish is
    reported (status "deadlock" / "timeout" and the stuck report; "fault" and the error) and the
    next one still runs."""
    from pyvta.driver.launch import DeviceFault, DeviceStuck

    runs = []
    for p in programs:
        try:
            dram, result = device.run_program(p)
            runs.append(DeviceRun(dram, "done", result=result))
        except DeviceStuck as stuck:
            runs.append(DeviceRun(None, stuck.outcome.status, str(stuck)))
        except DeviceFault as fault:
            runs.append(DeviceRun(None, "fault", str(fault), error=fault))
    return runs


def fault_mismatch(name: str, program: sim.Program, run: DeviceRun) -> str | None:
    """None when ``run`` stopped at the instruction ``sim.run(program)`` refuses, with an error of
    the kind the simulator raises (``driver.launch.FAULT_ERRORS``); else what differs."""
    from pyvta.isa import DecodeError
    from pyvta.sim.errors import instruction_index

    try:
        sim.run(program)
    except (sim.SimError, DecodeError) as e:
        expected = e
    else:
        return f"{name}: the simulator runs it (the accelerator: {run.status} {run.message})"
    want = f"{type(expected).__name__} at instruction {instruction_index(expected)}"
    if run.error is None:
        return f"{name}: accelerator {run.status} {run.message}; the simulator raises {want}"
    got = instruction_index(run.error)
    if not isinstance(run.error, type(expected)) or got != instruction_index(expected):
        return (
            f"{name}: accelerator {type(run.error).__name__} at instruction {got}; simulator {want}"
        )
    return None


def fault_mismatches(named_programs: Iterable[tuple[str, sim.Program]], runs) -> list[str]:
    """``fault_mismatch`` of each (name, program) and its run, in order; empty when every run
    stopped where and as the simulator refuses the program."""
    pairs = zip(named_programs, runs, strict=True)
    return [msg for (name, p), r in pairs if (msg := fault_mismatch(name, p, r))]
