"""Every program error the simulator detects, with the message it gives."""

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyvta import sim
from pyvta.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    HwConfig,
    Insn,
    Load,
    MemType,
    PyvtaError,
    Store,
    Uop,
    encode_insns,
)
from pyvta.sim import native
from pyvta.sim.builder import ProgramBuilder

CFG = HwConfig()


def run(engine: str, program: sim.Program, limits: sim.SimLimits | None = None) -> sim.SimResult:
    return sim.run(program, limits, engine=engine)


def build(insns: list[Insn], uops: list[Uop] | None = None) -> sim.Program:
    pb = ProgramBuilder(CFG, dram_bytes=1 << 20)
    if uops:
        pb.load_uops(uops, 0)
    for insn in insns:
        pb.emit(insn)
    return pb.build()


def test_deadlock_names_waiting_modules(engine):
    program = build([Load(MemType.INP, pop_next_dep=True), FinishInsn(pop_prev_dep=True)])
    with pytest.raises(sim.DeadlockError) as err:
        run(engine, program)
    msg = str(err.value)
    assert "load: waits at instruction 0 (MemInsn) for a c2l token" in msg
    assert "compute: waits at instruction 1 (FinishInsn) for a l2c token" in msg
    assert "store: done" in msg
    with pytest.raises(sim.DeadlockError, match="waits at instruction 0"):
        sim.run_cycles(program)


@pytest.mark.parametrize(
    "insn, flag",
    [
        (Load(MemType.INP, pop_prev_dep=True), "pop_prev_dep"),
        (Load(MemType.WGT, push_prev_dep=True), "push_prev_dep"),
        (Store(pop_next_dep=True), "pop_next_dep"),
        (Store(push_next_dep=True), "push_next_dep"),
    ],
)
def test_queue_misuse(insn, flag, engine):
    with pytest.raises(sim.QueueUsageError, match=f"instruction 0 .* sets {flag}, but that module"):
        run(engine, build([insn, FinishInsn()]))


@pytest.mark.parametrize(
    "insn, message",
    [
        (
            Load(MemType.INP, sram_base=2047, y_size=1, x_size=2, x_stride=2),
            r"instruction 0 \(LOAD INP\): writes INP rows \[2047, 2049\) but the buffer has 2048",
        ),
        (
            Load(MemType.INP, sram_base=2040, y_size=1, x_size=2, x_stride=2, y_pad_1=4),
            r"writes INP rows \[2040, 2050\)",
        ),
        (
            Load(MemType.WGT, sram_base=1000, y_size=5, x_size=5, x_stride=5),
            r"WGT rows \[1000, 1025\) but the buffer has 1024",
        ),
        (
            Load(MemType.UOP, sram_base=8190, y_size=1, x_size=4, x_stride=4),
            r"UOP rows \[8190, 8194\)",
        ),
        (
            Load(MemType.ACC, dram_base=1 << 24, y_size=1, x_size=1, x_stride=1),
            r"instruction 0 \(LOAD ACC\): DRAM bytes \[0x40000000, 0x40000040\) run past the end of DRAM",
        ),
        (
            Store(sram_base=2047, y_size=1, x_size=2, x_stride=2),
            r"instruction 0 \(STORE\): reads OUT rows \[2047, 2049\)",
        ),
        (
            Store(dram_base=1 << 20, y_size=1, x_size=1, x_stride=1),
            r"\(STORE OUT\): DRAM bytes .* run past the end of DRAM",
        ),
    ],
)
def test_out_of_bounds_memory(insn, message, engine):
    with pytest.raises(sim.OutOfBoundsError, match=message):
        run(engine, build([insn, FinishInsn()]))


