"""Opcode numbers, memory types and ALU operations (VTA ISA v0.0.2, and pyvta's CLIP extension).

This module is the only place in pyvta that knows these numbers.
"""

from __future__ import annotations

import enum

from pyvta.isa.errors import FieldRangeError


class Opcode(enum.IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(enum.IntEnum):
    """Which buffer a LOAD/STORE moves: the memory_type field."""

    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5

    @property
    def sram(self) -> str:
        """Name of the on-chip buffer written (LOAD) or read (STORE): uop, wgt, inp, acc, out."""
        return "acc" if self is MemType.ACC_8BIT else self.name.lower()

    @property
    def dram_elem(self) -> str:
        """Name of the buffer whose element size is the DRAM unit of this memory type.

        An ACC_8BIT load reads int8 rows from DRAM, so its DRAM element is an OUT row.
        """
        return "out" if self is MemType.ACC_8BIT else self.sram


class AluOp(enum.IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4
    CLIP = 5  # pyvta extension (CLIP_DOC); 5..7 are unused in VTA v0.0.2


CLIP_BOUND_BITS = 8  # each of CLIP's two bounds: a signed byte of the operand's low 16 bits

CLIP_DOC = """ALU opcode 5, ``CLIP`` (a pyvta extension of VTA v0.0.2, whose ALU opcodes are 0..4).

``ACC[dst] = min(max(ACC[dst], lo), hi)`` lane by lane over int32, where the operand ``b``
(the sign-extended 16-bit ``imm``, or with ``use_imm = 0`` the lane of ``ACC[src]``) gives
``lo = int8(b[7:0])`` and ``hi = int8(b[15:8])``; the operand's bits 31..16 are ignored. So
``imm = clip_imm(lo, hi)`` clips to [lo, hi] in one pass where v0.0.2 needs MAX lo then MIN hi
(the same result for every value); with lo > hi every lane becomes hi, as MAX then MIN give.
The opcode number was unused in v0.0.2 (its decoder rejects it), so v0.0.2 programs keep their
meaning bit for bit; a compiler lowers to v0.0.2 alone by not emitting it.
"""


def clip_imm(lo: int, hi: int) -> int:
    """The ``imm`` of ``CLIP`` to [lo, hi] (CLIP_DOC): hi in bits 15..8, lo in bits 7..0, as the
    signed 16-bit field holds them. Bounds outside a signed byte raise FieldRangeError."""
    half = 1 << (CLIP_BOUND_BITS - 1)
    for name, v in (("lo", lo), ("hi", hi)):
        if not -half <= v < half:
            raise FieldRangeError(
                f"CLIP {name} {v} does not fit a signed {CLIP_BOUND_BITS}-bit bound"
                f" (allowed: {-half}..{half - 1})"
            )
    word = (hi & 0xFF) << CLIP_BOUND_BITS | lo & 0xFF
    return word - (1 << 16) if word & 0x8000 else word


def clip_bounds(imm: int) -> tuple[int, int]:
    """(lo, hi) of a CLIP operand (its low 16 bits, CLIP_DOC): the inverse of ``clip_imm``; an
    int, or lane by lane a numpy int array (the simulator's operands)."""
    half = 1 << (CLIP_BOUND_BITS - 1)
    lo, hi = imm & 0xFF, (imm >> CLIP_BOUND_BITS) & 0xFF
    return (lo ^ half) - half, (hi ^ half) - half


class Module(enum.Enum):
    """The three command queues fetch dispatches to (and the modules that execute them)."""

    LOAD = "load"
    COMPUTE = "compute"
    STORE = "store"


class DepQueue(enum.Enum):
    """The four one-bit dependency-token queues."""

    L2C = "l2c"  # load -> compute: "tile loaded"
    C2L = "c2l"  # compute -> load: "slot free"
    C2S = "c2s"  # compute -> store: "output ready"
    S2C = "s2c"  # store -> compute: "output drained"


# Which queue each of a module's four header flags refers to; None: the flag must be 0.
#   module: (pop_prev, pop_next, push_prev, push_next)
DEP_QUEUES: dict[
    Module, tuple[DepQueue | None, DepQueue | None, DepQueue | None, DepQueue | None]
] = {
    Module.LOAD: (None, DepQueue.C2L, None, DepQueue.L2C),
    Module.COMPUTE: (DepQueue.L2C, DepQueue.S2C, DepQueue.C2L, DepQueue.C2S),
    Module.STORE: (DepQueue.C2S, None, DepQueue.S2C, None),
}

DEP_FLAG_NAMES = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")

# Memory types a LOAD may name, and the module that executes it.
LOAD_MODULE: dict[MemType, Module] = {
    MemType.INP: Module.LOAD,
    MemType.WGT: Module.LOAD,
    MemType.UOP: Module.COMPUTE,
    MemType.ACC: Module.COMPUTE,
    MemType.ACC_8BIT: Module.COMPUTE,
}
# Memory types a STORE may name.
STORE_MEM_TYPES = (MemType.OUT,)
# Memory types whose loads honour the pad fields (WGT and UOP loads ignore them).
PADDED_MEM_TYPES = (MemType.INP, MemType.ACC, MemType.ACC_8BIT)
