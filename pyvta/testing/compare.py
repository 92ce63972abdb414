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

    @property
    def cycles(self) -> int | None:
        return self.result.cycles if self.result else None


def device_runs(device, programs: Iterable[sim.Program]) -> list[DeviceRun]:
    """Each program on ``device`` (``Device.run_program``); a program that does not finish is
    reported (status "deadlock" / "timeout" and the stuck report) and the next one still runs."""
    from pyvta.driver.launch import DeviceStuck

    runs = []
    for p in programs:
        try:
            dram, result = device.run_program(p)
            runs.append(DeviceRun(dram, "done", result=result))
        except DeviceStuck as stuck:
            runs.append(DeviceRun(None, stuck.outcome.status, str(stuck)))
    return runs
