"""The functional simulator: executes a program with full semantics and token checking.

Each module runs its own command queue in order; an instruction starts only when a token is
available in every queue it pops, and pushes after it completes. The modules are interleaved
round-robin (each runs until it blocks), which gives the same result as any hardware
interleaving for a program whose tokens order all its conflicting accesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pyvta.isa import AluInsn, DepQueue, FinishInsn, GemmInsn, Insn, MemInsn, Module
from pyvta.sim import alu as alu_sem
from pyvta.sim import dma
from pyvta.sim import gemm as gemm_sem
from pyvta.sim.counters import Counters
from pyvta.sim.dispatch import Dispatched, deadlock_error, dispatch
from pyvta.sim.errors import ProgramError, SimLimitError
from pyvta.sim.loops import n_iters
from pyvta.sim.program import Program
from pyvta.sim.races import RaceDetector, accesses
from pyvta.sim.state import SramState


@dataclass(frozen=True)
class SimLimits:
    """Work limits: larger instructions raise SimLimitError instead of running for hours.

    ``chunk_iters`` bounds the memory one vectorised step uses (micro-op iterations per step).
    """

    max_iters_per_insn: int = 1 << 28
    chunk_iters: int = 1 << 18


@dataclass
class SimResult:
    dram: np.ndarray
    counters: Counters
    finish_index: int | None
    leftover_tokens: dict[str, int] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # instruction indices in execution order


def _execute(
    st: SramState, dram: np.ndarray, d: Dispatched, counters: Counters, limits: SimLimits
) -> None:
    insn = d.insn
    if isinstance(insn, (GemmInsn, AluInsn)) and n_iters(insn) > limits.max_iters_per_insn:
        raise SimLimitError(
            f"instruction {d.index}: {n_iters(insn)} micro-op iterations exceed the simulator's"
            f" limit of {limits.max_iters_per_insn} per instruction (SimLimits.max_iters_per_insn)"
        )
    if isinstance(insn, MemInsn):
        (dma.store if insn.is_store else dma.load)(st, dram, insn, d.index, counters)
    elif isinstance(insn, GemmInsn):
        gemm_sem.gemm(st, insn, d.index, counters, limits.chunk_iters)
    elif isinstance(insn, AluInsn):
        alu_sem.alu(st, insn, d.index, counters, limits.chunk_iters)


def run_insns(
    insns: list[Insn],
    dram: np.ndarray,
    cfg,
    limits: SimLimits | None = None,
    state: SramState | None = None,
    module_order: tuple[Module, ...] = tuple(Module),
    one_per_turn: bool = False,
    check_races: bool = False,
) -> SimResult:
    """Run decoded instructions against ``dram`` (modified in place) and return the result.

    ``module_order`` is the round-robin order of the modules; a program whose tokens order all
    its conflicting accesses gives the same result for every order (tests use this to catch a
    missing token: loads running ahead expose a missing write-after-read token, compute running
    first a missing read-after-write one). ``one_per_turn`` lets each module run a single
    instruction per round instead of running until it blocks (a finer interleaving).
    ``check_races`` raises ``RaceError`` for conflicting accesses of two modules that no chain
    of tokens orders (whatever this interleaving did).
    """
    limits = limits or SimLimits()
    st = state or SramState(cfg)
    queues = dispatch(insns)
    heads = {m: 0 for m in Module}
    tokens = {q: 0 for q in DepQueue}
    counters = Counters()
    finish_index = None
    order: list[int] = []
    remaining = len(insns)
    races = RaceDetector(cfg) if check_races else None
    while remaining:
        progressed = False
        for module in module_order:
            q = queues[module]
            while heads[module] < len(q):
                d = q[heads[module]]
                if any(tokens[p] == 0 for p in d.pops):
                    break
                for p in d.pops:
                    tokens[p] -= 1
                if races:
                    races.before(module, d.pops)
                    races.access(module, d.index, accesses(d.insn, st))
                _execute(st, dram, d, counters, limits)
                for p in d.pushes:
                    tokens[p] += 1
                if races:
                    races.after(module, d.pushes)
                if isinstance(d.insn, FinishInsn):
                    finish_index = d.index
                counters.insns_by_module[module.value] += 1
                counters.insns_by_opcode[d.insn.opcode.name] += 1
                order.append(d.index)
                heads[module] += 1
                remaining -= 1
                progressed = True
                if one_per_turn:
                    break
        if not progressed:
            raise deadlock_error(queues, heads, tokens)
    if finish_index is None:
        raise ProgramError(
            f"the program ({len(insns)} instructions) has no FINISH: the hardware would never"
            " raise done"
        )
    leftover = {q.value: n for q, n in tokens.items() if n}
    return SimResult(dram, counters, finish_index, leftover, order)


def run(program: Program, limits: SimLimits | None = None, check_races: bool = False) -> SimResult:
    """Run a program bundle; returns the final DRAM image (a copy) and the counters."""
    dram = program.dram.copy()
    return run_insns(program.insns(), dram, program.config, limits, check_races=check_races)
