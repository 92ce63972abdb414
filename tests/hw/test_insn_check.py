"""The RTL instruction checker (``hw.check``, on Amaranth's simulator) against the simulator: for
one instruction, the fault kind it flags is the error ``isa.decode`` / ``sim`` raises for it."""

import dataclasses

import numpy as np
import pytest

from pyvta import isa, sim
from pyvta.hw import pure
from pyvta.isa.opcodes import STORE_MEM_TYPES
from pyvta.isa.regmap import Fault
from pyvta.sim.dispatch import dispatch

pytestmark = pytest.mark.hw
CFG = isa.DEFAULT_CONFIG
SEED = 23
MEM = isa.mem_layout(CFG)


def sim_fault(word: int) -> Fault:
    """What the simulator refuses ``word`` for, as a Fault. Tokens and micro-ops aside (what the
    checker does not see): pops are cleared so that the instruction runs alone instead of
    waiting, and a GEMM / ALU runs no iterations."""
    try:
        insn = isa.decode(word, CFG, index=0)
        dispatch([insn])
    except isa.DecodeError:
        return Fault.DECODE
    except sim.QueueUsageError:
        return Fault.DEP_QUEUE
    alone = dataclasses.replace(insn, pop_prev_dep=False, pop_next_dep=False)
    if isinstance(alone, isa.GemmInsn | isa.AluInsn):
        alone = dataclasses.replace(alone, iter_out=0)
    try:
        sim.run_insns([alone, isa.FinishInsn()], np.zeros(1 << 20, np.uint8), CFG, engine="numpy")
    except sim.ProgramError:
        return Fault.STORE_PAD
    except sim.OutOfBoundsError:
        return Fault.OUT_OF_BOUNDS
    return Fault.NONE


def _field(word: int, name: str, value: int) -> int:
    f = MEM[name]
    return (word & ~(f.mask << f.lsb)) | ((value & f.mask) << f.lsb)


def _random_mem_word(rng) -> int:
    """A LOAD / STORE near its buffer's end, small enough for a 1 MiB DRAM; sometimes padded,
    sometimes with an illegal flag or memory type."""
    word = int(rng.integers(1 << 63)) | int(rng.integers(1 << 63)) << 64
    op = isa.Opcode.STORE if rng.random() < 0.3 else isa.Opcode.LOAD
    mt = isa.MemType(int(rng.integers(len(isa.MemType)))) if rng.random() < 0.1 else None
    if mt is None:
        types = STORE_MEM_TYPES if op is isa.Opcode.STORE else tuple(isa.LOAD_MODULE)
        mt = types[int(rng.integers(len(types)))]
    depth = CFG.depth_of(mt.sram)
    y, x = int(rng.integers(0, 9)), int(rng.integers(0, 9))
    values = {
        "opcode": op,
        "memory_type": mt,
        "sram_base": max(0, depth - int(rng.integers(0, 120))),
        "dram_base": 0,
        "y_size": y,
        "x_size": x,
        "x_stride": x + int(rng.integers(0, 3)),
    }
    for pad in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"):
        values[pad] = int(rng.integers(0, 4)) if rng.random() < 0.3 else 0
    for flag in isa.DEP_FLAG_NAMES:
        values[flag] = int(rng.random() < 0.15)
    for name, v in values.items():
        word = _field(word, name, int(v))
    return word


def _random_loop_word(rng) -> int:
    """A GEMM / ALU of no iterations (no micro-op is read), random opcode fields."""
    op = isa.Opcode.GEMM if rng.random() < 0.5 else isa.Opcode.ALU
    layout = isa.gemm_layout(CFG) if op is isa.Opcode.GEMM else isa.alu_layout(CFG)
    values = {f.name: int(rng.integers(0, 1 << f.width_bits)) for f in layout}
    values |= {"opcode": int(op), "iter_out": 0, "iter_in": int(rng.integers(0, 3))}
    word = 0
    for f in layout:
        word |= (values[f.name] & f.mask) << f.lsb
    return word


def test_checker_flags_what_the_simulator_refuses():
    rng = np.random.default_rng(SEED)
    words = [_random_mem_word(rng) for _ in range(300)]
    words += [_random_loop_word(rng) for _ in range(80)]
    words += [int(rng.integers(1 << 63)) << 3 | op for op in range(8) for _ in range(3)]
    words += [isa.FinishInsn().encode(CFG)]
    expected = [sim_fault(w) for w in words]
    got = pure.insn_faults(CFG, words)
    bad = [
        f"word {i} ({w:#034x}): RTL {Fault(g).name}, simulator {e.name}"
        for i, (w, g, e) in enumerate(zip(words, got, expected, strict=True))
        if g != e
    ]
    assert not bad, "\n".join(bad[:10])
    seen = {e for e in expected}
    assert seen == set(Fault), f"the vectors miss kinds {set(Fault) - seen}"
