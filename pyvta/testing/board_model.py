"""A PYNQ board without a board: the part of pynq's API that ``driver.ops_pynq.PynqDevice`` uses
(``Overlay``, ``MMIO``, ``allocate``), over a physical memory and the accelerator's register map,
so PynqDevice's own code runs end to end in CI.

    board = ModelBoard()                              # the simulator behind the registers
    board = ModelBoard(backend="rtl")                 # or the Verilated RTL (driver "rtl")
    dev = driver.open("pynq", bitstream=folder, pynq=board.pynq, config=cfg)

Buffers model the CPU's cache: what the host writes reaches the accelerator's memory only when
flushed, and what the accelerator writes is seen by the host only after an invalidate, so a
missing flush or invalidate in a driver gives wrong results here as on a board. ``Overlay`` reads
the bitstream folder's manifest to learn which HwConfig "was built" (what ID / CONFIG_HASH read).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from pyvta.driver.launch import fault_kind
from pyvta.driver.stats import Stats
from pyvta.isa import DecodeError, HwConfig, regmap

PAGE_BYTES = 4096
MIN_ALLOC_BYTES = 8192  # pynq's smallest allocation


class ModelBuffer(np.ndarray):
    """A ``pynq.PynqBuffer``-like array: the host's (cached) view of a physical range."""

    def flush(self) -> None:
        self._board.memory[self.device_address : self.device_address + self.nbytes] = (
            self.view(np.ndarray).reshape(-1).view(np.uint8)
        )

    def invalidate(self) -> None:
        mem = self._board.memory[self.device_address : self.device_address + self.nbytes]
        self.view(np.ndarray).reshape(-1).view(np.uint8)[:] = mem

    def freebuffer(self) -> None:
        self._board.freed.append(self.device_address)

    @property
    def physical_address(self) -> int:
        return self.device_address


class SimRegisters:
    """The register map of a bitstream built for ``built_for``, over the simulator: START runs the
    program functionally on the board's memory and the cycle model fills the counters. A program
    the simulator refuses at an instruction for a reason the RTL flags (``driver.launch.fault_kind``:
    a bad opcode, an access out of bounds...) reaches DONE with STATUS.ERROR and ERROR_INDEX naming
    it, as the RTL reports it; any other (a deadlock) never reaches DONE."""

    def __init__(self, board: ModelBoard, built_for: HwConfig):
        self.board, self.config = board, built_for
        self.values = {r.name: 0 for r in regmap.REGISTERS}
        self.values["ID"] = regmap.id_value()
        self.values["CONFIG_HASH"] = built_for.config_hash
        self.error: Exception | None = None

    def read32(self, offset: int) -> int:
        return self.values[_name(offset)]

    def write32(self, offset: int, value: int) -> None:
        name = _name(offset)
        if name == "CTRL":
            ctrl = regmap.register("CTRL").decode(value)
            if ctrl["START"]:
                self._start()
        elif name == "STATUS":
            self.values["STATUS"] &= ~value  # write 1 to clear
        elif regmap.register(name).access == "rw":
            self.values[name] = value

    def wait(self, cycles: int) -> int:
        return cycles

    def _start(self) -> None:
        from pyvta import sim

        status = regmap.register("STATUS")
        for name in regmap.COUNTERS:
            self.values[name] = 0
        self.values["STATUS"] = status.encode(BUSY=1)
        self.values["ERROR_INDEX"] = 0
        cfg = self.config
        program = sim.Program(
            self.board.memory, self.values["INSN_ADDR"], self.values["INSN_COUNT"], cfg
        )
        try:
            insns = program.insns()
            result = sim.run_insns(insns, self.board.memory, cfg)
            report = sim.cycles_of(insns, cfg)
        except (sim.SimError, DecodeError) as e:
            self.error = e
            if not self._show_fault(e):  # the hardware would hang or misbehave: never DONE
                self._show_stuck(e)
            return
        self.values.update(Stats.from_cycle_report(report, result.counters).to_registers())
        self.values["STATUS"] = status.encode(DONE=1)

    def _show_fault(self, error) -> bool:
        """STATUS and ERROR_INDEX as the RTL flags a faulting instruction; False if ``error`` is
        no fault the RTL flags (or names no instruction)."""
        from pyvta.sim.errors import instruction_index

        kind, index = fault_kind(error), instruction_index(error)
        if kind is None or index is None:
            return False
        status = regmap.register("STATUS")
        self.values["STATUS"] = status.encode(DONE=1, ERROR=1)
        self.values["ERROR_INDEX"] = regmap.register("ERROR_INDEX").encode(INDEX=index, KIND=kind)
        return True

    def _show_stuck(self, error) -> None:
        """TOKENS and QUEUES as the RTL shows a deadlock (what the simulator found)."""
        waits = getattr(error, "waits", {})
        pending = getattr(error, "pending", {})
        tokens = getattr(error, "tokens", {})
        self.values["TOKENS"] = regmap.register("TOKENS").encode(
            **{q.upper(): min(tokens.get(q, 0), 255) for q in regmap.TOKEN_QUEUES}
        )
        fields = {}
        for unit in regmap.UNITS:
            fields[f"LEVEL_{unit.upper()}"] = min(max(pending.get(unit, 0) - 1, 0), 255)
            fields[f"STALLED_{unit.upper()}"] = int(unit in waits)
            fields[f"IDLE_{unit.upper()}"] = int(pending.get(unit, 0) == 0)
        fields["FETCH_DONE"] = 1
        self.values["QUEUES"] = regmap.register("QUEUES").encode(**fields)


