"""insert_dep_tokens on hand-written access lists: every conflict ordered, nothing else."""

import dataclasses
import itertools

import numpy as np

from pyvta import sim
from pyvta.compiler.backend.vta.deps import insert_dep_tokens, mark_overlaps
from pyvta.compiler.backend.vta.emitter import Emitter
from pyvta.isa import AluInsn, AluOp, GemmInsn, HwConfig, MemType, Module, Uop, encode_uops

HW = HwConfig()


def _run_all_orders(insns, dram):
    results = []
    for order in itertools.permutations(Module):
        for one in (False, True):
            d = dram.copy()
            r = sim.run_insns(insns, d, HW, module_order=order, one_per_turn=one)
            assert r.leftover_tokens == {}
            results.append(d)
    return results


def test_store_then_load_of_the_same_dram_is_relayed_through_compute():
    # Round trip: ACC rows -> ALU (+1) -> OUT -> STORE to DRAM X -> LOAD INP from X -> GEMM with
    # identity weights -> STORE to Y. The load must wait for the store, which share no queue.
    em = Emitter(HW)
    x_elem, y_elem, w_elem = 4096, 8192, 64  # element addresses (16 B / 16 B / 256 B units)
    em.load(MemType.ACC, 0, 1024, 1, 4, 4)  # 4 ACC rows from DRAM acc elem 1024 (64 KiB)
    em.loop(
        AluInsn(
            alu_opcode=AluOp.ADD,
            use_imm=True,
            imm=1,
            iter_out=4,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=1,
        ),
        [Uop(dst=0, src=0)],
    )
    em.store(0, x_elem, 1, 4, 4)
    em.load(MemType.INP, 0, x_elem, 1, 4, 4)
    em.load(MemType.WGT, 0, w_elem, 1, 1, 1)
    em.loop(GemmInsn(reset_reg=True, iter_out=4, iter_in=1, dst_factor_out=1), [Uop(dst=8)])
    em.loop(
        GemmInsn(iter_out=4, iter_in=1, dst_factor_out=1, src_factor_out=1),
        [Uop(dst=8, src=0, wgt=0)],
    )
    em.store(8, y_elem, 1, 4, 4)
    em.finish()
    insns, accesses = em.program(uop_dram_base=16)
    out = insert_dep_tokens(insns, accesses, HW)
    relays = [i for i in out if i.module is Module.COMPUTE and getattr(i, "x_size", 1) == 0]
    assert relays, "expected a token-only compute instruction relaying store -> load"

    rng = np.random.default_rng(3)
    dram = np.zeros(1 << 20, np.uint8)
    uops = np.frombuffer(encode_uops(em.uops, HW), np.uint8)
    dram[64 : 64 + uops.size] = uops
    acc_rows = rng.integers(-50, 50, (4, 16)).astype("<i4")
    dram[1024 * 64 : 1024 * 64 + acc_rows.nbytes] = acc_rows.view(np.uint8).reshape(-1)
    dram[w_elem * 256 : w_elem * 256 + 256] = np.eye(16, dtype=np.int8).view(np.uint8).reshape(-1)
    for d in _run_all_orders(out, dram):
        y = d[y_elem * 16 : y_elem * 16 + 64].view(np.int8).reshape(4, 16)
        assert np.array_equal(y, (acc_rows + 1).astype(np.int8))


def test_independent_instructions_get_no_tokens():
    em = Emitter(HW)
    em.load(MemType.INP, 0, 100, 1, 4, 4)
    em.loop(GemmInsn(reset_reg=True, iter_out=4, iter_in=1, dst_factor_out=1), [Uop(dst=0)])
    insns, accesses = em.program(uop_dram_base=16)
    out = insert_dep_tokens(insns, accesses, HW)
    assert not any(
        getattr(i, f)
        for i in out
        for f in ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
    )


def _gemm_then_alu(alu_row: int):
    """A GEMM over ACC rows [0, 8) and an ALU over [alu_row, alu_row + 8), then a store of both."""
    em = Emitter(HW)
    em.load(MemType.INP, 0, 100, 1, 8, 8)
    em.loop(GemmInsn(iter_out=8, iter_in=1, dst_factor_out=1, src_factor_out=1), [Uop(dst=0)])
    alu = AluInsn(alu_opcode=AluOp.MAX, use_imm=True, imm=0, iter_out=8, iter_in=1)
    em.loop(dataclasses.replace(alu, dst_factor_out=1, src_factor_out=1), [Uop(alu_row, alu_row)])
    em.store(0, 4096, 1, 16, 16)
    em.finish()
    return em.program(uop_dram_base=16)


def test_mark_overlaps_sets_the_bit_only_on_disjoint_rows():
    insns, accesses = _gemm_then_alu(8)
    marked = mark_overlaps(insns, accesses)
    assert [i.overlap for i in marked if isinstance(i, AluInsn)] == [True]
    assert not any(i.overlap for i in marked if isinstance(i, GemmInsn))  # no partner yet
    insns, accesses = _gemm_then_alu(4)
    assert not any(getattr(i, "overlap", False) for i in mark_overlaps(insns, accesses))


def test_a_consumer_of_both_pops_from_an_instruction_that_covers_the_partner():
    """The store reads the rows of the GEMM and of the ALU beside it: the ALU's push does not
    cover the GEMM (its partner), so the pass orders the store after both; the result is the
    same under every interleaving, and the race checker agrees."""
    insns, accesses = _gemm_then_alu(8)
    out = insert_dep_tokens(mark_overlaps(insns, accesses), accesses, HW)
    dram = np.random.default_rng(2).integers(-20, 20, 1 << 20).astype(np.uint8)
    uops = np.frombuffer(encode_uops([Uop(dst=0), Uop(8, 8)], HW), np.uint8)
    dram[64 : 64 + uops.size] = uops
    sim.run_insns(out, dram.copy(), HW, check_races=True)
    results = _run_all_orders(out, dram)
    assert all(np.array_equal(r, results[0]) for r in results)
