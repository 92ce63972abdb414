"""Hardware configuration: VTA's log2 parameters and every size derived from them.

The key names are those of VTA's ``vta_config.json``; a config can be loaded from such a file.
All sizes are derived properties whose names carry their unit (``_bits``, ``_bytes``, ``_depth``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyvta.isa.errors import ConfigError

ISA_VERSION = "0.0.2"

# (key, lowest, highest) for every log2 parameter: what pyvta accepts.
_LOG_RANGES: dict[str, tuple[int, int]] = {
    "LOG_INP_WIDTH": (3, 3),
    "LOG_WGT_WIDTH": (3, 3),
    "LOG_ACC_WIDTH": (5, 5),
    "LOG_BATCH": (0, 4),
    "LOG_BLOCK": (1, 6),
    "LOG_UOP_BUFF_SIZE": (4, 20),
    "LOG_INP_BUFF_SIZE": (4, 24),
    "LOG_WGT_BUFF_SIZE": (4, 24),
    "LOG_ACC_BUFF_SIZE": (4, 24),
    "LOG_BUS_WIDTH": (5, 9),
}
_WIDTH_NOTE = {
    "LOG_INP_WIDTH": "pyvta supports int8 inputs only",
    "LOG_WGT_WIDTH": "pyvta supports int8 weights only",
    "LOG_ACC_WIDTH": "pyvta supports int32 accumulators only",
}
# Keys of VTA's config JSON that describe the build, not the hardware shape; accepted and kept.
_INFO_KEYS = ("TARGET", "HW_VER")


@dataclass(frozen=True)
class HwConfig:
    """A VTA hardware configuration (defaults: the PYNQ-Z1 build, tag ``1x16_i8w8a32_15_15_18_17``).

    LOG_BUS_WIDTH is the log2 of the AXI data width in bits (6: a 64-bit port), used by the DRAM
    timing model and the RTL; it does not change the instruction encoding.
    """

    LOG_INP_WIDTH: int = 3
    LOG_WGT_WIDTH: int = 3
    LOG_ACC_WIDTH: int = 5
    LOG_BATCH: int = 0
    LOG_BLOCK: int = 4
    LOG_UOP_BUFF_SIZE: int = 15
    LOG_INP_BUFF_SIZE: int = 15
    LOG_WGT_BUFF_SIZE: int = 18
    LOG_ACC_BUFF_SIZE: int = 17
    LOG_BUS_WIDTH: int = 6
    TARGET: str = "sim"
    HW_VER: str = ISA_VERSION

    def __post_init__(self) -> None:
        for key, (lo, hi) in _LOG_RANGES.items():
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{key} must be an int, got {value!r}")
            if not lo <= value <= hi:
                note = _WIDTH_NOTE.get(key, "")
                allowed = f"{lo}" if lo == hi else f"{lo}..{hi}"
                raise ConfigError(
                    f"{key} = {value} is out of range (allowed: {allowed})"
                    + (f"; {note}" if note else "")
                )
        if self.HW_VER != ISA_VERSION:
            raise ConfigError(f"HW_VER {self.HW_VER!r} is not supported (allowed: {ISA_VERSION!r})")
        for name in ("uop", "inp", "wgt", "acc"):
            if getattr(self, f"{name}_depth") < 1:
                raise ConfigError(
                    f"LOG_{name.upper()}_BUFF_SIZE = {getattr(self, f'LOG_{name.upper()}_BUFF_SIZE')}"
                    f" is smaller than one {name} element ({getattr(self, f'{name}_elem_bytes')} bytes)"
                )
        # The instruction and micro-op layouts must fit their words; building them checks that.
        from pyvta.isa.layout import check_config_fits

        check_config_fits(self)

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> HwConfig:
        """Build from a VTA-style config dict; unknown keys are an error naming the allowed ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown config keys {unknown}; allowed keys: {sorted(known)}")
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> HwConfig:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config is not valid JSON: {exc}") from exc
        if not isinstance(values, dict):
            raise ConfigError(f"config JSON must be an object, got {type(values).__name__}")
        return cls.from_dict(values)

    @classmethod
    def load(cls, path: str | Path) -> HwConfig:
        """Load a config from a JSON file such as VTA's ``vta_config.json``."""
        return cls.from_json(Path(path).read_text())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        """The config as JSON with sorted keys (``indent``: pretty-printed, as a file to edit)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent)

    # ---- element shapes -----------------------------------------------------------------------

    @property
    def batch(self) -> int:
        return 1 << self.LOG_BATCH

    @property
    def block_in(self) -> int:
        return 1 << self.LOG_BLOCK

    @property
    def block_out(self) -> int:
        return 1 << self.LOG_BLOCK

    @property
    def inp_width_bits(self) -> int:
        return 1 << self.LOG_INP_WIDTH

    @property
    def wgt_width_bits(self) -> int:
        return 1 << self.LOG_WGT_WIDTH

    @property
    def acc_width_bits(self) -> int:
        return 1 << self.LOG_ACC_WIDTH

    @property
    def out_width_bits(self) -> int:
        return self.inp_width_bits

    @property
    def bus_width_bits(self) -> int:
        return 1 << self.LOG_BUS_WIDTH

    @property
    def bus_width_bytes(self) -> int:
        return self.bus_width_bits // 8

    # ---- element sizes (one SRAM row) ---------------------------------------------------------

    @property
    def uop_elem_bytes(self) -> int:
        return 4

    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width_bits // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width_bits // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width_bits // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.out_width_bits // 8

    @property
    def insn_bytes(self) -> int:
        return 16

    # ---- buffer sizes -------------------------------------------------------------------------

    @property
    def uop_buff_bytes(self) -> int:
        return 1 << self.LOG_UOP_BUFF_SIZE

    @property
    def inp_buff_bytes(self) -> int:
        return 1 << self.LOG_INP_BUFF_SIZE

    @property
    def wgt_buff_bytes(self) -> int:
        return 1 << self.LOG_WGT_BUFF_SIZE

    @property
    def acc_buff_bytes(self) -> int:
        return 1 << self.LOG_ACC_BUFF_SIZE

    @property
    def out_buff_bytes(self) -> int:
        return self.acc_depth * self.out_elem_bytes

    @property
    def uop_depth(self) -> int:
        return self.uop_buff_bytes // self.uop_elem_bytes

    @property
    def inp_depth(self) -> int:
        return self.inp_buff_bytes // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return self.wgt_buff_bytes // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return self.acc_buff_bytes // self.acc_elem_bytes

    @property
    def out_depth(self) -> int:
        return self.acc_depth

    @property
    def log_uop_depth(self) -> int:
        return _log2(self.uop_depth)

    @property
    def log_inp_depth(self) -> int:
        return _log2(self.inp_depth)

    @property
    def log_wgt_depth(self) -> int:
        return _log2(self.wgt_depth)

    @property
    def log_acc_depth(self) -> int:
        return _log2(self.acc_depth)

    # ---- throughput ---------------------------------------------------------------------------

    @property
    def gemm_macs_per_cycle(self) -> int:
        """MACs of one GEMM micro-op: a BATCH x BLOCK_IN by BLOCK_IN x BLOCK_OUT product."""
        return self.batch * self.block_in * self.block_out

    @property
    def tag(self) -> str:
        """The name VTA gives bitstreams of this config, e.g. ``1x16_i8w8a32_15_15_18_17``."""
        return (
            f"{self.batch}x{self.block_in}_i{self.inp_width_bits}w{self.wgt_width_bits}"
            f"a{self.acc_width_bits}_{self.LOG_UOP_BUFF_SIZE}_{self.LOG_INP_BUFF_SIZE}"
            f"_{self.LOG_WGT_BUFF_SIZE}_{self.LOG_ACC_BUFF_SIZE}"
        )

    @property
    def config_hash(self) -> int:
        """32-bit hash of the hardware shape (the log2 parameters; not TARGET): the RTL's
        CONFIG_HASH register, so a host can refuse hardware built for another config."""
        shape = {key: getattr(self, key) for key in _LOG_RANGES}
        digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def depth_of(self, mem: str) -> int:
        """SRAM depth (rows) of a buffer named 'uop', 'inp', 'wgt', 'acc' or 'out'."""
        return getattr(self, f"{mem}_depth")

    def elem_bytes_of(self, mem: str) -> int:
        return getattr(self, f"{mem}_elem_bytes")


def _log2(n: int) -> int:
    return max(n.bit_length() - 1, 0)


DEFAULT_CONFIG = HwConfig()
