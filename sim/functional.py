"""The functional simulator: executes a program with full semantics and token checking.

Each module runs its own command queue in order; an instruction starts only when a token is
available in every queue it pops, and pushes after it completes. The modules are interleaved
round-robin (each runs until it blocks), which gives the same result as any hardware
interleaving for a program whose tokens order all its conflicting accesses.

Two engines execute the instructions: numpy (the reference: one vectorised step per
instruction, ``sim/gemm.py``, ``sim/alu.py``, ``sim/dma.py``) and native (``sim/native.py``:
JIT-compiled kernels running a whole translated stream in one call). They give the same DRAM,
counters and errors; ``engine="auto"`` picks native where llvmlite is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa import AluInsn, FinishInsn, GemmInsn, HwConfig, Insn, MemInsn, Module
from pyvta.sim import alu as alu_sem
from pyvta.sim import dma
from pyvta.sim import gemm as gemm_sem
from pyvta.sim.counters import Counters
from pyvta.sim.dispatch import Dispatched, Schedule, dispatch, schedule
from pyvta.sim.errors import ArgumentError, ProgramError, SimError, SimLimitError
from pyvta.sim.loops import n_iters
from pyvta.sim.program import Program
from pyvta.sim.races import RaceDetector, accesses
from pyvta.sim.state import SramState

ENGINES = ("auto", "native", "numpy")
# engine="auto" runs a config's programs on the numpy engine while its native kernels are not
# compiled, counting the work they cost there (per config, over the process); the program that
# takes the count to NATIVE_COMPILE_WORK compiles the kernels (0.3-0.7 s, once per machine: the
# object code is cached on disk) and it and every later one run native. Work is micro-op
# iterations plus NUMPY_INSN_WORK per instruction (the numpy engine's fixed ~70 us per
# instruction at its ~0.25 us per iteration), so the threshold is about a quarter second of
# numpy time, the compile's own order: a network's or a tuning session's many small programs
# reach the native engine within their first second, and a lone small program compiles nothing.
# The switch is deterministic (work, not time), and both engines give the same results.
NATIVE_COMPILE_WORK = 1 << 20
NUMPY_INSN_WORK = 256
_numpy_work_so_far: dict[HwConfig, int] = {}  # engine="auto": numpy work per config


@dataclass(frozen=True)
class SimLimits:
    """Work limits: larger programs raise SimLimitError instead of running for hours.

    ``max_iters_per_insn`` bounds one GEMM/ALU instruction's micro-op iterations and
    ``max_iters_per_program`` their sum over the program (checked before anything runs: 2^30
    iterations are ~4 minutes on the numpy engine, ~20 s on the native one). ``chunk_iters``
    bounds the memory one vectorised step of the numpy engine uses (iterations per step).
    """

    max_iters_per_insn: int = 1 << 28
    max_iters_per_program: int = 1 << 30
    chunk_iters: int = 1 << 18


@dataclass
class SimResult:
    dram: np.ndarray
    counters: Counters
    finish_index: int | None
    leftover_tokens: dict[str, int] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # instruction indices in execution order


def check_program_work(order: list[Dispatched], limits: SimLimits) -> None:
    """Raise SimLimitError naming the instruction at which the program's work passes
    ``limits.max_iters_per_program`` (in execution order)."""
    total = 0
    for d in order:
        if isinstance(d.insn, (GemmInsn, AluInsn)):
            total += n_iters(d.insn)
            if total > limits.max_iters_per_program:
                raise SimLimitError(
                    f"instruction {d.index}: the program reaches {total} micro-op iterations"
                    f" here, over the simulator's limit of {limits.max_iters_per_program} per"
                    " program (SimLimits.max_iters_per_program)"
                )


def execute_one(st: SramState, dram: np.ndarray, d: Dispatched, limits: SimLimits) -> None:
    """The reference (numpy) semantics of one instruction, with every check it makes."""
    insn = d.insn
    if isinstance(insn, (GemmInsn, AluInsn)) and n_iters(insn) > limits.max_iters_per_insn:
        raise SimLimitError(
            f"instruction {d.index}: {n_iters(insn)} micro-op iterations exceed the simulator's"
            f" limit of {limits.max_iters_per_insn} per instruction (SimLimits.max_iters_per_insn)"
        )
    if isinstance(insn, MemInsn):
        (dma.store if insn.is_store else dma.load)(st, dram, insn, d.index)
    elif isinstance(insn, GemmInsn):
        gemm_sem.gemm(st, insn, d.index, limits.chunk_iters)
    elif isinstance(insn, AluInsn):
        alu_sem.alu(st, insn, d.index, limits.chunk_iters)


def _no_finish(n_insns: int) -> ProgramError:
    return ProgramError(
        f"the program ({n_insns} instructions) has no FINISH: the hardware would never raise done"
    )


def _run_numpy(
    insns: list[Insn],
    sched: Schedule,
    dram: np.ndarray,
    cfg: HwConfig,
    limits: SimLimits,
    st: SramState,
    check_races: bool,
) -> SimResult:
    counters = Counters()
    finish_index = None
    races = RaceDetector(cfg) if check_races else None
    for d in sched.order:
        module = d.insn.module
        if races:
            races.before(module, d.pops, d.insn)
            races.access(module, d.index, accesses(d.insn, st), d.insn)
        execute_one(st, dram, d, limits)
        if races:
            races.after(module, d.pushes, d.insn)
        if isinstance(d.insn, FinishInsn):
            finish_index = d.index
        counters.add_insn(d.insn, cfg)
    if sched.deadlock:
        raise sched.deadlock
    if finish_index is None:
        raise _no_finish(len(insns))
    order = [d.index for d in sched.order]
    return SimResult(dram, counters, finish_index, dict(sched.leftover_tokens), order)


def _run_native(plan, dram: np.ndarray, limits: SimLimits, st: SramState, fresh: bool) -> SimResult:
    from pyvta.sim import native

    failed = native.execute(plan, dram, st, fresh)
    culprit = plan.owners[failed] if failed >= 0 else plan.stop
    if culprit is not None:
        execute_one(st, dram, culprit, limits)  # the reference raises the same error
        raise SimError(
            f"instruction {culprit.index}: the native engine stopped at this instruction but"
            " the reference executor ran it (a simulator bug: please report it)"
        )
    if plan.schedule.deadlock:
        raise plan.schedule.deadlock
    if plan.finish_index is None:
        raise _no_finish(plan.n_insns)
    order = [d.index for d in plan.schedule.order]
    counters = plan.counters.copy()
    return SimResult(dram, counters, plan.finish_index, dict(plan.schedule.leftover_tokens), order)


def _run(
    stream_key: Hashable,
    decode: Callable[[], list[Insn]],
    dram: np.ndarray,
    cfg: HwConfig,
    limits: SimLimits | None,
    state: SramState | None,
    module_order: tuple[Module, ...],
    one_per_turn: bool,
    check_races: bool,
    engine: str,
) -> SimResult:
    _check_arguments(limits, state, check_races, one_per_turn, engine)
    limits = limits or SimLimits()
    st = state or SramState(cfg)
    if engine == "numpy" or not _native_possible(engine, check_races) or check_races:
        insns = decode()
        sched = schedule(dispatch(insns), module_order, one_per_turn)
        check_program_work(sched.order, limits)
        return _run_numpy(insns, sched, dram, cfg, limits, st, check_races)
    from pyvta.sim import native
    from pyvta.sim.plan import build_plan

    decoded: list[list[Insn]] = []  # the stream, when this call decoded it

    def build():
        decoded.append(decode())
        sched = schedule(dispatch(decoded[0]), module_order, one_per_turn)
        check_program_work(sched.order, limits)
        return build_plan(sched, len(decoded[0]), cfg, dram.size, limits.max_iters_per_insn)

    plan = native.plans.get((stream_key, cfg, dram.size, limits, module_order, one_per_turn), build)
    if engine == "auto" and not _auto_runs_native(cfg, plan):
        insns = decoded[0] if decoded else decode()
        return _run_numpy(insns, plan.schedule, dram, cfg, limits, st, False)
    return _run_native(plan, dram, limits, st, state is None)


def numpy_work(plan) -> int:
    """The work of a plan's program on the numpy engine (see NATIVE_COMPILE_WORK), in micro-op
    iteration equivalents."""
    c = plan.counters
    iters = c.gemm_uop_iters + c.gemm_reset_iters + c.alu_uop_iters
    return iters + NUMPY_INSN_WORK * plan.n_insns


def _auto_runs_native(cfg: HwConfig, plan) -> bool:
    """engine="auto": native when ``cfg``'s kernels cost no compilation, or when this program
    takes the config's numpy work in this process to NATIVE_COMPILE_WORK (then it compiles
    them); else the program's work is counted and it runs on numpy."""
    from pyvta.sim import native

    if native.kernels_ready(cfg):
        return True
    total = _numpy_work_so_far.get(cfg, 0) + numpy_work(plan)
    if total >= NATIVE_COMPILE_WORK:
        _numpy_work_so_far.pop(cfg, None)
        return True
    _numpy_work_so_far[cfg] = total
    return False


