"""Program bundles: what the hardware is launched with.

A program is a DRAM image, the byte address of the first instruction and the instruction count.
On disk it is an ``.npz`` with keys ``dram`` (uint8, 1-D), ``insn_addr``, ``insn_count`` and
``config`` (the HwConfig as a JSON string; optional, the default config if absent).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyvta.isa import INSN_BYTES, HwConfig, Insn, decode_insns
from pyvta.isa.errors import PyvtaError
from pyvta.sim.errors import ProgramError

BUNDLE_KEYS = ("dram", "insn_addr", "insn_count", "config")


@dataclass
class Program:
    dram: np.ndarray
    insn_addr: int
    insn_count: int
    config: HwConfig = field(default_factory=HwConfig)

    def __post_init__(self) -> None:
        self.dram = _dram_image(self.dram)
        self.insn_addr = _integer("insn_addr", self.insn_addr)
        self.insn_count = _integer("insn_count", self.insn_count)
        if not isinstance(self.config, HwConfig):
            raise ProgramError(f"config is a {type(self.config).__name__} (allowed: HwConfig)")
        if self.insn_count < 0:
            raise ProgramError(f"insn_count must be >= 0, got {self.insn_count}")
        if self.insn_addr < 0 or self.insn_addr % INSN_BYTES:
            raise ProgramError(
                f"insn_addr {self.insn_addr:#x} must be a non-negative multiple of {INSN_BYTES}"
            )
        end = self.insn_addr + self.insn_count * INSN_BYTES
        if end > self.dram.size:
            raise ProgramError(
                f"instructions [{self.insn_addr:#x}, {end:#x}) run past the end of DRAM"
                f" ({self.dram.size} bytes)"
            )

    def insn_bytes(self) -> np.ndarray:
        return self.dram[self.insn_addr : self.insn_addr + self.insn_count * INSN_BYTES]

    def insns(self) -> list[Insn]:
        """Decode the instruction stream (DecodeError names the first bad index)."""
        return decode_insns(self.insn_bytes(), self.config)

    def save(self, path: str | Path, **extra: np.ndarray) -> None:
        np.savez_compressed(
            path,
            dram=self.dram,
            insn_addr=np.int64(self.insn_addr),
            insn_count=np.int64(self.insn_count),
            config=np.array(self.config.to_json()),
            **extra,
        )

    @classmethod
    def load(cls, path: str | Path) -> Program:
        if Path(path).is_file() and not zipfile.is_zipfile(path):
            raise ProgramError(f"{path}: not a readable program bundle (not an .npz archive)")
        try:
            with np.load(path, allow_pickle=False) as z:
                missing = [k for k in BUNDLE_KEYS[:3] if k not in z.files]
                if missing:
                    hint = (
                        "; it looks like a compiled model, which pyvta run takes"
                        if "__graph__" in z.files
                        else ""
                    )
                    raise ProgramError(
                        f"{path}: bundle lacks keys {missing} (needs {list(BUNDLE_KEYS[:3])},"
                        f" optional 'config'){hint}"
                    )
                cfg = HwConfig.from_json(str(z["config"])) if "config" in z.files else HwConfig()
                return cls(z["dram"], _scalar(z, "insn_addr"), _scalar(z, "insn_count"), cfg)
        except PyvtaError as exc:
            if str(path) in str(exc):
                raise
            raise type(exc)(f"{path}: {exc}") from exc
        except Exception as exc:  # a damaged file: zipfile and numpy's header parser raise anything
            raise ProgramError(f"{path}: not a readable program bundle (.npz): {exc}") from exc


def _dram_image(dram) -> np.ndarray:
    """A DRAM image is bytes: a 1-D uint8 array (or bytes / bytearray); anything else would be
    silently reinterpreted."""
    if isinstance(dram, bytes | bytearray | memoryview):
        return np.frombuffer(bytes(dram), np.uint8).copy()
    if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
        got = f"{dram.dtype}{list(dram.shape)}" if isinstance(dram, np.ndarray) else type(dram)
        raise ProgramError(
            f"dram must be a 1-D uint8 array (bytes), got {got}; pack other types with"
            " .view(np.uint8) / .tobytes() first"
        )
    return np.ascontiguousarray(dram)


def _integer(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ProgramError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _scalar(z, key: str) -> int:
    arr = z[key]
    if arr.shape != () or arr.dtype.kind not in "iu":
        raise ProgramError(f"{key} must be an integer scalar, got {arr.dtype}{list(arr.shape)}")
    return int(arr)
