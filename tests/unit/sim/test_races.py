import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, Load, MemType, Uop
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.programs import matmul_program
from pyvta.sim.random_program import random_program


def test_well_tokened_programs_have_no_races():
    rng = np.random.default_rng(11)
    ex = matmul_program(
        rng.integers(-128, 128, (256, 64), dtype=np.int8),
        rng.integers(-128, 128, (64, 32), dtype=np.int8),
    )
    sim.run(ex.program, check_races=True)
    for seed in range(20):
        sim.run(random_program(np.random.default_rng(seed)), check_races=True)


def test_missing_token_is_a_race_even_when_the_result_is_right():
    cfg = HwConfig()
    pb = ProgramBuilder(cfg, dram_bytes=1 << 20)
    data = pb.put(np.ones((4, 16), np.int8), "inp")
    pb.load_uops([Uop(dst=0, src=0, wgt=0)], 0)
    pb.emit(Load(MemType.INP, dram_base=data, y_size=1, x_size=4, x_stride=4))  # no push
    pb.emit(
        GemmInsn(uop_bgn=0, uop_end=1, iter_out=4, iter_in=1, dst_factor_out=1, src_factor_out=1)
    )
    pb.emit(FinishInsn())
    program = pb.build()
    sim.run(program)  # the default interleaving happens to load first
    with pytest.raises(
        sim.RaceError,
        match=r"instruction 2 \(compute\) reads inp \[0, 4\) which"
        r" instruction 1 \(load\) also accesses",
    ):
        sim.run(program, check_races=True)


def _overlap_program(alu_row: int, overlap: bool = True, gemm_pushes: bool = False):
    """A GEMM into ACC rows [0, 4), beside it (overlap = 1) an ALU MAX on rows [alu_row,
    alu_row + 4), then an ALU MIN on rows [0, 12) that waits for both and pushes, and a store of
    those rows. ``gemm_pushes``: the GEMM also pushes a token (a store of no rows pops it)."""
    from pyvta.isa import AluInsn, AluOp, Store

    cfg = HwConfig()
    rng = np.random.default_rng(3)
    pb = ProgramBuilder(cfg, dram_bytes=1 << 20)
    data = pb.put(rng.integers(-8, 8, (4, 16), dtype=np.int8), "inp")
    wgt = pb.put(rng.integers(-8, 8, (1, 16, 16), dtype=np.int8), "wgt")
    out = pb.alloc(12 * 16, "out")
    pb.emit(Load(MemType.INP, dram_base=data, y_size=1, x_size=4, x_stride=4))
    pb.emit(Load(MemType.WGT, dram_base=wgt, y_size=1, x_size=1, x_stride=1, push_next_dep=True))
    pb.load_uops([Uop(dst=0, src=0, wgt=0), Uop(dst=alu_row, src=alu_row), Uop()], 0)
    rows = dict(iter_in=1, dst_factor_out=1, src_factor_out=1)
    pb.emit(
        GemmInsn(
            uop_bgn=0, uop_end=1, iter_out=4, pop_prev_dep=True, push_next_dep=gemm_pushes, **rows
        )
    )
    alu = dict(alu_opcode=AluOp.MAX, use_imm=True, imm=-3, uop_bgn=1, uop_end=2, iter_out=4)
    pb.emit(AluInsn(**alu, **rows, overlap=overlap))
    pb.emit(
        AluInsn(
            alu_opcode=AluOp.MIN, use_imm=True, imm=100, uop_bgn=2, uop_end=3, iter_out=12,
            push_next_dep=True, **rows,
        )
    )  # fmt: skip
    if gemm_pushes:
        pb.emit(Store(pop_prev_dep=True))
    pb.store_and_finish(0, out, 12)
    return pb.build(), pb, out


def test_an_overlapped_pair_on_disjoint_rows_is_no_race():
    program, _, _ = _overlap_program(8)
    sim.run(program, check_races=True)


def test_an_overlapped_pair_on_shared_rows_is_a_race_naming_both():
    sim.run(_overlap_program(2, overlap=False)[0], check_races=True)  # in order: no race
    with pytest.raises(
        sim.RaceError,
        match=r"instruction 4 \(compute\) writes acc \[2, 6\) which instruction 3"
        r" \(compute\) also accesses.*alu pipe and the gemm pipe \(instruction 4 has"
        r" overlap = 1 and 3 is its partner\)",
    ):
        sim.run(_overlap_program(2)[0], check_races=True)


def test_a_partner_that_pushes_is_ordered_before():
    """Later instructions wait for a push, so the ALU after a pushing GEMM follows it."""
    sim.run(_overlap_program(2, gemm_pushes=True)[0], check_races=True)


@pytest.mark.parametrize("engine", ["numpy", "native"])
def test_the_functional_simulator_ignores_the_overlap_bit(engine):
    if engine == "native":
        pytest.importorskip("llvmlite", reason="the native engine needs llvmlite")
    results = []
    for overlap in (False, True):
        program, pb, out = _overlap_program(2, overlap)
        dram = sim.run(program, engine=engine).dram
        results.append(pb.read(dram, out, "out", 12).copy())
    assert results[0].any()
    np.testing.assert_array_equal(results[0], results[1])


def test_random_programs_with_overlap_bits_are_race_free_and_unchanged():
    """random_program(overlap=True) sets the bit only where it is legal: no race, and the same
    DRAM as the same program with the bits cleared."""
    import dataclasses

    from pyvta.isa import encode_insns

    flagged = 0
    for seed in range(40):
        marked = random_program(np.random.default_rng(seed), overlap=True)
        insns = marked.insns()
        flagged += sum(getattr(i, "overlap", False) for i in insns)
        plain = [
            dataclasses.replace(i, overlap=False) if hasattr(i, "overlap") else i for i in insns
        ]
        cleared = sim.Program(marked.dram.copy(), marked.insn_addr, marked.insn_count)
        raw = np.frombuffer(encode_insns(plain, marked.config), np.uint8)
        cleared.dram[marked.insn_addr : marked.insn_addr + raw.size] = raw
        got, expected = sim.run(marked, check_races=True).dram, sim.run(cleared).dram
        words = slice(marked.insn_addr, marked.insn_addr + raw.size)
        expected[words] = got[words] = 0  # the instruction words differ (the bit)
        np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}")
    print(f"seeds 0..39: {flagged} overlap bits")
    assert flagged > 10