class RtlRegisters:
    """The register map of the Verilated accelerator (``driver.open("rtl")``), its DRAM port on
    the board's memory, its clock free-running in a thread as a board's PL clock is: the host
    only reads and writes registers (and sleeps), as on a board."""

    CHUNK_CYCLES = 2000

    def __init__(self, board: ModelBoard, built_for: HwConfig):
        import threading

        from pyvta.driver.ops_rtl import RtlDevice

        self.rtl = RtlDevice(built_for, dram_bytes=board.memory.size, expect_config=built_for)
        board.memory = self.rtl.dram.data  # the accelerator's AXI master sees this memory
        self._lock = threading.Lock()
        self._running = True
        self._clock = threading.Thread(target=self._tick, daemon=True)
        self._clock.start()

    def _tick(self) -> None:
        import time

        while self._running:
            with self._lock:
                self.rtl.port.wait(self.CHUNK_CYCLES)
            time.sleep(0)

    def read32(self, offset: int) -> int:
        with self._lock:
            return self.rtl.port.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        with self._lock:
            self.rtl.port.write32(offset, value)

    def close(self) -> None:
        self._running = False
        self._clock.join()
        self.rtl.close()


def _name(offset: int) -> str:
    for r in regmap.REGISTERS:
        if r.offset == offset:
            return r.name
    raise ValueError(f"no register at offset {offset:#x}")


# the registers behind a model board's MMIO, by ``ModelBoard(backend=...)``
REGISTERS = {"sim": SimRegisters, "rtl": RtlRegisters}


class ModelBoard:
    """A board: ``memory_bytes`` of physical memory from ``base_address`` and the accelerator's
    registers behind ``MMIO`` once an ``Overlay`` is loaded. ``pynq`` is the module to hand to
    ``PynqDevice``."""

    def __init__(
        self, memory_bytes: int = 1 << 28, base_address: int = 0x1000_0000, backend: str = "sim"
    ):
        if backend not in REGISTERS:
            allowed = ", ".join(REGISTERS)
            raise ValueError(f"model board backend {backend!r} (allowed: {allowed})")
        self.backend = backend
        self.memory = np.zeros(base_address + memory_bytes, np.uint8)  # pages touched only
        self.base_address, self._next = base_address, base_address
        self.registers: SimRegisters | None = None
        self.mmio_base: int | None = None
        self.freed: list[int] = []
        self.flushes = 0
        self.pynq = SimpleNamespace(Overlay=self._overlay, MMIO=self._mmio, allocate=self._allocate)

    def _overlay(self, bitfile: str):
        folder = Path(bitfile).parent
        manifest = json.loads((folder / "manifest.json").read_text())
        self.registers = REGISTERS[self.backend](self, HwConfig.from_dict(manifest["hw_config"]))
        self.mmio_base = int(manifest["base_address"])
        return SimpleNamespace(bitfile_name=bitfile, is_loaded=lambda: True)

    def close(self) -> None:
        if hasattr(self.registers, "close"):
            self.registers.close()

    def _mmio(self, base_addr: int, length: int):
        if self.registers is None:
            raise RuntimeError("model board: load an Overlay before opening its MMIO")
        if base_addr != self.mmio_base:
            raise RuntimeError(
                f"model board: no IP at {base_addr:#x} (the accelerator is at {self.mmio_base:#x})"
            )
        regs = self.registers
        return SimpleNamespace(read=regs.read32, write=regs.write32, length=length)

    def _allocate(self, shape, dtype=np.uint8, **_):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        size = -(-max(nbytes, MIN_ALLOC_BYTES) // PAGE_BYTES) * PAGE_BYTES
        addr = self._next
        if addr + size > self.memory.size:
            raise RuntimeError(f"model board: out of memory allocating {nbytes} bytes")
        self._next += size
        buf = np.zeros(shape, dtype).view(ModelBuffer)
        buf.device_address, buf._board = addr, self
        return buf


def write_model_bitstream(folder: str | Path, config: HwConfig, board: str = "pynq-z2") -> Path:
    """A bitstream folder for the model board: the recipe's manifest and placeholder .bit/.hwh."""
    from pyvta.hw.recipe import make_recipe, manifest

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    m = manifest(make_recipe(board, config))
    (folder / m["files"]["bit"]).write_bytes(b"model bitstream: not for a real FPGA\n")
    (folder / m["files"]["hwh"]).write_text("<!-- model board hardware handoff -->\n")
    (folder / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
    return folder
