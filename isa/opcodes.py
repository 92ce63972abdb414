"""Opcode numbers, memory types and ALU operations (VTA ISA v0.0.2).

This module is the only place in pyvta that knows these numbers.
"""

from __future__ import annotations

import enum


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