def test_out_of_bounds_gemm_and_alu(engine):
    uops = [Uop(dst=2000, src=10, wgt=1000)]
    gemm = GemmInsn(uop_bgn=0, uop_end=1, iter_out=2, iter_in=30, dst_factor_in=2)
    with pytest.raises(
        sim.OutOfBoundsError,
        match=r"instruction 1 \(GEMM\): dst index reaches 2058, outside the ACC buffer of 2048 rows",
    ):
        run(engine, build([gemm, FinishInsn()], uops))
    gemm = GemmInsn(
        uop_bgn=0, uop_end=1, iter_out=30, iter_in=1, dst_factor_out=1, wgt_factor_out=1
    )
    with pytest.raises(
        sim.OutOfBoundsError, match="wgt index reaches 1029, outside the WGT buffer"
    ):
        run(engine, build([gemm, FinishInsn()], uops))
    alu = AluInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=5, dst_factor_in=1, src_factor_in=600)
    with pytest.raises(sim.OutOfBoundsError, match=r"\(ALU\): src index reaches 2410"):
        run(engine, build([alu, FinishInsn()], uops))
    past = GemmInsn(uop_bgn=8190, uop_end=8200, iter_out=1, iter_in=1)
    with pytest.raises(sim.OutOfBoundsError, match=r"micro-ops \[8190, 8200\) pass the end"):
        run(engine, build([past, FinishInsn()]))


def test_consecutive_writes_to_one_acc_row_are_a_hazard(engine):
    uops = [Uop(dst=3, src=0, wgt=0), Uop(dst=3, src=1, wgt=0)]
    gemm = GemmInsn(uop_bgn=0, uop_end=2, iter_out=1, iter_in=1)
    with pytest.raises(
        sim.HazardError,
        match=r"instruction 1: consecutive micro-ops write ACC row 3 \(iteration i=0 j=0 uop 1",
    ):
        run(engine, build([gemm, FinishInsn()], uops))
    alu = AluInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=4, alu_opcode=AluOp.ADD)
    with pytest.raises(sim.HazardError, match="iteration i=0 j=1 uop 0"):
        run(engine, build([alu, FinishInsn()], [Uop(dst=5)]))
    # a reset only writes: no read-modify-write hazard
    run(
        engine,
        build(
            [GemmInsn(reset_reg=True, uop_bgn=0, uop_end=2, iter_out=1, iter_in=1), FinishInsn()],
            uops,
        ),
    )


def test_hazard_across_chunks_is_found(engine):
    alu = AluInsn(uop_bgn=0, uop_end=1, iter_out=4, iter_in=1, dst_factor_out=0)
    program = build([alu, FinishInsn()], [Uop(dst=1)])
    with pytest.raises(sim.HazardError, match="iteration i=1 j=0"):
        run(engine, program, sim.SimLimits(chunk_iters=1))


def test_undecodable_word_names_index(engine):
    pb = ProgramBuilder(CFG, dram_bytes=1 << 16)
    raw = encode_insns([FinishInsn()], CFG) + (7).to_bytes(16, "little")
    addr = pb.dram.alloc(len(raw), 16)
    pb.dram.write(addr, raw)
    program = sim.Program(pb.dram.data, addr, 2)
    with pytest.raises(PyvtaError, match="instruction 1: opcode 7 is not valid"):
        run(engine, program)


def test_program_without_finish(engine):
    with pytest.raises(sim.ProgramError, match="has no FINISH"):
        run(engine, build([Load(MemType.INP)]))


def test_store_with_padding(engine):
    with pytest.raises(sim.ProgramError, match="padding fields must be 0 for a store"):
        run(engine, build([Store(y_size=1, x_size=1, x_stride=1, x_pad_0=1), FinishInsn()]))


def test_work_limit(engine):
    gemm = GemmInsn(reset_reg=True, uop_bgn=0, uop_end=1, iter_out=1000, iter_in=1000)
    with pytest.raises(sim.SimLimitError, match="1000000 micro-op iterations exceed"):
        run(engine, build([gemm, FinishInsn()]), sim.SimLimits(max_iters_per_insn=1000))


def test_program_work_limit_names_the_instruction_and_runs_nothing(engine):
    gemm = GemmInsn(reset_reg=True, uop_bgn=0, uop_end=1, iter_out=10, iter_in=10)
    store = Store(dram_base=1, y_size=1, x_size=1, x_stride=1)
    program = build([store, gemm, gemm, gemm, FinishInsn()])
    before = program.dram.copy()
    limits = sim.SimLimits(max_iters_per_program=250)
    with pytest.raises(
        sim.SimLimitError,
        match=r"instruction 3: the program reaches 300 micro-op iterations here, over the"
        r" simulator's limit of 250 per program \(SimLimits.max_iters_per_program\)",
    ):
        sim.run(program, limits, engine=engine, in_place=True)
    assert np.array_equal(program.dram, before)  # checked before the store ran
    run(engine, program, sim.SimLimits(max_iters_per_program=300))


