"""The board's own CPU as a measuring device: ``driver.open("cpu")``, served by
``pyvta serve --device cpu`` so that a tuner on another host measures the CPU kernels it
cross-compiles for this CPU (``RemoteDevice.measure_cpu``; the protocol's ``measure_cpu``).

It has no accelerator memory: ``alloc``, ``read``, ``write`` and ``launch`` are refused, naming
what it does. ``measure_cpu`` loads a kernel's shared object with ctypes and times it
(``runtime.cpu_measure``): numpy and the standard library, no compiler, no llvmlite.
"""

from __future__ import annotations

import numpy as np

from pyvta.driver.device import Device, DeviceError
from pyvta.isa import HwConfig


class CpuDevice(Device):
    """This machine's CPU. ``config``: the HwConfig the server's hello names (an accelerator
    served beside it would have one; this device runs none of it)."""

    def __init__(self, config: HwConfig | None = None):
        super().__init__(config or HwConfig())

    def _refuse(self, what: str):
        raise DeviceError(
            f"the cpu device has no accelerator memory ({what}): it measures CPU kernels"
            " (measure_cpu); serve sim, rtl or pynq for accelerator kernels"
        )

    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        self._refuse("alloc")

    def write(self, addr: int, data) -> None:
        self._refuse("write")

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        self._refuse("read")

    def launch(self, insn_addr: int, insn_count: int):
        self._refuse("launch")

    def reset(self) -> None:
        return None  # nothing allocated

    def scrub(self) -> None:
        return None  # no memory a client writes outlives its request

    def measure_cpu(
        self,
        triple: str,
        shared: bytes,
        sig,
        arrays: list[np.ndarray],
        repeats: int,
        number: int = 0,
        min_repeat_ms: float = 20.0,
    ) -> tuple[list[float], int, list[np.ndarray]]:
        """Time the kernel ``sig`` (a ``runtime.cpu_code.KernelSig``) of the shared object
        ``shared`` (made for ``triple``) on ``arrays`` (``runtime.cpu_measure.time_kernel``):
        seconds per call of each repeat, calls per repeat, the written arrays."""
        from pyvta.runtime.cpu_measure import check_triple, time_kernel

        check_triple(triple)
        return time_kernel(shared, sig, arrays, repeats, number, min_repeat_ms)


DEVICE = CpuDevice
