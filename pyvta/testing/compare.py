"""An accelerator's run of a program against the golden model's (``sim.run``)."""

from __future__ import annotations

import numpy as np

from pyvta import sim

SHOWN_BYTES = 8  # differing DRAM bytes a message lists


def accelerator_mismatch(name: str, program: sim.Program, result) -> str | None:
    """None when ``result`` (``status`` and final ``dram``, as ``hw.runner.HwResult`` has them)
    finished and left the DRAM image ``sim.run(program)`` computes; else what went wrong."""
    if result.status != "done":
        return f"{name}: accelerator {result.status}: {result.message}"
    ref = sim.run(program).dram
    if ref.shape == result.dram.shape and np.array_equal(ref, result.dram):
        return None
    if ref.shape != result.dram.shape:
        return f"{name}: DRAM image of {result.dram.size} bytes, the simulator's has {ref.size}"
    diff = np.flatnonzero(ref != result.dram)[:SHOWN_BYTES]
    return (
        f"{name}: {np.count_nonzero(ref != result.dram)} DRAM bytes differ, first at"
        f" {diff.tolist()}: sim {ref[diff].tolist()} accelerator {result.dram[diff].tolist()}"
    )
