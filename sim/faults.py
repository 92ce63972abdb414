"""Programs with one bad instruction: what an accelerator must refuse, at that instruction, with
the error ``sim.run`` raises for it.

A mutation turns one instruction of a good program into a word the ISA or the simulator refuses
(``MUTATIONS``: name -> function of (insn, cfg) giving the new 128-bit word, or None where it
does not apply to that instruction). ``with_fault`` applies one at an index; ``faulting_programs``
are the directed cases (each fault kind, at an index past a few good instructions, so that units
hold work and wait for tokens when fetch stops); ``random_faulting_program`` mutates a random
program for the differential fuzz.
"""

from __future__ import annotations

import numpy as np

from pyvta.isa import (
    DEFAULT_CONFIG,
    DEP_FLAG_NAMES,
    DEP_QUEUES,
    INSN_BYTES,
    LOAD_MODULE,
    PADDED_MEM_TYPES,
    AluInsn,
    AluOp,
    GemmInsn,
    HwConfig,
    Insn,
    MemInsn,
    MemType,
    Opcode,
    alu_layout,
    gemm_layout,
    mem_layout,
)
from pyvta.isa.opcodes import STORE_MEM_TYPES
from pyvta.sim.program import Program


def _set(word: int, layout, name: str, value: int) -> int:
    f = layout[name]
    return (word & ~(f.mask << f.lsb)) | ((value & f.mask) << f.lsb)


def _bad_opcode(insn: Insn, cfg: HwConfig) -> int:
    return _set(insn.encode(cfg), insn.layout(cfg), "opcode", max(Opcode) + 1)


def _bad_memory_type(insn: Insn, cfg: HwConfig) -> int | None:
    if not isinstance(insn, MemInsn):
        return None
    allowed = STORE_MEM_TYPES if insn.is_store else tuple(LOAD_MODULE)
    bad = next(t for t in MemType if t not in allowed)
    return _set(insn.encode(cfg), mem_layout(cfg), "memory_type", bad)


def _reversed_uops(insn: Insn, cfg: HwConfig) -> int | None:
    if not isinstance(insn, GemmInsn | AluInsn):
        return None
    word = _set(insn.encode(cfg), gemm_layout(cfg), "uop_bgn", 1)
    return _set(word, gemm_layout(cfg), "uop_end", 0)


def _bad_alu_opcode(insn: Insn, cfg: HwConfig) -> int | None:
    if not isinstance(insn, AluInsn):
        return None
    return _set(insn.encode(cfg), alu_layout(cfg), "alu_opcode", max(AluOp) + 1)


def _flag_without_queue(insn: Insn, cfg: HwConfig) -> int | None:
    flags = [f for f, q in zip(DEP_FLAG_NAMES, DEP_QUEUES[insn.module], strict=True) if q is None]
    if not flags:
        return None
    return _set(insn.encode(cfg), insn.layout(cfg), flags[0], 1)


def _store_pad(insn: Insn, cfg: HwConfig) -> int | None:
    if not (isinstance(insn, MemInsn) and insn.is_store):
        return None
    return _set(insn.encode(cfg), mem_layout(cfg), "x_pad_0", 1)


def _sram_past_end(insn: Insn, cfg: HwConfig) -> int | None:
    """The same rows moved to end one row past the buffer."""
    if not isinstance(insn, MemInsn) or insn.x_size == 0 or insn.y_size == 0:
        return None
    rows, width = insn.y_size, insn.x_size
    if not insn.is_store and insn.memory_type in PADDED_MEM_TYPES:
        rows += insn.y_pad_0 + insn.y_pad_1
        width += insn.x_pad_0 + insn.x_pad_1
    base = cfg.depth_of(insn.memory_type.sram) - rows * width + 1
    if not 0 <= base <= mem_layout(cfg)["sram_base"].max_value:
        return None
    return _set(insn.encode(cfg), mem_layout(cfg), "sram_base", base)


MUTATIONS = {
    "bad_opcode": _bad_opcode,
    "bad_memory_type": _bad_memory_type,
    "reversed_uops": _reversed_uops,
    "bad_alu_opcode": _bad_alu_opcode,
    "flag_without_queue": _flag_without_queue,
    "store_pad": _store_pad,
    "sram_past_end": _sram_past_end,
}


def with_word(program: Program, index: int, word: int) -> Program:
    """``program`` with instruction ``index`` replaced by the 128-bit ``word``."""
    dram = program.dram.copy()
    at = program.insn_addr + index * INSN_BYTES
    dram[at : at + INSN_BYTES] = np.frombuffer(word.to_bytes(INSN_BYTES, "little"), np.uint8)
    return Program(dram, program.insn_addr, program.insn_count, program.config)


def with_fault(program: Program, index: int, mutation: str) -> Program | None:
    """``program`` with ``MUTATIONS[mutation]`` applied to instruction ``index``; None if the
    mutation does not apply to that instruction."""
    word = MUTATIONS[mutation](program.insns()[index], program.config)
    return None if word is None else with_word(program, index, word)


# (directed program, instruction index, mutation): each fault kind past a few good instructions
_DIRECTED = (
    ("matmul_small", 3, "bad_opcode"),
    ("matmul_small", 2, "bad_memory_type"),
    ("matmul_small", 5, "reversed_uops"),
    ("matmul_small", 7, "bad_alu_opcode"),
    ("matmul_small", 11, "flag_without_queue"),
    ("matmul_small", 12, "store_pad"),
    ("matmul_small", 0, "sram_past_end"),
    ("matmul_small", 2, "sram_past_end"),
    ("matmul_small", 13, "sram_past_end"),
    ("matmul_tiled_xpad", 4, "sram_past_end"),
)


def faulting_programs(cfg: HwConfig = DEFAULT_CONFIG) -> dict[str, Program]:
    """Name -> a directed program with one bad instruction (the name says which and how)."""
    from pyvta.sim.directed import directed_programs

    base = directed_programs(cfg)
    out = {}
    for name, index, mutation in _DIRECTED:
        program = with_fault(base[name], index, mutation)
        if program is None:
            raise ValueError(f"{mutation} does not apply to instruction {index} of {name}")
        out[f"{name}@{index}:{mutation}"] = program
    return out


def random_faulting_program(program: Program, rng: np.random.Generator) -> Program | None:
    """``program`` with one random mutation at a random instruction (None if the one drawn
    does not apply there)."""
    index = int(rng.integers(program.insn_count))
    mutation = list(MUTATIONS)[int(rng.integers(len(MUTATIONS)))]
    return with_fault(program, index, mutation)
