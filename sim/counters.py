"""Work counters the functional simulator accumulates."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from pyvta.isa import PADDED_MEM_TYPES, AluInsn, GemmInsn, HwConfig, Insn, MemInsn


@dataclass
class Counters:
    """What a program did: instructions per module and opcode, bytes per memory type, MACs, ALU ops.

    ``dram_read_bytes`` / ``dram_write_bytes`` are keyed by memory type name (INP, WGT, ACC,
    ACC_8BIT, UOP for loads; OUT for stores) and count DRAM bytes, not padding.
    """

    insns_by_module: Counter = field(default_factory=Counter)
    insns_by_opcode: Counter = field(default_factory=Counter)
    dram_read_bytes: Counter = field(default_factory=Counter)
    dram_write_bytes: Counter = field(default_factory=Counter)
    pad_elems: Counter = field(default_factory=Counter)
    gemm_uop_iters: int = 0
    gemm_reset_iters: int = 0
    macs: int = 0
    alu_uop_iters: int = 0
    alu_lane_ops: int = 0

    def copy(self) -> Counters:
        tallies = {k: Counter(v) for k, v in vars(self).items() if isinstance(v, Counter)}
        return dataclasses.replace(self, **tallies)

    def add_insn(self, insn: Insn, cfg: HwConfig) -> None:
        """Count one executed instruction (the work depends on its fields only)."""
        self.insns_by_module[insn.module.value] += 1
        self.insns_by_opcode[insn.opcode.name] += 1
        if isinstance(insn, MemInsn):
            self._add_mem(insn, cfg)
        elif isinstance(insn, GemmInsn):
            total = insn.iter_out * insn.iter_in * max(insn.uop_end - insn.uop_bgn, 0)
            if insn.reset_reg:
                self.gemm_reset_iters += total
            else:
                self.gemm_uop_iters += total
                self.macs += total * cfg.gemm_macs_per_cycle
        elif isinstance(insn, AluInsn):
            total = insn.iter_out * insn.iter_in * max(insn.uop_end - insn.uop_bgn, 0)
            self.alu_uop_iters += total
            self.alu_lane_ops += total * cfg.batch * cfg.block_out

    def _add_mem(self, insn: MemInsn, cfg: HwConfig) -> None:
        n = insn.y_size * insn.x_size
        if n == 0:
            return
        mt = insn.memory_type
        if insn.is_store:
            self.dram_write_bytes[mt.name] += n * cfg.out_elem_bytes
            return
        self.dram_read_bytes[mt.name] += n * cfg.elem_bytes_of(mt.dram_elem)
        if mt in PADDED_MEM_TYPES:
            rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
            pad = rows * (insn.x_pad_0 + insn.x_size + insn.x_pad_1) - n
            if pad:
                self.pad_elems[mt.name] += pad

    def to_dict(self) -> dict:
        return {
            "insns_by_module": dict(self.insns_by_module),
            "insns_by_opcode": dict(self.insns_by_opcode),
            "dram_read_bytes": dict(self.dram_read_bytes),
            "dram_write_bytes": dict(self.dram_write_bytes),
            "pad_elems": dict(self.pad_elems),
            "gemm_uop_iters": self.gemm_uop_iters,
            "gemm_reset_iters": self.gemm_reset_iters,
            "macs": self.macs,
            "alu_uop_iters": self.alu_uop_iters,
            "alu_lane_ops": self.alu_lane_ops,
        }

    def summary(self) -> str:
        mods = ", ".join(f"{k} {v}" for k, v in sorted(self.insns_by_module.items()))
        rd = sum(self.dram_read_bytes.values())
        wr = sum(self.dram_write_bytes.values())
        return (
            f"instructions: {mods}; DRAM read {rd} B, written {wr} B;"
            f" MACs {self.macs}; ALU lane ops {self.alu_lane_ops}"
        )
