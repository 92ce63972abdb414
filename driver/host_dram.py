"""The DRAM of the devices the host simulates (simulator, Verilated RTL, cocotb testbench): one
``sim.Dram`` (a numpy byte buffer with a bump allocator) behind ``alloc``/``write``/``read``."""

from __future__ import annotations

import numpy as np

from pyvta import sim
from pyvta.driver.device import Device, check_alignment, check_count, host_bytes
from pyvta.isa import HwConfig


class HostDramDevice(Device):
    """A device whose DRAM is ``self.dram``, ``dram_bytes`` of host memory (pages the OS
    allocates as they are touched)."""

    def __init__(self, config: HwConfig, dram_bytes: int):
        super().__init__(config)
        self.dram = sim.Dram(dram_bytes)

    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        return self.dram.alloc(check_count("nbytes", nbytes), check_alignment(align_bytes))

    def reset(self) -> None:
        self.dram.release_all()  # the same buffer: a harness holding its pointer keeps it

    def scrub(self) -> None:
        self.dram.scrub()  # all of DRAM: a launch may have stored outside every allocation

    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        self.dram.write(check_count("addr", addr), host_bytes(data))

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        return self.dram.read(check_count("addr", addr), check_count("nbytes", nbytes))
