"""One device interface for every backend: DRAM buffers, copies in and out, and launches.

A compiled program needs only this: allocate DRAM, copy tensors in, run an instruction stream
(which reads micro-ops and data from DRAM and writes results back), copy results out.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pyvta.driver.stats import Stats
from pyvta.isa import INSN_BYTES, HwConfig, Insn, encode_insns
from pyvta.isa.errors import PyvtaError


class DeviceError(PyvtaError):
    """A device cannot be opened or used as asked (unknown name, wrong config, launch failed)."""


class DeviceArgumentError(DeviceError, TypeError):
    """A ``Device`` method's argument of the wrong type or range (nothing was done)."""


def parameters(function) -> frozenset[str]:
    """The names ``function`` takes by keyword (``self`` and ``*args``/``**kwargs`` left out)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    found = inspect.signature(function).parameters.values()
    return frozenset(p.name for p in found if p.kind in kinds and p.name != "self")


def check_count(name: str, value, minimum: int = 0) -> int:
    """``value`` as an int (a Python or numpy integer, not a bool, float or string) >= minimum."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise DeviceArgumentError(
            f"{name} must be an integer (bytes or an address), got {type(value).__name__}"
            f" {value!r:.40}"
        )
    if value < minimum:
        raise DeviceArgumentError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_alignment(align_bytes) -> int:
    align = check_count("align_bytes", align_bytes, 1)
    if align & (align - 1):
        raise DeviceArgumentError(f"align_bytes must be a power of two, got {align}")
    return align


def host_bytes(data) -> np.ndarray:
    """``data`` (bytes, bytearray, memoryview or a numpy array: its little-endian bytes) as a
    1-D uint8 array; anything else is refused (a list or a number would be guessed at)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, np.uint8)
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" and not data.dtype.fields:
        return np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    what = f"a {data.dtype} array" if isinstance(data, np.ndarray) else type(data).__name__
    raise DeviceArgumentError(
        f"data must be bytes, bytearray, memoryview or a numeric numpy array, got {what}"
    )


@dataclass
class RunResult:
    """What one launch reports.

    ``stats``: the one record every backend fills (None where a backend cannot count); ``counters``:
    backend-specific extras (the simulator's functional work counters); ``wall_s``: host seconds of
    the launch; ``report``: backend-specific detail (the sim's CycleReport, ...).
    """

    stats: Stats | None
    counters: dict = field(default_factory=dict)
    wall_s: float = 0.0
    report: object | None = None

    @property
    def cycles(self) -> int | None:
        return self.stats.cycles if self.stats else None


class Device(abc.ABC):
    """A VTA device: a DRAM the host can read and write, and a launch of an instruction stream.

    Backends live in ``pyvta.driver.ops_<kind>`` (``DEVICE = <Kind>Device``) and are opened by name
    through ``pyvta.driver.open``. ``remote``: reached through a device server (``ops_tcp``),
    not a device of this host (``pyvta serve`` refuses to serve it).
    """

    remote: ClassVar[bool] = False

    def __init__(self, config: HwConfig):
        if not isinstance(config, HwConfig):
            raise DeviceArgumentError(
                f"config must be an isa.HwConfig, got {type(config).__name__} {config!r:.40}"
            )
        self.config = config

    @classmethod
    def open(cls, variant: str | None = None, **kwargs) -> Device:
        """The device for ``driver.open("<kind>[:variant]", **kwargs)``; backends with variants override."""
        if variant is not None:
            raise DeviceError(f"device {cls.__name__} has no variants (got {variant!r})")
        return cls(**kwargs)

    @classmethod
    def options(cls, variant: str | None = None) -> frozenset[str]:
        """The keyword options ``driver.open("<kind>[:variant]", ...)`` takes for this device:
        its constructor's parameters (what a command checks its device flags against)."""
        return parameters(cls.__init__)

    def reset(self) -> None:
        """Forget every allocation (the next ``alloc`` starts at the bottom of DRAM again); a
        tuner measuring many candidates on one device calls this between them."""
        raise DeviceError(f"{type(self).__name__} cannot release its allocations")

    def scrub(self) -> None:
        """Forget every allocation and zero what a previous user could read back: after it, no
        ``read`` and no launch sees a byte anyone wrote before (the device server calls it
        between clients). A backend that cannot erase its memory refuses."""
        raise DeviceError(f"{type(self).__name__} cannot erase its DRAM")

    def close(self) -> None:
        """Release what the device holds (a simulator process, a connection); idempotent."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @abc.abstractmethod
    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        """Reserve DRAM; returns the byte address (the unit of dram_base is address / elem size)."""

    @abc.abstractmethod
    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        """Copy host bytes (an array's little-endian bytes) to DRAM at ``addr``."""

    def write_const(self, addr: int, data: bytes) -> None:
        """Copy a constant (weights, micro-ops; bytes that recur across loads) to ``addr``: a
        ``write``, unless the backend can reuse what it has seen (a remote device sends each
        distinct constant once per session)."""
        self.write(addr, np.frombuffer(data, np.uint8))

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
        host_bytes(array)  # a numeric array (or bytes): checked before anything is allocated
        arr = np.ascontiguousarray(array) if isinstance(array, np.ndarray) else host_bytes(array)
        addr = self.alloc(arr.nbytes, align_bytes)
        self.write(addr, arr)
        return addr

    def run_program(self, program) -> tuple[np.ndarray, RunResult]:
        """Run a program bundle (``sim.Program``: a DRAM image from address 0, ``insn_addr``,
        ``insn_count``): overwrite DRAM from address 0 with the image, launch, read the image back.
        Returns (final image, uint8 of the image's size; the launch's result)."""
        from pyvta.sim import Program

        if not isinstance(program, Program):
            raise DeviceArgumentError(
                f"program must be a sim.Program, got {type(program).__name__}"
            )
        if program.config != self.config:
            raise DeviceError(
                f"the program is for config {program.config.tag}, the device is {self.config.tag}"
            )
        image = np.ascontiguousarray(program.dram, dtype=np.uint8)
        self.write(0, image)
        result = self.launch(program.insn_addr, program.insn_count)
        return self.read(0, image.size), result

    def run(self, insns: Sequence[Insn] | bytes) -> RunResult:
        """Write an instruction stream into DRAM and launch it."""
        if isinstance(insns, (str, np.ndarray)) or not isinstance(insns, (bytes, Sequence)):
            raise DeviceArgumentError(
                f"insns must be bytes or a sequence of isa instructions, got {type(insns).__name__}"
            )
        raw = insns if isinstance(insns, bytes) else encode_insns(insns, self.config)
        addr = self.alloc(len(raw), INSN_BYTES)
        self.write(addr, raw)
        return self.launch(addr, len(raw) // INSN_BYTES)