def _check_arguments(limits, state, check_races, one_per_turn, engine) -> None:
    """The public entry points' options, checked at the door (``ArgumentError`` naming the
    argument, its type and what is allowed)."""
    if limits is not None and not isinstance(limits, SimLimits):
        raise ArgumentError(
            f"limits must be a sim.SimLimits or None, got {type(limits).__name__} {limits!r}"
        )
    if state is not None and not isinstance(state, SramState):
        raise ArgumentError(f"state must be a SramState or None, got {type(state).__name__}")
    for name, value in (("check_races", check_races), ("one_per_turn", one_per_turn)):
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentError(f"{name} must be True or False, got {type(value).__name__}")
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ArgumentError(f"unknown simulator engine {engine!r} (allowed: {', '.join(ENGINES)})")


def _native_possible(engine: str, check_races: bool) -> bool:
    if engine == "native":
        if check_races:
            raise ValueError(
                "check_races needs the numpy engine (it watches every access): use"
                " engine='numpy' or 'auto'"
            )
        from pyvta.sim import native

        if not native.available():
            raise SimError("engine='native' needs llvmlite, which is not installed here")
        return True
    from pyvta.sim import native

    return native.available()


def run_insns(
    insns: list[Insn],
    dram: np.ndarray,
    cfg,
    limits: SimLimits | None = None,
    state: SramState | None = None,
    module_order: tuple[Module, ...] = tuple(Module),
    one_per_turn: bool = False,
    check_races: bool = False,
    engine: str = "auto",
) -> SimResult:
    """Run decoded instructions against ``dram`` (modified in place) and return the result.

    ``module_order`` is the round-robin order of the modules; a program whose tokens order all
    its conflicting accesses gives the same result for every order (tests use this to catch a
    missing token: loads running ahead expose a missing write-after-read token, compute running
    first a missing read-after-write one). ``one_per_turn`` lets each module run a single
    instruction per round instead of running until it blocks (a finer interleaving).
    ``check_races`` raises ``RaceError`` for conflicting accesses of two modules that no chain
    of tokens orders (whatever this interleaving did); it runs on the numpy engine.
    ``engine``: "native" (JIT-compiled kernels), "numpy" (the reference) or "auto" (native
    when llvmlite is there, once the config's kernels exist or its work so far is worth
    compiling them: NATIVE_COMPILE_WORK); both give the same DRAM, counters and errors.
    """
    insns = list(insns)
    return _run(
        tuple(insns),
        lambda: insns,
        dram,
        cfg,
        limits,
        state,
        module_order,
        one_per_turn,
        check_races,
        engine,
    )


def run(
    program: Program,
    limits: SimLimits | None = None,
    check_races: bool = False,
    engine: str = "auto",
    in_place: bool = False,
) -> SimResult:
    """Run a program bundle; returns the final DRAM image and the counters.

    The image is a copy of the bundle's (``in_place=True``: the bundle's own array, modified).
    """
    if not isinstance(program, Program):
        raise ArgumentError(
            f"program must be a sim.Program (a DRAM image and its instruction stream), got"
            f" {type(program).__name__}"
        )
    if not isinstance(in_place, (bool, np.bool_)):
        raise ArgumentError(f"in_place must be True or False, got {type(in_place).__name__}")
    dram = program.dram if in_place else program.dram.copy()
    key = program.insn_bytes().tobytes()
    return _run(
        key,
        program.insns,
        dram,
        program.config,
        limits,
        None,
        tuple(Module),
        False,
        check_races,
        engine,
    )
