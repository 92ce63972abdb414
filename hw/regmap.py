"""The AXI4-Lite control register map: defined once here; the RTL decoder and the docs come from it.

All registers are 32 bits. Offsets of INSN_COUNT (0x10) and INSN_ADDR (0x18) follow VTA's fetch block.
"""

from __future__ import annotations

from dataclasses import dataclass

REG_BYTES = 4
ADDR_BITS = 12


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str  # "rw", "ro", "wo" (write-only pulses read as 0), "w1c"
    description: str
    bits: tuple[tuple[int, str], ...] = ()


REGISTERS: tuple[Register, ...] = (
    Register(
        "CTRL",
        0x00,
        "rw",
        "Control. Writing START=1 clears DONE and the counters and starts a run.",
        (
            (0, "START (write 1 to start; reads 0)"),
            (1, "IRQ_EN: raise `irq` while DONE"),
            (2, "CLEAR (write 1: zero every on-chip buffer, one row per cycle; reads 0)"),
        ),
    ),
    Register(
        "STATUS",
        0x04,
        "w1c",
        "Status. DONE: FINISH executed and every unit idle (write 1 to clear).",
        ((0, "DONE"), (1, "BUSY: started and not yet done"), (2, "CLEARING")),
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
    Register("GEMM_UOPS", 0x40, "ro", "GEMM micro-ops issued."),
    Register("ALU_UOPS", 0x44, "ro", "ALU micro-ops issued."),
    Register(
        "TOKENS",
        0x48,
        "ro",
        "Debug: dependency tokens waiting, 8 bits each (saturating).",
        ((0, "l2c [7:0]"), (8, "c2l [15:8]"), (16, "c2s [23:16]"), (24, "s2c [31:24]")),
    ),
    Register(
        "QUEUES",
        0x4C,
        "ro",
        "Debug: command queue levels (8 bits each, saturating) and unit states.",
        (
            (0, "load queue [7:0]"),
            (8, "compute queue [15:8]"),
            (16, "store queue [23:16]"),
            (24, "load/compute/store stalled on a token [26:24]"),
            (27, "load/compute/store idle [29:27]"),
            (30, "fetch done"),
            (31, "compute saw FINISH"),
        ),
    ),
)

BY_NAME = {r.name: r for r in REGISTERS}


def offset(name: str) -> int:
    try:
        return BY_NAME[name].offset
    except KeyError:
        raise KeyError(f"no register {name!r}; registers: {', '.join(BY_NAME)}") from None


def markdown() -> str:
    """The register map as a markdown table (what ``pyvta hw regmap`` prints)."""
    lines = [
        "| offset | name | access | description |",
        "|---|---|---|---|",
    ]
    for r in REGISTERS:
        desc = r.description
        if r.bits:
            desc += " Bits: " + "; ".join(f"[{b}] {text}" for b, text in r.bits) + "."
        lines.append(f"| 0x{r.offset:02X} | {r.name} | {r.access} | {desc} |")
    return "\n".join(lines)
