"""One device interface for every backend: DRAM buffers, copies in and out, and launches.

A compiled program needs only this: allocate DRAM, copy tensors in, run an instruction stream
(which reads micro-ops and data from DRAM and writes results back), copy results out.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa import INSN_BYTES, HwConfig, Insn, encode_insns


@dataclass
class RunResult:
    """What one launch reports. ``cycles`` is None where the backend cannot count them."""

    cycles: int | None
    counters: dict = field(default_factory=dict)
    wall_s: float = 0.0
    report: object | None = None  # backend-specific detail (the sim's CycleReport, ...)


class Device(abc.ABC):
    """A VTA device: a DRAM the host can read and write, and a launch of an instruction stream."""

    def __init__(self, config: HwConfig):
        self.config = config

    @abc.abstractmethod
    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        """Reserve DRAM; returns the byte address (the unit of dram_base is address / elem size)."""

    @abc.abstractmethod
    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        """Copy host bytes (an array's little-endian bytes) to DRAM at ``addr``."""

    @abc.abstractmethod
    def read(self, addr: int, nbytes: int) -> np.ndarray:
        """Copy ``nbytes`` of DRAM at ``addr`` to a new uint8 array."""

    @abc.abstractmethod
    def launch(self, insn_addr: int, insn_count: int) -> RunResult:
        """Run ``insn_count`` instructions already in DRAM at ``insn_addr`` until FINISH."""

    def estimate_cycles(self, insns: Sequence[Insn]) -> int | None:
        """Cycles the stream would take, if this backend can tell without running it."""
        return None

    def put(self, array: np.ndarray, align_bytes: int = 64) -> int:
        """Allocate and copy in an array; returns its byte address."""
        arr = np.ascontiguousarray(array)
        addr = self.alloc(arr.nbytes, align_bytes)
        self.write(addr, arr)
        return addr

    def run(self, insns: Sequence[Insn] | bytes) -> RunResult:
        """Write an instruction stream into DRAM and launch it."""
        raw = insns if isinstance(insns, bytes) else encode_insns(insns, self.config)
        addr = self.alloc(len(raw), INSN_BYTES)
        self.write(addr, raw)
        return self.launch(addr, len(raw) // INSN_BYTES)
