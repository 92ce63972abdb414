"""Timing one CPU kernel of a shared object on the machine it was cross-compiled for (a board's
ARM): what ``pyvta serve --device cpu`` does for a tuner on another host (``driver.ops_cpu``).

    costs_s, number, outputs = time_kernel(shared, sig, arrays, repeats=5)

``shared``: ELF bytes for this CPU (``compiler.backend.llvm.shared.shared_object``); ``sig``: the
kernel's ``cpu_code.KernelSig``; ``arrays``: one per parameter, in order (the written ones are
overwritten). Loaded with ctypes (``cpu_code``): numpy and the standard library only, no compiler.
"""

from __future__ import annotations

import time

import numpy as np

from pyvta.runtime.arrays import aligned_copy
from pyvta.runtime.cpu_code import (
    CpuCodeError,
    KernelSig,
    SharedKernel,
    _load_library,
    arch_family,
    this_machine,
)

MAX_NUMBER = 10_000  # calls per repeat, at most


def check_triple(triple: str) -> None:
    """``CpuCodeError`` unless code for ``triple`` runs on this machine (architecture family and
    pointer width, as ``CpuCode.runs_here``)."""
    if arch_family(triple) != this_machine():
        family, bits = this_machine()
        raise CpuCodeError(
            f"kernels for {triple} do not run here ({family}, {bits}-bit): cross-compile for this"
            " machine's CPU"
        )


def time_kernel(
    shared: bytes,
    sig: KernelSig,
    arrays: list[np.ndarray],
    repeats: int,
    number: int = 0,
    min_repeat_ms: float = 20.0,
) -> tuple[list[float], int, list[np.ndarray]]:
    """``(seconds per call of each of repeats, calls per repeat, the written arrays)``: the
    kernel called once on copies of ``arrays`` (a warm-up), then ``repeats`` times ``number``
    calls (0: enough that a repeat lasts about ``min_repeat_ms``, at most ``MAX_NUMBER``); the
    written arrays as the last call left them (for the caller to check)."""
    if repeats < 1 or number < 0:
        raise ValueError(f"repeats must be >= 1 and number >= 0, got {repeats}, {number}")
    kernel = SharedKernel(_load_library(bytes(shared)), sig)
    arrays = [aligned_copy(a) for a in arrays]
    call = kernel.bind(*arrays)
    t0 = time.perf_counter()
    call()
    first_s = time.perf_counter() - t0
    if number == 0:
        number = max(1, min(MAX_NUMBER, int(min_repeat_ms * 1e-3 / max(first_s, 1e-7))))
    costs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        costs.append((time.perf_counter() - t0) / number)
    written = set(sig.written)
    outs = [a for a, p in zip(arrays, sig.params, strict=True) if p.name in written]
    return costs, number, outs
