"""The RTL as a device: the Verilated accelerator kept alive in-process (``driver.open("rtl")``).

A C++ harness (``rtl_harness.cpp``, compiled with the Verilated model into a shared library,
``driver.rtl_build``) puts an AXI4 memory model on the accelerator's DRAM port and AXI4-Lite
transactions on its control port; ctypes calls it. DRAM is a ``sim.Dram`` whose numpy buffer the
harness reads and writes in place (never copied per launch). Each launch runs the one launch routine
(``isa.launch`` through ``driver.launch``): clear the on-chip buffers (the state ``sim.run``
assumes), INSN_ADDR / INSN_COUNT, START, wait for DONE, read the counters into ``Stats``. Opening
checks the ID registers against the config.

Variant ``rtl:cocotb``: the verification testbench (``hw.runner``, cocotb + cocotbext-axi) behind the
same interface: one simulator start and a DRAM copy per launch, for small DRAMs.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

from pyvta import sim
from pyvta.driver import launch as host
from pyvta.driver.device import Device, DeviceError, RunResult, parameters
from pyvta.driver.host_dram import HostDramDevice
from pyvta.isa import HwConfig

DEFAULT_DRAM_BYTES = 1 << 28
# The memory model's latencies (cycles): first read beat the cycle after AR, B the cycle after the
# last W. Calibrated against cocotbext-axi's AxiRam (what sim.Timing.rtl_testbench() was fitted to):
# on the directed programs and random seeds 0..29 the RTL's CYCLES equal under both on 42 of 47,
# mean difference 0.05% (benchmarks/rtl_speed.py prints it).
READ_LATENCY_CYCLES = 1
WRITE_LATENCY_CYCLES = 1
RESET_CYCLES = 4
POLL_CYCLES = 100_000  # the harness's wait returns at irq: polls are for the watchdog only
VARIANTS = (None, "cocotb", "icarus")


class HarnessPort:
    """``driver.launch.RegisterPort`` on the C++ harness (sync, blocking AXI4-Lite)."""

    def __init__(self, lib, handle):
        self._lib, self._h = lib, handle
        self._value = ctypes.c_uint32()

    def read32(self, offset: int) -> int:
        if self._lib.vta_read32(self._h, offset, ctypes.byref(self._value)):
            raise DeviceError(f"AXI4-Lite read of 0x{offset:03X} got no response")
        return self._value.value

    def write32(self, offset: int, value: int) -> None:
        if self._lib.vta_write32(self._h, offset, value):
            raise DeviceError(f"AXI4-Lite write of 0x{offset:03X} got no response")

    def wait(self, cycles: int) -> int:
        return self._lib.vta_wait(self._h, cycles)


def _load(path: Path):
    lib = ctypes.CDLL(str(path))
    u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    lib.vta_new.argtypes = [vp, u64, u64, u64]
    lib.vta_new.restype = vp
    lib.vta_free.argtypes = [vp]
    lib.vta_reset.argtypes = [vp, ctypes.c_uint]
    lib.vta_read32.argtypes = [vp, u32, ctypes.POINTER(u32)]
    lib.vta_write32.argtypes = [vp, u32, u32]
    lib.vta_wait.argtypes = [vp, u64]
    lib.vta_wait.restype = u64
    lib.vta_cycle.argtypes = [vp]
    lib.vta_cycle.restype = u64
    lib.vta_take_error.argtypes = [vp]
    lib.vta_take_error.restype = ctypes.c_char_p
    lib.vta_bus_bytes.restype = ctypes.c_uint
    return lib


class RtlDevice(HostDramDevice):
    """The Verilated accelerator with ``dram_bytes`` of DRAM; a drop-in for ``SimDevice``.

    ``library``: a prebuilt harness library (default: built for ``config`` and cached);
    ``max_cycles`` / ``watchdog_cycles``: a launch's deadline and its no-progress window (cycles).
    ``expect_config``: the config the host checks the ID registers against (default ``config``;
    a test passes another to see the refusal).
    """

    def __init__(
        self,
        config: HwConfig | None = None,
        dram_bytes: int = DEFAULT_DRAM_BYTES,
        library: str | Path | None = None,
        max_cycles: int = host.protocol.DEFAULT_MAX_CYCLES,
        watchdog_cycles: int = host.protocol.DEFAULT_WATCHDOG_CYCLES,
        expect_config: HwConfig | None = None,
        read_latency_cycles: int = READ_LATENCY_CYCLES,
        write_latency_cycles: int = WRITE_LATENCY_CYCLES,
    ):
        from pyvta.driver.rtl_build import build_library
        from pyvta.hw.sram import clear_rows

        super().__init__(config or HwConfig(), dram_bytes)
        self.max_cycles, self.watchdog_cycles = max_cycles, watchdog_cycles
        self._clear_cycles = clear_rows(self.config)
        self._lib = _load(Path(library) if library else build_library(self.config))
        if self._lib.vta_bus_bytes() != self.config.bus_width_bytes:
            raise DeviceError(
                f"library {library} has a {self._lib.vta_bus_bytes()}-byte bus; config"
                f" {self.config.tag} has {self.config.bus_width_bytes}"
            )
        ptr = self.dram.data.ctypes.data_as(ctypes.c_void_p)
        self._h = self._lib.vta_new(
            ptr, self.dram.size_bytes, read_latency_cycles, write_latency_cycles
        )
        self.port = HarnessPort(self._lib, self._h)
        self._lib.vta_reset(self._h, RESET_CYCLES)
        try:
            host.check_id(self.port, expect_config or self.config)
        except DeviceError:
            self.close()
            raise

    @classmethod
    def open(cls, variant: str | None = None, **kwargs) -> Device:
        if variant not in VARIANTS:
            allowed = ", ".join("rtl" if v is None else f"rtl:{v}" for v in VARIANTS)
            raise DeviceError(f"unknown RTL device variant {variant!r} (allowed: {allowed})")
        if variant is None:
            if kwargs.pop("backpressure", False):  # the Verilated harness's AXI never stalls
                raise DeviceError(
                    "backpressure (random AXI stalls) needs the cocotb testbench: rtl:cocotb"
                )
            return cls(**kwargs)
        return CocotbDevice(simulator="verilator" if variant == "cocotb" else variant, **kwargs)

    @classmethod
    def options(cls, variant: str | None = None) -> frozenset[str]:
        return parameters((cls if variant is None else CocotbDevice).__init__)

    def close(self) -> None:
        if getattr(self, "_h", None):
            self._lib.vta_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    @property
    def cycle(self) -> int:
        """Clock cycles simulated since the device was opened (launches, clears, register IO)."""
        return self._lib.vta_cycle(self._h)

    def estimate_cycles(self, insns) -> int:
        """The cycle model's total with this memory model's latency (nothing is executed)."""
        return sim.cycles_of(list(insns), self.config, sim.Timing.rtl_testbench()).total_cycles

    def launch(self, insn_addr: int, insn_count: int) -> RunResult:
        if self._h is None:
            raise DeviceError("the RTL device is closed")
        t0, cpu0 = time.perf_counter(), time.process_time()
        cycle0 = self.cycle
        try:
            stats = host.launch(
                self.port,
                insn_addr,
                insn_count,
                clear_cycles=self._clear_cycles,
                max_cycles=self.max_cycles,
                watchdog_cycles=self.watchdog_cycles,
                poll_cycles=min(POLL_CYCLES, max(self.watchdog_cycles // 4, 1)),
            )
        except (host.DeviceStuck, host.DeviceFault):
            self._lib.vta_reset(self._h, RESET_CYCLES)  # the next launch starts clean
            raise
        finally:
            error = self._lib.vta_take_error(self._h).decode()
        if error:
            raise DeviceError(error)
        wall_s = time.perf_counter() - t0
        # simulated_cycles: every clock of the launch (buffer clear and register IO included);
        # cpu_s: this process's CPU time for it (on a shared machine, wall_s includes waiting)
        counters = {"simulated_cycles": self.cycle - cycle0, "cpu_s": time.process_time() - cpu0}
        return RunResult(
            stats=stats,
            counters=counters,
            wall_s=wall_s,
        )


class CocotbDevice(HostDramDevice):
    """The verification testbench (cocotb + cocotbext-axi, ``hw.runner``) as a device: each launch
    starts the simulator on a copy of DRAM (keep ``dram_bytes`` small) and copies the result back."""

    def __init__(
        self,
        config: HwConfig | None = None,
        dram_bytes: int = 1 << 22,
        simulator: str = "verilator",
        backpressure: bool = False,
        seed: int = 0,
        built=None,
    ):
        from pyvta.hw import runner

        super().__init__(config or HwConfig(), dram_bytes)
        self.simulator, self.backpressure, self.seed = simulator, backpressure, seed
        self.built = built or runner.build(self.config, simulator)

    def launch(self, insn_addr: int, insn_count: int) -> RunResult:
        from pyvta.hw import runner
        from pyvta.isa import launch as protocol

        program = sim.Program(self.dram.data, insn_addr, insn_count, self.config)
        t0 = time.perf_counter()
        (res,) = runner.run_programs(
            [program], built=self.built, backpressure=self.backpressure, seed=self.seed
        )
        stats = host.check(protocol.Outcome(res.status, res.counters, 0, res.stuck, res.fault))
        self.dram.data[:] = res.dram
        return RunResult(stats=stats, wall_s=time.perf_counter() - t0)


DEVICE = RtlDevice
