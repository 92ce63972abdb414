"""A PYNQ board: the accelerator's bitstream loaded with ``pynq.Overlay``, DRAM from
``pynq.allocate``, the launch routine of ``isa.launch`` over ``pynq.MMIO``.

    dev = driver.open("pynq", bitstream="bitstreams/vta_1x16_..._pynq-z2/", config=cm.hw)

pynq is never a dependency of pyvta: the board image ships it (its numpy and grpcio pins clash
with ours), and it is imported only when a device is opened. A bitstream folder is what
``pyvta board recipe --build`` writes: ``manifest.json`` beside the ``.bit`` and ``.hwh`` it names.
Before the first launch the manifest and then the ID / CONFIG_HASH registers are checked against
the host's HwConfig. Each ``alloc`` is its own buffer (device address below 4 GiB), so flushes touch
only what changed: buffers written since the last launch are flushed before it, and a buffer is
invalidated before it is read after a launch. DONE is polled with a deadline; a launch that does
not finish raises ``DeviceStuck`` with the decoded token state, one the accelerator stopped at a
bad instruction (STATUS.ERROR) the ``DeviceFault`` of its kind, naming the instruction.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from pyvta.driver import launch as launching
from pyvta.driver.device import (
    Device,
    DeviceError,
    RunResult,
    check_alignment,
    check_count,
    host_bytes,
)
from pyvta.isa import HwConfig, regmap

DEVICE_ADDRESS_LIMIT = 1 << 32  # the accelerator's AXI master has 32 address bits
MANIFEST = "manifest.json"


MEMINFO = "/proc/meminfo"  # CmaTotal / CmaFree: the contiguous memory pynq.allocate draws on


class OutOfMemory(DeviceError):
    """The board's contiguous memory cannot hold a buffer asked for."""


def contiguous_memory(meminfo: str = MEMINFO) -> tuple[int | None, int | None]:
    """(free, total) bytes of the kernel's contiguous memory (CMA) from ``meminfo``; None where
    it does not say."""
    found = {}
    try:
        with open(meminfo) as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("CmaFree", "CmaTotal") and rest.split():
                    found[name] = int(rest.split()[0]) * 1024  # kB
    except (OSError, ValueError):
        pass
    return found.get("CmaFree"), found.get("CmaTotal")


def _mib(nbytes: int | None) -> str:
    return "? MiB" if nbytes is None else f"{nbytes / (1 << 20):.1f} MiB"


class BitstreamError(DeviceError):
    """A bitstream folder that is incomplete, damaged, or built for another HwConfig."""


