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
from pyvta.sim.errors import ProgramError

BUNDLE_KEYS = ("dram", "insn_addr", "insn_count", "config")


@dataclass
class Program:
    dram: np.ndarray
    insn_addr: int
    insn_count: int
    config: HwConfig = field(default_factory=HwConfig)

    def __post_init__(self) -> None:
        self.dram = np.ascontiguousarray(self.dram, dtype=np.uint8).reshape(-1)
        self.insn_addr = int(self.insn_addr)
        self.insn_count = int(self.insn_count)
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
        try:
            with np.load(path, allow_pickle=False) as z:
                missing = [k for k in BUNDLE_KEYS[:3] if k not in z.files]
                if missing:
                    raise ProgramError(
                        f"{path}: bundle lacks keys {missing} (needs {list(BUNDLE_KEYS[:3])},"
                        " optional 'config')"
                    )
                cfg = HwConfig.from_json(str(z["config"])) if "config" in z.files else HwConfig()
                return cls(z["dram"], int(z["insn_addr"]), int(z["insn_count"]), cfg)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            if isinstance(exc, ProgramError):
                raise
            raise ProgramError(f"{path}: not a readable program bundle (.npz): {exc}") from exc
