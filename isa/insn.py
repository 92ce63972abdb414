"""Instruction and micro-op types, with encode/decode to their bit formats.

Field names are those of the layouts in ``isa.layout`` (and of VTA's hw_spec.h structs).
Values are checked against their field widths when encoded, so a value that does not fit
raises ``FieldRangeError`` naming the field and its range.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pyvta.isa.errors import DecodeError, FieldRangeError
from pyvta.isa.layout import alu_layout, finish_layout, gemm_layout, mem_layout, uop_layout
from pyvta.isa.opcodes import (
    DEP_FLAG_NAMES,
    DEP_QUEUES,
    LOAD_MODULE,
    STORE_MEM_TYPES,
    AluOp,
    MemType,
    Module,
    Opcode,
    clip_bounds,
)

if TYPE_CHECKING:
    from pyvta.isa.config import HwConfig
    from pyvta.isa.layout import Layout


@dataclass(frozen=True)
class _Insn:
    """Common header: the four dependency-token flags."""

    pop_prev_dep: bool = False
    pop_next_dep: bool = False
    push_prev_dep: bool = False
    push_next_dep: bool = False

    opcode: ClassVar[Opcode]

    @property
    def module(self) -> Module:
        """The module whose command queue fetch dispatches this instruction to."""
        return Module.COMPUTE

    def layout(self, cfg: HwConfig) -> Layout:
        raise NotImplementedError

    def fields(self) -> dict[str, int]:
        values = {f.name: int(getattr(self, f.name)) for f in dataclasses.fields(self)}
        values["opcode"] = int(self.opcode)
        return values

    def encode(self, cfg: HwConfig) -> int:
        """The 128-bit instruction word as an int (bit 0 = LSB of the first 64-bit word)."""
        return self.layout(cfg).pack(self.fields(), owner=type(self).__name__)

    def with_deps(self, **flags: bool):
        return dataclasses.replace(self, **flags)

    def deps_text(self) -> str:
        names = []
        queues = DEP_QUEUES[self.module]
        for flag, queue in zip(DEP_FLAG_NAMES, queues, strict=True):
            if getattr(self, flag):
                verb = "pop" if flag.startswith("pop") else "push"
                names.append(f"{verb}:{queue.value if queue else flag + '(illegal)'}")
        return f" [{' '.join(names)}]" if names else ""


@dataclass(frozen=True)
class MemInsn(_Insn):
    """LOAD or STORE: a 2-D strided, optionally zero-padded DMA between DRAM and an SRAM.

    ``sram_base``, ``dram_base``, ``x_size`` and ``x_stride`` count elements (SRAM rows) of the
    memory type: ``dram_base`` is the DRAM byte address divided by the element size.
    """

    is_store: bool = False
    memory_type: MemType = MemType.INP
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0

    @property
    def opcode(self) -> Opcode:  # type: ignore[override]
        return Opcode.STORE if self.is_store else Opcode.LOAD

    @property
    def module(self) -> Module:
        if self.is_store:
            return Module.STORE
        return LOAD_MODULE.get(self.memory_type, Module.LOAD)

    def layout(self, cfg: HwConfig) -> Layout:
        return mem_layout(cfg)

    def fields(self) -> dict[str, int]:
        values = super().fields()
        del values["is_store"]
        return values

    def __str__(self) -> str:
        name = "STORE" if self.is_store else "LOAD"
        pads = (self.y_pad_0, self.y_pad_1, self.x_pad_0, self.x_pad_1)
        pad = f" pad(y={pads[0]},{pads[1]} x={pads[2]},{pads[3]})" if any(pads) else ""
        return (
            f"{name} {self.memory_type.name} sram={self.sram_base} dram={self.dram_base}"
            f" y={self.y_size} x={self.x_size} stride={self.x_stride}{pad}{self.deps_text()}"
        )


def Load(memory_type: MemType, **kw) -> MemInsn:  # noqa: N802 - reads as an instruction name
    return MemInsn(is_store=False, memory_type=memory_type, **kw)


def Store(**kw) -> MemInsn:  # noqa: N802
    kw.setdefault("memory_type", MemType.OUT)
    return MemInsn(is_store=True, **kw)


@dataclass(frozen=True)
class _LoopInsn(_Insn):
    """GEMM and ALU share the two-level micro-op loop header."""

    reset_reg: bool = False
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 0
    iter_in: int = 0
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    overlap: bool = False  # pyvta extension: may run beside the other pipe (layout.OVERLAP_DOC)

    def encode(self, cfg: HwConfig) -> int:
        word = super().encode(cfg)
        if self.uop_bgn > self.uop_end:
            raise FieldRangeError(
                f"{type(self).__name__}.uop_bgn {self.uop_bgn} > uop_end {self.uop_end}: the"
                " micro-op range [uop_bgn, uop_end) is reversed (allowed: uop_bgn <= uop_end)"
            )
        return word

    def loops_text(self) -> str:
        return (
            f"uop[{self.uop_bgn}:{self.uop_end}] out={self.iter_out} in={self.iter_in}"
            f" dst=({self.dst_factor_out},{self.dst_factor_in})"
            f" src=({self.src_factor_out},{self.src_factor_in})"
            + (" overlap" if self.overlap else "")
        )


@dataclass(frozen=True)
class GemmInsn(_LoopInsn):
    """ACC[dst] += INP[src] x WGT[wgt]^T over the micro-op loops (ACC[dst] = 0 if reset_reg)."""

    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    opcode: ClassVar[Opcode] = Opcode.GEMM

    def layout(self, cfg: HwConfig) -> Layout:
        return gemm_layout(cfg)

    def __str__(self) -> str:
        name = "GEMM.reset" if self.reset_reg else "GEMM"
        return (
            f"{name} {self.loops_text()} wgt=({self.wgt_factor_out},{self.wgt_factor_in})"
            f"{self.deps_text()}"
        )


@dataclass(frozen=True)
class AluInsn(_LoopInsn):
    """ACC[dst] = op(ACC[dst], imm if use_imm else ACC[src]) lane by lane (CLIP: opcodes.CLIP_DOC).

    ``reset_reg`` is kept for bit compatibility; the ALU ignores it.
    """

    alu_opcode: AluOp = AluOp.ADD
    use_imm: bool = False
    imm: int = 0
    opcode: ClassVar[Opcode] = Opcode.ALU

    def layout(self, cfg: HwConfig) -> Layout:
        return alu_layout(cfg)

    def __str__(self) -> str:
        operand = f" imm={self.imm}" if self.use_imm else ""
        if self.use_imm and self.alu_opcode is AluOp.CLIP:
            lo, hi = clip_bounds(self.imm)
            operand += f" (lo={lo} hi={hi})"
        return f"ALU.{self.alu_opcode.name}{operand} {self.loops_text()}{self.deps_text()}"


@dataclass(frozen=True)
class FinishInsn(_Insn):
    """Ends the program: the compute module raises ``done`` when it executes it."""

    opcode: ClassVar[Opcode] = Opcode.FINISH

    def layout(self, cfg: HwConfig) -> Layout:
        return finish_layout(cfg)

    def __str__(self) -> str:
        return f"FINISH{self.deps_text()}"


Insn = MemInsn | GemmInsn | AluInsn | FinishInsn


def _enum(enum_type, value: int, what: str, index: int | None):
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(f"{m.name}={m.value}" for m in enum_type)
        raise DecodeError(
            f"{_where(index)}{what} {value} is not valid (allowed: {allowed})"
        ) from None


def _where(index: int | None) -> str:
    return f"instruction {index}: " if index is not None else ""


def decode(word: int, cfg: HwConfig, index: int | None = None) -> Insn:
    """Decode a 128-bit instruction word; an invalid opcode or memory type raises DecodeError.

    Bits in unused gaps are ignored, as the hardware does.
    """
    if not 0 <= word < 1 << 128:
        raise DecodeError(f"{_where(index)}word {word:#x} is not a 128-bit value")
    opcode = _enum(Opcode, word & 0x7, "opcode", index)
    if opcode in (Opcode.LOAD, Opcode.STORE):
        v = mem_layout(cfg).unpack(word)
        mem = _enum(MemType, v.pop("memory_type"), "memory_type", index)
        is_store = opcode is Opcode.STORE
        if is_store and mem not in STORE_MEM_TYPES:
            raise DecodeError(
                f"{_where(index)}STORE of memory type {mem.name} is not valid"
                f" (allowed: {', '.join(m.name for m in STORE_MEM_TYPES)})"
            )
        if not is_store and mem not in LOAD_MODULE:
            raise DecodeError(
                f"{_where(index)}LOAD of memory type {mem.name} is not valid"
                f" (allowed: {', '.join(m.name for m in LOAD_MODULE)})"
            )
        del v["opcode"]
        return MemInsn(is_store=is_store, memory_type=mem, **_flags(v))
    if opcode is Opcode.GEMM:
        v = gemm_layout(cfg).unpack(word)
        del v["opcode"]
        _check_uop_range(v, index)
        return GemmInsn(**_flags(v))
    if opcode is Opcode.ALU:
        v = alu_layout(cfg).unpack(word)
        del v["opcode"]
        _check_uop_range(v, index)
        v["alu_opcode"] = _enum(AluOp, v["alu_opcode"], "alu_opcode", index)
        return AluInsn(**_flags(v))
    v = finish_layout(cfg).unpack(word)
    del v["opcode"]
    return FinishInsn(**_flags(v))


def _check_uop_range(v: dict[str, int], index: int | None) -> None:
    if v["uop_bgn"] > v["uop_end"]:
        raise DecodeError(
            f"{_where(index)}uop_bgn {v['uop_bgn']} > uop_end {v['uop_end']}: a reversed"
            " micro-op range (allowed: uop_bgn <= uop_end)"
        )


_BOOL_FIELDS = frozenset(DEP_FLAG_NAMES) | {"reset_reg", "use_imm", "overlap"}


def _flags(values: dict[str, int]) -> dict[str, int | bool]:
    return {k: bool(v) if k in _BOOL_FIELDS else v for k, v in values.items()}


@dataclass(frozen=True)
class Uop:
    """A micro-op: the base SRAM indices one GEMM/ALU loop iteration adds its factors to."""

    dst: int = 0
    src: int = 0
    wgt: int = 0

    def encode(self, cfg: HwConfig) -> int:
        return uop_layout(cfg).pack({"dst": self.dst, "src": self.src, "wgt": self.wgt}, "Uop")

    @classmethod
    def decode(cls, word: int, cfg: HwConfig) -> Uop:
        if not 0 <= word < 1 << 32:
            raise DecodeError(f"micro-op word {word:#x} is not a 32-bit value")
        return cls(**uop_layout(cfg).unpack(word))

    def __str__(self) -> str:
        return f"uop(dst={self.dst} src={self.src} wgt={self.wgt})"
