"""The host-visible contract of the accelerator: its AXI4-Lite control registers, defined once.

The RTL decoder (``hw.top``), the docs (``pyvta hw regmap``), the cocotb testbench and every host
driver (``driver.launch``) take offsets and bit fields from here; none restates a shift or a mask.
All registers are 32 bits. Offsets of INSN_COUNT (0x10) and INSN_ADDR (0x18) follow VTA's fetch
block. Pure Python (no amaranth, no numpy): a board's runtime imports it.

The read-only ID and CONFIG_HASH registers let a host refuse hardware built for another ISA version
or ``HwConfig`` (``id_mismatch``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pyvta.isa.config import ISA_VERSION, HwConfig
from pyvta.isa.errors import PyvtaError
from pyvta.isa.layout import INSN_BITS

REG_BYTES = 4
REG_BITS = 8 * REG_BYTES
ADDR_BITS = 12
ID_MAGIC = 0x7A7A  # "vta" on the bus: the low half of the ID register
ACCESS = ("rw", "ro", "wo", "w1c")  # "wo": write-only pulses, read as 0; "w1c": write 1 to clear


@dataclass(frozen=True)
class BitField:
    """Bits ``[lsb + width - 1 : lsb]`` of a register."""

    name: str
    lsb: int
    width: int = 1
    description: str = ""

    @property
    def mask(self) -> int:
        """The field's bits in place (``value & mask``)."""
        return ((1 << self.width) - 1) << self.lsb

    def get(self, value: int) -> int:
        return (value >> self.lsb) & ((1 << self.width) - 1)

    def put(self, field_value: int) -> int:
        """The register bits holding ``field_value`` in this field (others zero)."""
        if not 0 <= field_value < 1 << self.width:
            raise PyvtaError(
                f"field {self.name}: {field_value} does not fit {self.width} bits"
                f" (allowed 0..{(1 << self.width) - 1})"
            )
        return field_value << self.lsb

    @property
    def bits(self) -> str:
        top = self.lsb + self.width - 1
        return f"[{self.lsb}]" if self.width == 1 else f"[{top}:{self.lsb}]"


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str
    description: str
    fields: tuple[BitField, ...] = ()

    def field(self, name: str) -> BitField:
        for f in self.fields:
            if f.name == name:
                return f
        names = ", ".join(f.name for f in self.fields) or "none"
        raise KeyError(f"register {self.name} has no field {name!r} (fields: {names})")

    def encode(self, **values: int) -> int:
        """A register value from field values (``CTRL.encode(START=1, IRQ_EN=1)``)."""
        word = 0
        for name, v in values.items():
            word |= self.field(name).put(int(v))
        return word

    def decode(self, value: int) -> dict[str, int]:
        """Field name -> value of a register word."""
        return {f.name: f.get(value) for f in self.fields}


def _bytes8(prefix: str, names: tuple[str, ...], lsb: int, what: str) -> tuple[BitField, ...]:
    return tuple(
        BitField(f"{prefix}{n.upper()}", lsb + 8 * i, 8, f"{what} {n} (saturating)")
        for i, n in enumerate(names)
    )


def _flags(prefix: str, names: tuple[str, ...], lsb: int, what: str) -> tuple[BitField, ...]:
    return tuple(
        BitField(f"{prefix}{n.upper()}", lsb + i, 1, f"{n} {what}") for i, n in enumerate(names)
    )


class Fault(enum.IntEnum):
    """Why the accelerator stopped a run at an instruction: ERROR_INDEX.KIND (0: it did not).

    Fetch checks every instruction before dispatching it (``hw.check``); the first that fails
    is not dispatched, STATUS.ERROR rises and ERROR_INDEX names it. Each kind is the simulator's
    error for that instruction (``driver.launch`` raises the same kind).
    """

    NONE = 0
    DECODE = 1
    DEP_QUEUE = 2
    STORE_PAD = 3
    OUT_OF_BOUNDS = 4

    @property
    def description(self) -> str:
        return _FAULT_TEXT[self]


