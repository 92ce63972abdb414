"""An instruction stream translated once for the native engine: the execution order (the token
rules decide it, not the data), the kernel records of every instruction, the counters, and
every check that the stream alone decides.

Checks that depend on SRAM contents (micro-op loop bounds, the ACC hazard) are made by the
native kernels before an instruction's work starts. Whenever a check fails, the engine runs the
reference (numpy) executor on that instruction from the same state, so the error is the
reference's own: same class, same message, same instruction index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyvta.isa import PADDED_MEM_TYPES, AluInsn, FinishInsn, GemmInsn, HwConfig, Insn, MemInsn
from pyvta.isa import MemType as MT
from pyvta.sim.counters import Counters
from pyvta.sim.dispatch import Dispatched, Schedule
from pyvta.sim.loops import loop_shape, n_iters

# Kernel records: REC_WORDS int64 words, word 0 the operation (sim/native_ir.py reads them).
REC_WORDS = 16
OP_COPY_IN, OP_LOAD_ACC8, OP_STORE, OP_WGT_PAIRS, OP_GEMM, OP_ALU = range(1, 7)
# The buffers a run passes by address, in this order.
BUF_DRAM, BUF_UOP, BUF_WGT, BUF_INP, BUF_ACC, BUF_OUT, BUF_WPAIRS, BUF_SCRATCH = range(8)
N_BUFS = 8

_SRAM_BUF = {"uop": BUF_UOP, "wgt": BUF_WGT, "inp": BUF_INP, "acc": BUF_ACC, "out": BUF_OUT}


@dataclass
class Plan:
    """``records`` (n, REC_WORDS) int64 run in order; ``owners[r]`` is the instruction of record r.

    ``stop``: the instruction whose stream-decided check fails (run it on the reference
    executor after every record, which raises); ``counters`` hold the work of a complete run.
    """

    records: np.ndarray
    owners: list[Dispatched]
    schedule: Schedule
    stop: Dispatched | None
    finish_index: int | None
    counters: Counters
    n_insns: int


def build_plan(
    sched: Schedule, n_insns: int, cfg: HwConfig, dram_bytes: int, max_iters_per_insn: int
) -> Plan:
    rows: list[list[int]] = []
    owners: list[Dispatched] = []
    counters = Counters()
    stop = None
    finish_index = None
    for d in sched.order:
        insn = d.insn
        if _fails_statically(insn, cfg, dram_bytes, max_iters_per_insn):
            stop = d
            break
        for rec in _records(insn, cfg):
            rows.append(rec + [0] * (REC_WORDS - len(rec)))
            owners.append(d)
        counters.add_insn(insn, cfg)
        if isinstance(insn, FinishInsn):
            finish_index = d.index
    records = np.array(rows, np.int64).reshape(-1, REC_WORDS)
    return Plan(records, owners, sched, stop, finish_index, counters, n_insns)


def _fails_statically(insn: Insn, cfg: HwConfig, dram_bytes: int, max_iters: int) -> bool:
    """The checks of the reference executor that the instruction's fields alone decide."""
    if isinstance(insn, (GemmInsn, AluInsn)):
        n = n_iters(insn)
        return n > max_iters or (n > 0 and insn.uop_end > cfg.uop_depth)
    if not isinstance(insn, MemInsn):
        return False
    pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
    if insn.is_store and any(pads):
        return True
    if insn.x_size == 0 or insn.y_size == 0:
        return False
    mt = insn.memory_type
    y0, y1, x0, x1 = pads if mt in PADDED_MEM_TYPES and not insn.is_store else (0, 0, 0, 0)
    rows_used = (y0 + insn.y_size + y1) * (x0 + insn.x_size + x1)
    depth = cfg.acc_depth if insn.is_store else cfg.depth_of(mt.sram)
    eb = cfg.out_elem_bytes if insn.is_store else cfg.elem_bytes_of(mt.dram_elem)
    span = ((insn.y_size - 1) * insn.x_stride + insn.x_size) * eb
    return insn.sram_base + rows_used > depth or insn.dram_base * eb + span > dram_bytes


def _records(insn: Insn, cfg: HwConfig) -> list[list[int]]:
    if isinstance(insn, MemInsn):
        return _mem_records(insn, cfg)
    if not isinstance(insn, (GemmInsn, AluInsn)) or n_iters(insn) == 0:
        return []
    loop = [insn.uop_bgn, insn.uop_end, *loop_shape(insn)]
    if isinstance(insn, GemmInsn):
        return [[OP_GEMM, int(insn.reset_reg), *loop, insn.wgt_factor_out, insn.wgt_factor_in]]
    return [[OP_ALU, int(insn.alu_opcode), *loop, 0, 0, int(insn.use_imm), insn.imm]]


def _mem_records(insn: MemInsn, cfg: HwConfig) -> list[list[int]]:
    if insn.x_size == 0 or insn.y_size == 0:
        return []
    mt = insn.memory_type
    if insn.is_store:
        eb = cfg.out_elem_bytes
        geometry = [insn.dram_base * eb, insn.y_size, insn.x_size, insn.x_stride * eb]
        return [[OP_STORE, BUF_OUT, insn.sram_base * eb, *geometry, 0, 0, 0, 0, eb]]
    eb = cfg.elem_bytes_of(mt.dram_elem)
    pads = [insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1]
    if mt not in PADDED_MEM_TYPES:
        pads = [0, 0, 0, 0]
    geometry = [insn.dram_base * eb, insn.y_size, insn.x_size, insn.x_stride * eb, *pads]
    if mt is MT.ACC_8BIT:
        return [[OP_LOAD_ACC8, BUF_ACC, insn.sram_base * cfg.acc_elem_bytes, *geometry]]
    row_bytes = cfg.elem_bytes_of(mt.sram)
    recs = [[OP_COPY_IN, _SRAM_BUF[mt.sram], insn.sram_base * row_bytes, *geometry, row_bytes]]
    if mt is MT.WGT:
        n_rows = (pads[0] + insn.y_size + pads[1]) * (pads[2] + insn.x_size + pads[3])
        recs.append([OP_WGT_PAIRS, 0, insn.sram_base, insn.sram_base + n_rows])
    return recs
