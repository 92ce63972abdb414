"""Bit layouts of the 128-bit instruction words and the 32-bit micro-op.

Each layout is a list of 64-bit words, each a list of (field name, width in bits) packed from the
least significant bit up; no field crosses a word boundary (the VTA rule). Widths that depend on the
hardware config (SRAM index bits, micro-op buffer bits) are derived from ``HwConfig`` here, and only
here: ``hw/`` builds its Amaranth layouts from these objects.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyvta.isa.errors import ConfigError, FieldRangeError

if TYPE_CHECKING:
    from pyvta.isa.config import HwConfig

# Fixed widths of VTA ISA v0.0.2 (hw_spec.h).
OPCODE_BITS = 3
MEMOP_ID_BITS = 3
MEMOP_SRAM_ADDR_BITS = 16
MEMOP_DRAM_ADDR_BITS = 32
MEMOP_SIZE_BITS = 16
MEMOP_STRIDE_BITS = 16
MEMOP_PAD_BITS = 4
LOOP_ITER_BITS = 14
ALU_OPCODE_BITS = 3
ALU_IMM_BITS = 16
INSN_WORD_BITS = 64
INSN_BITS = 128
UOP_BITS = 32

_HEADER = [
    ("opcode", OPCODE_BITS),
    ("pop_prev_dep", 1),
    ("pop_next_dep", 1),
    ("push_prev_dep", 1),
    ("push_next_dep", 1),
]


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width_bits: int
    signed: bool = False

    @property
    def msb(self) -> int:
        return self.lsb + self.width_bits - 1

    @property
    def min_value(self) -> int:
        return -(1 << (self.width_bits - 1)) if self.signed else 0

    @property
    def max_value(self) -> int:
        return (1 << (self.width_bits - 1)) - 1 if self.signed else (1 << self.width_bits) - 1

    @property
    def mask(self) -> int:
        return (1 << self.width_bits) - 1


class Layout:
    """Named bit fields over a word of ``total_bits``, built from per-64-bit-word field lists."""

    def __init__(
        self,
        name: str,
        words: list[list[tuple[str, int]]],
        total_bits: int,
        signed: frozenset[str] = frozenset(),
    ):
        self.name = name
        self.total_bits = total_bits
        fields: dict[str, Field] = {}
        word_bits = min(total_bits, INSN_WORD_BITS)
        for w, word in enumerate(words):
            lsb = w * word_bits
            for fname, width in word:
                fields[fname] = Field(fname, lsb, width, fname in signed)
                lsb += width
            used = lsb - w * word_bits
            if used > word_bits:
                raise ConfigError(
                    f"{name} fields of word {w} need {used} bits, more than the {word_bits}-bit word"
                    f" ({', '.join(f'{n}:{b}' for n, b in word)})"
                )
        self.fields = fields

    def __iter__(self):
        return iter(self.fields.values())

    def __getitem__(self, name: str) -> Field:
        return self.fields[name]

    def pack(self, values: Mapping[str, int], owner: str | None = None) -> int:
        """Pack field values into an int; a value outside its field raises FieldRangeError."""
        word = 0
        for f in self.fields.values():
            value = int(values.get(f.name, 0))
            if not f.min_value <= value <= f.max_value:
                raise FieldRangeError(
                    f"{owner or self.name}.{f.name} = {value} does not fit its {f.width_bits}-bit"
                    f" field (allowed {f.min_value}..{f.max_value})"
                )
            word |= (value & f.mask) << f.lsb
        return word

    def unpack(self, word: int) -> dict[str, int]:
        out = {}
        for f in self.fields.values():
            value = (word >> f.lsb) & f.mask
            if f.signed and value >> (f.width_bits - 1):
                value -= 1 << f.width_bits
            out[f.name] = value
        return out

    def describe(self) -> str:
        """A table of the fields, most significant bit first (for docs and disassembly help)."""
        rows = [f"{self.name} ({self.total_bits} bits)"]
        for f in sorted(self.fields.values(), key=lambda f: -f.lsb):
            rows.append(f"  [{f.msb:3d}:{f.lsb:3d}] {f.width_bits:2d}  {f.name}")
        return "\n".join(rows)


def _bits(depth_log: int) -> int:
    return max(depth_log, 1)


@functools.lru_cache(maxsize=64)
def mem_layout(cfg: HwConfig) -> Layout:
    """LOAD / STORE."""
    return Layout(
        "MemInsn",
        [
            _HEADER
            + [
                ("memory_type", MEMOP_ID_BITS),
                ("sram_base", MEMOP_SRAM_ADDR_BITS),
                ("dram_base", MEMOP_DRAM_ADDR_BITS),
            ],
            [
                ("y_size", MEMOP_SIZE_BITS),
                ("x_size", MEMOP_SIZE_BITS),
                ("x_stride", MEMOP_STRIDE_BITS),
                ("y_pad_0", MEMOP_PAD_BITS),
                ("y_pad_1", MEMOP_PAD_BITS),
                ("x_pad_0", MEMOP_PAD_BITS),
                ("x_pad_1", MEMOP_PAD_BITS),
            ],
        ],
        INSN_BITS,
    )


OVERLAP_DOC = """The ``overlap`` bit of GEMM and ALU instructions (a pyvta extension of VTA v0.0.2).

