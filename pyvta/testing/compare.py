"""An accelerator's run of a program against the golden model's (``sim.run``)."""

from __future__ import annotations

from collections.abc import Iterable

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
