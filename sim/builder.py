"""ProgramBuilder: lay out data, micro-ops and instructions in a DRAM image to make a Program."""

from __future__ import annotations

import numpy as np

from pyvta.isa import (
    DEFAULT_CONFIG,
    INSN_BYTES,
    FinishInsn,
    HwConfig,
    Insn,
    Load,
    MemType,
    Store,
    Uop,
    encode_insns,
    encode_uops,
)
from pyvta.sim.dram import Dram
from pyvta.sim.program import Program

DEFAULT_DRAM_BYTES = 1 << 26


class ProgramBuilder:
    """Collects DRAM contents and an instruction list; ``build()`` returns the Program.

    Addresses handed out are in *elements* of the named buffer (the unit of ``dram_base``):
    ``put(a, "inp")`` returns the byte address divided by ``cfg.inp_elem_bytes``.
    """

    def __init__(self, cfg: HwConfig = DEFAULT_CONFIG, dram_bytes: int = DEFAULT_DRAM_BYTES):
        self.cfg = cfg
        self.dram = Dram(dram_bytes)
        self.insns: list[Insn] = []

    def _align(self, elem: str) -> int:
        return max(64, self.cfg.elem_bytes_of(elem))

    def put(self, array: np.ndarray, elem: str) -> int:
        """Write ``array`` (raw little-endian bytes) and return its address in ``elem`` units."""
        eb = self.cfg.elem_bytes_of(elem)
        if np.asarray(array).nbytes % eb:
            raise ValueError(
                f"{np.asarray(array).nbytes} bytes is not a whole number of {elem} rows ({eb} B)"
            )
        return self.dram.put(array, self._align(elem)) // eb

    def alloc(self, n_elems: int, elem: str) -> int:
        """Reserve zeroed room for ``n_elems`` rows of ``elem``; returns the address in elements."""
        eb = self.cfg.elem_bytes_of(elem)
        return self.dram.alloc(n_elems * eb, self._align(elem)) // eb

    def put_uops(self, uops: list[Uop]) -> int:
        """Write micro-ops; returns their address in micro-op units."""
        return self.dram.put(np.frombuffer(encode_uops(uops, self.cfg), np.uint8), 64) // 4

    def load_uops(self, uops: list[Uop], sram_base: int, **deps: bool) -> None:
        """Emit a UOP load of ``uops`` into the micro-op buffer at ``sram_base``."""
        addr = self.put_uops(uops)
        self.emit(
            Load(
                MemType.UOP,
                sram_base=sram_base,
                dram_base=addr,
                y_size=1,
                x_size=len(uops),
                x_stride=len(uops),
                **deps,
            )
        )

    def store_and_finish(
        self,
        sram_base: int,
        dram_base: int,
        x_size: int,
        y_size: int = 1,
        x_stride: int | None = None,
    ) -> None:
        """Emit a STORE of ``y_size`` x ``x_size`` OUT rows after compute's token (pop c2s, push
        s2c) and a FINISH after the store's (pop s2c): the usual end of a hand-built program."""
        self.emit(
            Store(
                sram_base=sram_base,
                dram_base=dram_base,
                y_size=y_size,
                x_size=x_size,
                x_stride=x_size if x_stride is None else x_stride,
                pop_prev_dep=True,
                push_prev_dep=True,
            )
        )
        self.emit(FinishInsn(pop_next_dep=True))

    def emit(self, insn: Insn) -> int:
        self.insns.append(insn)
        return len(self.insns) - 1

    def read(self, dram: np.ndarray, addr_elems: int, elem: str, count: int) -> np.ndarray:
        """Bytes of ``count`` rows of ``elem`` at ``addr_elems`` from a (final) DRAM image."""
        eb = self.cfg.elem_bytes_of(elem)
        return dram[addr_elems * eb : (addr_elems + count) * eb]

    def build(self, finish: bool = False) -> Program:
        """Write the instruction stream and return the Program (DRAM trimmed to what is used)."""
        insns = list(self.insns)
        if finish:
            insns.append(FinishInsn())
        raw = encode_insns(insns, self.cfg)
        addr = self.dram.alloc(len(raw), INSN_BYTES)
        self.dram.write(addr, raw)
        used = -(-(addr + len(raw)) // 4096) * 4096
        return Program(self.dram.data[:used].copy(), addr, len(insns), self.cfg)