The compute module has two pipes, GEMM (resets included) and ALU, each in order. An instruction
with ``overlap = 0`` starts once both pipes have finished every earlier instruction, as in v0.0.2.
With ``overlap = 1`` it need not wait for the most recent earlier instruction of the other pipe
(only for those before it), so one virtual thread's epilogue runs beside the other's GEMMs. The
program promises that the two touch disjoint ACC/OUT rows; results are then those of program
order, and a broken promise is a race (``sim --check-races`` names it). Programs with the bit 0
keep their v0.0.2 meaning and timing.
"""


def _loop_header(cfg: HwConfig) -> list[tuple[str, int]]:
    return _HEADER + [
        ("reset_reg", 1),
        ("uop_bgn", _bits(cfg.log_uop_depth)),
        ("uop_end", _bits(cfg.log_uop_depth) + 1),
        ("iter_out", LOOP_ITER_BITS),
        ("iter_in", LOOP_ITER_BITS),
        # pyvta extension (0 in VTA v0.0.2 programs, where this bit is a gap): see OVERLAP_DOC.
        ("overlap", 1),
    ]


@functools.lru_cache(maxsize=64)
def gemm_layout(cfg: HwConfig) -> Layout:
    acc, inp, wgt = _bits(cfg.log_acc_depth), _bits(cfg.log_inp_depth), _bits(cfg.log_wgt_depth)
    return Layout(
        "GemmInsn",
        [
            _loop_header(cfg),
            [
                ("dst_factor_out", acc),
                ("dst_factor_in", acc),
                ("src_factor_out", inp),
                ("src_factor_in", inp),
                ("wgt_factor_out", wgt),
                ("wgt_factor_in", wgt),
            ],
        ],
        INSN_BITS,
    )


@functools.lru_cache(maxsize=64)
def alu_layout(cfg: HwConfig) -> Layout:
    acc = _bits(cfg.log_acc_depth)
    return Layout(
        "AluInsn",
        [
            _loop_header(cfg),
            [
                ("dst_factor_out", acc),
                ("dst_factor_in", acc),
                ("src_factor_out", acc),
                ("src_factor_in", acc),
                ("alu_opcode", ALU_OPCODE_BITS),
                ("use_imm", 1),
                ("imm", ALU_IMM_BITS),
            ],
        ],
        INSN_BITS,
        signed=frozenset({"imm"}),
    )


@functools.lru_cache(maxsize=64)
def finish_layout(cfg: HwConfig) -> Layout:
    return Layout("FinishInsn", [_HEADER], INSN_BITS)


@functools.lru_cache(maxsize=64)
def uop_layout(cfg: HwConfig) -> Layout:
    """Micro-op: dst (ACC index), src (INP index for GEMM, ACC index for ALU), wgt (WGT index)."""
    src = max(_bits(cfg.log_inp_depth), _bits(cfg.log_acc_depth))
    return Layout(
        "Uop",
        [[("dst", _bits(cfg.log_acc_depth)), ("src", src), ("wgt", _bits(cfg.log_wgt_depth))]],
        UOP_BITS,
    )


def check_config_fits(cfg: HwConfig) -> None:
    """Raise ConfigError if the config's index widths do not fit the instruction formats."""
    for make in (mem_layout, gemm_layout, alu_layout, finish_layout, uop_layout):
        make(cfg)
    for mem in ("inp", "wgt", "acc", "uop"):
        depth = cfg.depth_of(mem)
        if depth > 1 << MEMOP_SRAM_ADDR_BITS:
            raise ConfigError(
                f"{mem} buffer depth {depth} exceeds the {MEMOP_SRAM_ADDR_BITS}-bit sram_base field"
                f" (max {1 << MEMOP_SRAM_ADDR_BITS} rows)"
            )