# ---- fuzzing: random words and random programs either run or raise our own errors ---------

LIMITS = sim.SimLimits(max_iters_per_insn=1 << 16, chunk_iters=1 << 12)


def _outcome(program: sim.Program, engine: str):
    """(error class, message) or (final DRAM bytes, counters) of one run."""
    try:
        result = sim.run(program, LIMITS, engine=engine)
    except PyvtaError as exc:
        return type(exc), str(exc)
    return result.dram.tobytes(), result.counters.to_dict()


def _run_words(words: list[int]) -> None:
    """Both engines give the same result or the same error (class and message)."""
    dram = np.zeros(1 << 14, np.uint8)
    raw = b"".join(w.to_bytes(16, "little") for w in words)
    dram[: len(raw)] = np.frombuffer(raw, np.uint8)
    program = sim.Program(dram, 0, len(words))
    reference = _outcome(program, "numpy")
    if native.available():
        assert _outcome(program, "native") == reference
    with contextlib.suppress(PyvtaError):
        sim.run_cycles(program)


def _plausible_word(draw_opcode: int, rest: int) -> int:
    return (rest << 3) | draw_opcode


words = st.builds(
    _plausible_word, st.sampled_from([0, 1, 2, 3, 4, 0, 2, 4, 5]), st.integers(0, (1 << 125) - 1)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(words, min_size=1, max_size=12))
def test_fuzz_random_words(ws):
    _run_words(ws)


def _small_fields(opcode: int, fields: dict) -> int:
    from pyvta.isa import alu_layout, gemm_layout, mem_layout

    layout = {0: mem_layout, 1: mem_layout, 2: gemm_layout, 4: alu_layout}.get(opcode)
    if layout is None:
        return opcode | fields.get("deps", 0) << 3
    lay = layout(CFG)
    word = opcode
    for f in lay:
        if f.name == "opcode":
            continue
        value = fields.get(f.name, 0) % (f.max_value - f.min_value + 1) + f.min_value
        word |= (value & f.mask) << f.lsb
    return word


small = st.builds(
    _small_fields,
    st.sampled_from([0, 1, 2, 3, 4]),
    st.fixed_dictionaries(
        {},
        optional={
            **{
                name: st.integers(0, 40)
                for name in (
                    "sram_base",
                    "dram_base",
                    "y_size",
                    "x_size",
                    "x_stride",
                    "y_pad_0",
                    "y_pad_1",
                    "x_pad_0",
                    "x_pad_1",
                    "uop_bgn",
                    "uop_end",
                    "iter_out",
                    "iter_in",
                    "dst_factor_out",
                    "dst_factor_in",
                    "src_factor_out",
                    "src_factor_in",
                    "wgt_factor_out",
                    "wgt_factor_in",
                    "imm",
                    "deps",
                )
            },
            **{
                name: st.integers(0, 1)
                for name in (
                    "use_imm",
                    "reset_reg",
                    "pop_prev_dep",
                    "pop_next_dep",
                    "push_prev_dep",
                    "push_next_dep",
                )
            },
            "memory_type": st.integers(0, 5),
            "alu_opcode": st.integers(0, 4),
        },
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(small, min_size=1, max_size=16))
def test_fuzz_small_field_programs(ws):
    """Fields drawn small so that many programs get past decoding and really execute."""
    _run_words(ws)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2),
    st.integers(0, 2),
    st.booleans(),
)
def test_hazard_decided_alike_on_both_engines(dsts, iter_out, iter_in, f_out, f_in, is_alu):
    """Micro-op loops drawn to write one ACC row twice in a row often, at every loop seam."""
    uops = [Uop(dst=d, src=1, wgt=1) for d in dsts]
    loop = dict(uop_bgn=0, uop_end=len(uops), iter_out=iter_out, iter_in=iter_in)
    loop |= dict(dst_factor_out=f_out, dst_factor_in=f_in)
    insn = AluInsn(alu_opcode=AluOp.ADD, **loop) if is_alu else GemmInsn(**loop)
    program = build([insn, FinishInsn()], uops)
    reference = _outcome(program, "numpy")
    if native.available():
        assert _outcome(program, "native") == reference