def read_manifest(folder: str | Path, config: HwConfig | None = None) -> tuple[dict, Path, Path]:
    """The manifest of a bitstream folder and its .bit / .hwh paths, checked: the files exist,
    their sha256 match a built manifest's, and its HwConfig is ``config``'s (when given)."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise BitstreamError(
            f"{folder}: no {MANIFEST}; a bitstream folder is what `pyvta board recipe --build`"
            " writes (manifest.json beside the .bit and .hwh)"
        )
    try:
        manifest = json.loads(path.read_text())
        bit, hwh = folder / manifest["files"]["bit"], folder / manifest["files"]["hwh"]
        tag = manifest["config_tag"]
    except (ValueError, KeyError, TypeError) as e:
        raise BitstreamError(f"{path}: not a pyvta bitstream manifest ({e})") from None
    for f in (bit, hwh):
        if not f.is_file():
            raise BitstreamError(f"{folder}: the manifest names {f.name}, which is missing")
    built = manifest.get("build") or {}
    for kind, f in (("bit", bit), ("hwh", hwh)):
        want = built.get(f"{kind}_sha256")
        if want and hashlib.sha256(f.read_bytes()).hexdigest() != want:
            raise BitstreamError(f"{f}: its sha256 does not match the manifest's (damaged?)")
    if config is not None and tag != config.tag:
        raise BitstreamError(
            f"{folder} holds a bitstream for HwConfig {tag}; the artifact needs {config.tag}"
            " (build one with: pyvta board recipe --config ...)"
        )
    return manifest, bit, hwh


def import_pynq():
    try:
        import pynq
    except ImportError:
        raise DeviceError(
            "pynq is not installed: it comes with the PYNQ board image (pyvta never installs"
            " it). On a host, use driver.open('sim') or 'rtl', or the board model"
            " (pyvta.testing.board_model)"
        ) from None
    return pynq


class _MmioPort:
    """``driver.launch.RegisterPort`` over a ``pynq.MMIO`` window. ``wait`` returns the PL clock
    cycles that really passed since the previous wait returned (register reads in between
    included), measured on ``clock`` (seconds): a sleep of 2 us takes ~80 us on a board, and a
    deadline counted in cycles asked for would fire ~40x late. ``restart`` starts the count
    again (each launch)."""

    def __init__(self, mmio, clock_mhz: float, clock=time.perf_counter, sleep=time.sleep):
        self.mmio, self.clock_hz = mmio, clock_mhz * 1e6
        self.clock, self.sleep = clock, sleep
        self._since: float | None = None

    def read32(self, offset: int) -> int:
        return int(self.mmio.read(offset)) & 0xFFFF_FFFF

    def write32(self, offset: int, value: int) -> None:
        self.mmio.write(offset, int(value) & 0xFFFF_FFFF)

    def restart(self) -> None:
        self._since = None

    def wait(self, cycles: int) -> int:
        start = self.clock() if self._since is None else self._since
        self.sleep(cycles / self.clock_hz)
        self._since = self.clock()
        return max(1, round((self._since - start) * self.clock_hz))


class PynqDevice(Device):
    """The accelerator on a PYNQ board. ``bitstream``: a folder with manifest.json, .bit, .hwh;
    ``config``: the HwConfig the host expects (default: the manifest's); ``pynq``: the pynq
    module (default: the board's; the board model passes its own); ``deadline_s``: longest a
    launch may run before it is reported stuck."""

    def __init__(
        self,
        config: HwConfig | None = None,
        bitstream: str | Path | None = None,
        pynq=None,
        deadline_s: float = 60.0,
    ):
        if bitstream is None:
            raise DeviceError("the pynq device needs bitstream=FOLDER (--bitstream DIR)")
        manifest, bit, _ = read_manifest(bitstream, config)
        super().__init__(config or HwConfig.from_dict(manifest["hw_config"]))
        self.manifest = manifest
        self.pynq = pynq or import_pynq()
        self.overlay = self.pynq.Overlay(str(bit))
        clock_mhz = float(manifest["clock_mhz"])
        mmio = self.pynq.MMIO(int(manifest["base_address"]), 1 << regmap.ADDR_BITS)
        self.port = _MmioPort(mmio, clock_mhz)
        self.deadline_s = float(deadline_s)
        self.max_cycles = int(deadline_s * clock_mhz * 1e6)
        self.meminfo = MEMINFO
        self._checked = False
        self._starts: list[int] = []  # sorted device addresses of the buffers
        self._buffers: dict[int, object] = {}
        self._dirty: set[int] = set()  # written since the last launch: flush before the next
        self._stale: set[int] = set()  # the device may have written them: invalidate before a read

    # -- DRAM ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        """A buffer of its own, zeroed (nothing of an earlier user's bytes is handed out)."""
        nbytes, align_bytes = check_count("nbytes", nbytes), check_alignment(align_bytes)
        try:
            buf = self.pynq.allocate(shape=(max(int(nbytes), 1),), dtype=np.uint8)
        except (RuntimeError, MemoryError) as e:  # pynq's "BO allocation failed"
            raise OutOfMemory(self._out_of_memory(int(nbytes), e)) from None
        addr = int(buf.device_address)
        if addr % align_bytes:
            buf.freebuffer()
            raise DeviceError(f"pynq.allocate gave {addr:#x}, not {align_bytes}-byte aligned")
        if addr + buf.nbytes > DEVICE_ADDRESS_LIMIT:
            buf.freebuffer()
            raise DeviceError(
                f"buffer at {addr:#x} is above 4 GiB; the accelerator cannot reach it"
            )
        buf[:] = 0
        bisect.insort(self._starts, addr)
        self._buffers[addr] = buf
        self._dirty.add(addr)
        return addr

    def _out_of_memory(self, nbytes: int, error: Exception) -> str:
        held = sum(b.nbytes for b in self._buffers.values())
        free, total = contiguous_memory(self.meminfo)
        left = (
            f"the kernel reports {_mib(free)} of {_mib(total)} contiguous (CMA) memory free"
            if free is not None
            else f"the contiguous memory left is unknown ({self.meminfo} has no CmaFree)"
        )
        return (
            f"out of contiguous memory: cannot allocate {nbytes} bytes ({_mib(nbytes)}) for the"
            f" accelerator ({type(error).__name__}: {error}); {left}; this device holds"
            f" {len(self._buffers)} buffers of {_mib(held)}. Free buffers (dev.reset(), or close"
            " other programs and notebooks holding pynq buffers), run a smaller model or batch,"
            " or give the board more CMA (the kernel's cma= boot argument)"
        )

    def _buffer(self, addr: int, nbytes: int):
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            start = self._starts[i]
            buf = self._buffers[start]
            if addr + nbytes <= start + buf.nbytes:
                return start, buf
        raise DeviceError(f"[{addr:#x}, {addr + nbytes:#x}) is not inside one allocated buffer")

    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        addr, raw = check_count("addr", addr), host_bytes(data)
        start, buf = self._buffer(addr, raw.size)
        if start in self._stale:  # keep what the device wrote around the part we overwrite
            buf.invalidate()
            self._stale.discard(start)
        buf[addr - start : addr - start + raw.size] = raw
        self._dirty.add(start)

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        addr, nbytes = check_count("addr", addr), check_count("nbytes", nbytes)
        start, buf = self._buffer(addr, nbytes)
        if start in self._stale:
            buf.invalidate()
            self._stale.discard(start)
        return np.array(buf[addr - start : addr - start + nbytes], np.uint8)

    def reset(self) -> None:
        for buf in self._buffers.values():
            buf.freebuffer()
        self._starts, self._buffers = [], {}
        self._dirty, self._stale = set(), set()

    def scrub(self) -> None:
        """Zero every buffer in the board's memory, then free them (``alloc`` zeroes too). A
        launch's stores outside every buffer are beyond what the host can find and erase."""
        for buf in self._buffers.values():
            buf[:] = 0
            buf.flush()
        self.reset()

    def close(self) -> None:
        self.reset()

    # -- launch -------------------------------------------------------------------------------
    def check(self) -> None:
        """The ID / CONFIG_HASH registers against the host's HwConfig (once, before launching)."""
        if not self._checked:
            launching.check_id(self.port, self.config)
            self._checked = True

    def launch(self, insn_addr: int, insn_count: int) -> RunResult:
        self.check()
        for start in sorted(self._dirty):
            self._buffers[start].flush()
        self._dirty.clear()
        t0 = time.perf_counter()
        self.port.restart()
        try:
            stats = launching.launch(
                self.port,
                insn_addr,
                insn_count,
                clear_cycles=clear_cycles(self.config),
                max_cycles=self.max_cycles,
            )
        except launching.DeviceStuck as e:
            if e.outcome.status != "timeout":
                raise
            note = (
                f"deadline_s {self.deadline_s:g} s asked; stopped after"
                f" {time.perf_counter() - t0:.3f} s of wall time"
            )
            raise launching.DeviceStuck(e.outcome, note) from None
        finally:
            self._stale = set(self._buffers)
        wall_s = time.perf_counter() - t0
        return RunResult(stats=dataclasses.replace(stats, source="pynq"), wall_s=wall_s)


def clear_cycles(config: HwConfig) -> int:
    """A first wait for CTRL.CLEAR (the launch routine then polls CLEARING): the deepest buffer."""
    return max(config.uop_depth, config.inp_depth, config.wgt_depth, config.acc_depth)


DEVICE = PynqDevice