_FAULT_TEXT = {
    Fault.NONE: "no fault",
    Fault.DECODE: "not a valid instruction (opcode, memory type or ALU opcode outside the ISA,"
    " or uop_bgn > uop_end)",
    Fault.DEP_QUEUE: "sets a dependency flag its module has no queue for",
    Fault.STORE_PAD: "a STORE with nonzero padding fields (allowed: 0)",
    Fault.OUT_OF_BOUNDS: "a LOAD/STORE out of bounds (SRAM rows past the end of its buffer; on the"
    " model board also DRAM past the end of memory)",
}
# ERROR_INDEX.INDEX counts 128-bit instructions of a 32-bit byte address space; KIND takes the rest.
ERROR_INDEX_BITS = REG_BITS - ((INSN_BITS // 8).bit_length() - 1)
FAULT_BITS = REG_BITS - ERROR_INDEX_BITS

UNITS = ("load", "compute", "store")  # order of the per-unit fields of QUEUES
TOKEN_QUEUES = ("l2c", "c2l", "c2s", "s2c")  # order of the fields of TOKENS (isa.DepQueue values)

REGISTERS: tuple[Register, ...] = (
    Register(
        "CTRL",
        0x00,
        "rw",
        "Control. Writing START=1 clears DONE and the counters and starts a run.",
        (
            BitField("START", 0, 1, "write 1 to start; reads 0"),
            BitField("IRQ_EN", 1, 1, "raise `irq` while DONE"),
            BitField(
                "CLEAR", 2, 1, "write 1: zero every on-chip buffer, one row per cycle; reads 0"
            ),
        ),
    ),
    Register(
        "STATUS",
        0x04,
        "w1c",
        "Status. DONE: FINISH executed and every unit idle (write 1 to clear).",
        (
            BitField("DONE", 0),
            BitField("BUSY", 1, 1, "started and not yet done"),
            BitField("CLEARING", 2, 1, "CTRL.CLEAR in progress"),
            BitField(
                "ERROR",
                3,
                1,
                "fetch stopped at a faulting instruction (ERROR_INDEX); DONE follows once every"
                " unit is idle or waits for a token; cleared by START",
            ),
        ),
    ),
    Register(
        "ID",
        0x08,
        "ro",
        f"Identification: magic 0x{ID_MAGIC:04X} and the ISA version the RTL implements.",
        (
            BitField("MAGIC", 0, 16),
            BitField("VERSION_PATCH", 16, 8),
            BitField("VERSION_MINOR", 24, 4),
            BitField("VERSION_MAJOR", 28, 4),
        ),
    ),
    Register(
        "CONFIG_HASH",
        0x0C,
        "ro",
        "The HwConfig the RTL was built for (``HwConfig.config_hash``).",
        (BitField("HASH", 0, 32),),
    ),
    Register("INSN_COUNT", 0x10, "rw", "Number of 128-bit instructions to fetch."),
    Register("INSN_ADDR", 0x18, "rw", "DRAM byte address of the first instruction (16-aligned)."),
    Register("CYCLES", 0x20, "ro", "Clock cycles from START to DONE."),
    Register("FETCHED", 0x24, "ro", "Instructions dispatched by fetch."),
    Register("LOAD_BUSY", 0x28, "ro", "Cycles the load unit executed an instruction."),
    Register("COMPUTE_BUSY", 0x2C, "ro", "Cycles the compute unit executed an instruction."),
    Register("STORE_BUSY", 0x30, "ro", "Cycles the store unit executed an instruction."),
    Register("LOAD_STALL", 0x34, "ro", "Cycles the load unit waited for a dependency token."),
    Register("COMPUTE_STALL", 0x38, "ro", "Cycles the compute unit waited for a token."),
    Register("STORE_STALL", 0x3C, "ro", "Cycles the store unit waited for a dependency token."),
    Register("GEMM_UOPS", 0x40, "ro", "GEMM micro-ops issued (resets included)."),
    Register("ALU_UOPS", 0x44, "ro", "ALU micro-ops issued."),
    Register(
        "TOKENS",
        0x48,
        "ro",
        "Debug: dependency tokens waiting in each queue.",
        _bytes8("", TOKEN_QUEUES, 0, "tokens in"),
    ),
    Register(
        "QUEUES",
        0x4C,
        "ro",
        "Debug: command queue levels and unit states.",
        _bytes8("LEVEL_", UNITS, 0, "command queue level of")
        + _flags("STALLED_", UNITS, 24, "stalled on a token")
        + _flags("IDLE_", UNITS, 27, "idle")
        + (
            BitField("FETCH_DONE", 30, 1, "fetch dispatched every instruction"),
            BitField("FINISHED", 31, 1, "compute saw FINISH"),
        ),
    ),
    Register(
        "ERROR_INDEX",
        0x50,
        "ro",
        "The first faulting instruction while STATUS.ERROR (0 otherwise).",
        (
            BitField("INDEX", 0, ERROR_INDEX_BITS, "its index in the launched stream"),
            BitField(
                "KIND",
                ERROR_INDEX_BITS,
                FAULT_BITS,
                "why: " + ", ".join(f"{f.value} {f.name}" for f in Fault),
            ),
        ),
    ),
)

BY_NAME = {r.name: r for r in REGISTERS}
# The counters a launch reads into ``driver.Stats`` (``Stats.from_registers``).
COUNTERS = (
    "CYCLES",
    "FETCHED",
    "LOAD_BUSY",
    "COMPUTE_BUSY",
    "STORE_BUSY",
    "LOAD_STALL",
    "COMPUTE_STALL",
    "STORE_STALL",
    "GEMM_UOPS",
    "ALU_UOPS",
)


def register(name: str) -> Register:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no register {name!r}; registers: {', '.join(BY_NAME)}") from None


def offset(name: str) -> int:
    return register(name).offset


def version_fields(version: str = ISA_VERSION) -> dict[str, int]:
    """ "0.0.2" -> {"VERSION_MAJOR": 0, "VERSION_MINOR": 0, "VERSION_PATCH": 2}."""
    major, minor, patch = (int(x) for x in version.split("."))
    return {"VERSION_MAJOR": major, "VERSION_MINOR": minor, "VERSION_PATCH": patch}


def id_value(version: str = ISA_VERSION) -> int:
    """What the ID register reads on RTL implementing ``version``."""
    return BY_NAME["ID"].encode(MAGIC=ID_MAGIC, **version_fields(version))


def id_mismatch(id_word: int, hash_word: int, config: HwConfig) -> str | None:
    """None when ID / CONFIG_HASH read back from a device match ``config``; else what differs."""
    fields = BY_NAME["ID"].decode(id_word)
    if fields["MAGIC"] != ID_MAGIC:
        return (
            f"ID register reads 0x{id_word:08X}: magic 0x{fields['MAGIC']:04X} is not a pyvta"
            f" accelerator's (expected 0x{ID_MAGIC:04X})"
        )
    if id_word != id_value():
        v = f"{fields['VERSION_MAJOR']}.{fields['VERSION_MINOR']}.{fields['VERSION_PATCH']}"
        return f"the hardware implements ISA {v}; this host speaks {ISA_VERSION}"
    if hash_word != config.config_hash:
        return (
            f"the hardware was built for another HwConfig (CONFIG_HASH 0x{hash_word:08X});"
            f" the host's config {config.tag} hashes to 0x{config.config_hash:08X}"
        )
    return None


def markdown() -> str:
    """The register map as a markdown table (what ``pyvta hw regmap`` prints)."""
    lines = ["| offset | name | access | description |", "|---|---|---|---|"]
    for r in REGISTERS:
        desc = r.description
        if r.fields:
            parts = [
                f"{f.bits} {f.name}" + (f": {f.description}" if f.description else "")
                for f in r.fields
            ]
            desc += " Bits: " + "; ".join(parts) + "."
        lines.append(f"| 0x{r.offset:02X} | {r.name} | {r.access} | {desc} |")
    return "\n".join(lines)
