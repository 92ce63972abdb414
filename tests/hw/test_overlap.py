"""The compute unit's overlap contract (``isa.layout.OVERLAP_DOC``) on the fast RTL device: two
lanes (GEMM, ALU) that run one virtual thread's epilogue beside the other's GEMMs, and the ALU's
src-row register (rule 8); bit for bit against ``sim.run`` and in cycles."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import AluInsn, AluOp, FinishInsn, GemmInsn, Load, MemType, Store, Uop
from pyvta.sim.builder import ProgramBuilder
from pyvta.testing.compare import accelerator_mismatches, device_runs

pytestmark = pytest.mark.hw
SEED = 19


def _acc_rows(pb: ProgramBuilder, rows: int, seed: int = SEED) -> None:
    """LOAD ``rows`` random int32 ACC rows at row 0."""
    cfg = pb.cfg
    a = np.random.default_rng(seed).integers(-1000, 1000, (rows, cfg.batch, cfg.block_out))
    addr = pb.put(a.astype("<i4"), "acc")
    pb.emit(Load(MemType.ACC, sram_base=0, dram_base=addr, y_size=1, x_size=rows, x_stride=rows))


def _bias_program(rows: int, reuse: bool, total: int = 64):
    """acc[i] += acc[bias] for i < rows: one bias row (``reuse``, the broadcast) or one per row.
    The loads and the store are those of ``total`` rows, whatever ``rows``."""
    pb = ProgramBuilder()
    _acc_rows(pb, 2 * total)
    pb.load_uops([Uop(dst=0, src=total)], sram_base=0)
    pb.emit(
        AluInsn(
            alu_opcode=AluOp.ADD,
            uop_bgn=0,
            uop_end=1,
            iter_out=rows,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=0 if reuse else 1,
            push_next_dep=True,
        )
    )
    o_addr = pb.alloc(total, "out")
    pb.store_and_finish(0, o_addr, total)
    return pb.build()


def _src_rewritten_program():
    """The src row is rewritten between micro-ops that read it (by ALU micro-ops of the same and
    of the next instruction): the src-row register must not serve the old row."""
    pb = ProgramBuilder()
    _acc_rows(pb, 8)
    uops = [Uop(dst=1, src=0), Uop(dst=0, src=3), Uop(dst=2, src=0), Uop(dst=4, src=0)]
    pb.load_uops(uops + [Uop(dst=0, src=0)], sram_base=0)
    pb.emit(AluInsn(alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=4, iter_out=1, iter_in=1))
    pb.emit(AluInsn(alu_opcode=AluOp.ADD, uop_bgn=4, uop_end=5, iter_out=1, iter_in=1, imm=7,
                    use_imm=True))  # fmt: skip
    pb.emit(AluInsn(alu_opcode=AluOp.MAX, uop_bgn=2, uop_end=4, iter_out=2, iter_in=1,
                    dst_factor_out=3, push_next_dep=True))  # fmt: skip
    o_addr = pb.alloc(8, "out")
    pb.store_and_finish(0, o_addr, 8)
    return pb.build()


def _cycles(dev, program) -> int:
    """The program's RTL cycles, after checking it is legal (``sim.run`` with race checking: the
    overlap contract's promise) and bit-exact on the RTL."""
    sim.run(program, check_races=True)
    bad = accelerator_mismatches([("program", program)], device_runs(dev, [program]))
    assert not bad, bad
    return dev.run_program(program)[1].cycles


def test_src_row_register_is_invalidated_by_writes(rtl_device):
    program = _src_rewritten_program()
    bad = accelerator_mismatches([("src rewritten", program)], device_runs(rtl_device, [program]))
    assert not bad, "\n".join(bad)


def test_bias_broadcast_takes_one_cycle_per_micro_op(rtl_device):
    """Rule 8: an ALU micro-op whose src row is the previous one's takes one cycle; a new src row
    each micro-op takes two (one ACC read port: src, then dst)."""
    per_row = {}
    for reuse in (True, False):
        c = {rows: _cycles(rtl_device, _bias_program(rows, reuse)) for rows in (32, 64)}
        per_row[reuse] = (c[64] - c[32]) / 32
    print(f"\ncycles per ALU micro-op: src row repeated {per_row[True]}, new {per_row[False]}")
    assert per_row[True] <= 1.1, per_row
    assert per_row[False] >= 1.9, per_row


def _two_thread_program(rows: int, overlap: bool, k_iters: int = 4):
    """Two virtual threads, ACC rows 0.. (bank 0) and ``depth // 2``.. (bank 1): GEMM reset and
    ``k_iters`` accumulating GEMMs each, then an epilogue (SHR, bias ADD, MAX, MIN) each, thread
    0's stored as soon as its epilogue pushes. With ``overlap``, thread 0's epilogue carries the
    bit: its partner is thread 1's GEMM (disjoint rows), so it runs beside it."""
    pb = ProgramBuilder()
    cfg = pb.cfg
    rng = np.random.default_rng(SEED)
    base = [0, cfg.depth_of("acc") // 2]
    bias = [rows, base[1] + rows]
    inp = pb.put(rng.integers(-128, 128, (rows, cfg.batch, cfg.block_in), dtype=np.int8), "inp")
    wgt = pb.put(rng.integers(-128, 128, (1, cfg.block_out, cfg.block_in), dtype=np.int8), "wgt")
    pb.emit(Load(MemType.INP, dram_base=inp, y_size=1, x_size=rows, x_stride=rows))
    pb.emit(Load(MemType.WGT, dram_base=wgt, y_size=1, x_size=1, x_stride=1, push_next_dep=True))
    gemm_uops = [Uop(dst=b, src=0, wgt=0) for b in base]
    alu_uops = [Uop(dst=b, src=b) for b in base] + [
        Uop(dst=b, src=c) for b, c in zip(base, bias, strict=True)
    ]
    pb.load_uops(gemm_uops + alu_uops, sram_base=0)
    b_rows = rng.integers(-5000, 5000, (1, cfg.batch, cfg.block_out)).astype("<i4")
    b_addr = pb.put(b_rows, "acc")
    for row in bias:
        pb.emit(Load(MemType.ACC, sram_base=row, dram_base=b_addr, y_size=1, x_size=1, x_stride=1))
    loop = dict(iter_out=rows, dst_factor_out=1)
    for t in (0, 1):
        pb.emit(GemmInsn(reset_reg=True, uop_bgn=t, uop_end=t + 1, pop_prev_dep=t == 0, **loop))
        pb.emit(
            GemmInsn(
                uop_bgn=t,
                uop_end=t + 1,
                iter_out=k_iters,
                iter_in=rows,
                dst_factor_in=1,
                src_factor_in=1,
            )
        )
    outs = [pb.alloc(rows, "out") for _ in base]
    steps = [(AluOp.SHR, 3), (AluOp.ADD, None), (AluOp.MAX, -300), (AluOp.MIN, 300)]
    for t in (0, 1):
        for n, (alu_op, imm) in enumerate(steps):
            u = 2 + t + (2 if imm is None else 0)
            pb.emit(
                AluInsn(
                    alu_opcode=alu_op,
                    uop_bgn=u,
                    uop_end=u + 1,
                    iter_in=1,
                    src_factor_out=0 if imm is None else 1,
                    use_imm=imm is not None,
                    imm=imm or 0,
                    overlap=overlap and t == 0,
                    push_next_dep=n == len(steps) - 1,
                    **loop,
                )
            )
        if t == 0:
            pb.emit(Store(sram_base=0, dram_base=outs[0], y_size=1, x_size=rows, x_stride=rows,
                          pop_prev_dep=True))  # fmt: skip
    pb.store_and_finish(base[1], outs[1], rows)
    return pb.build()


def test_epilogue_runs_beside_the_other_threads_gemm(rtl_device):
    """Thread 0's epilogue (4 x rows ALU micro-ops) overlaps thread 1's GEMMs: same results as the
    program without the bits (and the simulator), and at least half the epilogue's cycles fewer.
    Serialised lanes would take as long as without the bits."""
    rows = 64
    cycles = {ov: _cycles(rtl_device, _two_thread_program(rows, ov)) for ov in (False, True)}
    saved = cycles[False] - cycles[True]
    print(
        f"\ntwo threads, {rows} rows: cycles without overlap {cycles[False]}, with {cycles[True]}"
    )
    assert saved >= 2 * rows, cycles


def _gemm_beside_epilogue_program(rows: int, overlap: bool, k_iters: int = 4):
    """Thread 0's GEMM, then its epilogue (one ALU instruction, ``k_iters`` x ``rows`` micro-ops),
    then thread 1's GEMM reset and GEMM, which carry the bit with ``overlap`` (partner: thread
    0's epilogue, rows in the other bank), then thread 1's epilogue; both stored at the end."""
    pb = ProgramBuilder()
    cfg = pb.cfg
    rng = np.random.default_rng(SEED + 1)
    base = [0, cfg.depth_of("acc") // 2]
    inp = pb.put(rng.integers(-128, 128, (rows, cfg.batch, cfg.block_in), dtype=np.int8), "inp")
    wgt = pb.put(rng.integers(-128, 128, (1, cfg.block_out, cfg.block_in), dtype=np.int8), "wgt")
    pb.emit(Load(MemType.INP, dram_base=inp, y_size=1, x_size=rows, x_stride=rows))
    pb.emit(Load(MemType.WGT, dram_base=wgt, y_size=1, x_size=1, x_stride=1, push_next_dep=True))
    pb.load_uops([Uop(dst=b, src=0, wgt=0) for b in base] + [Uop(dst=b) for b in base], 0)
    for t in (0, 1):
        ov = overlap and t == 1
        first = dict(pop_prev_dep=t == 0)
        pb.emit(GemmInsn(reset_reg=True, uop_bgn=t, uop_end=t + 1, iter_out=rows, iter_in=1,
                         dst_factor_out=1, overlap=ov, **first))  # fmt: skip
        pb.emit(GemmInsn(uop_bgn=t, uop_end=t + 1, iter_out=k_iters, iter_in=rows,
                         dst_factor_in=1, src_factor_in=1, overlap=ov))  # fmt: skip
        pb.emit(AluInsn(alu_opcode=AluOp.ADD, uop_bgn=2 + t, uop_end=3 + t, iter_out=k_iters,
                        iter_in=rows, dst_factor_in=1, src_factor_in=1, use_imm=True, imm=-9,
                        push_next_dep=t == 1))  # fmt: skip
    outs = [pb.alloc(rows, "out") for _ in base]
    pb.emit(Store(sram_base=base[0], dram_base=outs[0], y_size=1, x_size=rows, x_stride=rows,
                  pop_prev_dep=True))  # fmt: skip
    pb.emit(Store(sram_base=base[1], dram_base=outs[1], y_size=1, x_size=rows, x_stride=rows,
                  push_prev_dep=True))  # fmt: skip
    pb.emit(FinishInsn(pop_next_dep=True))
    return pb.build()


def test_gemm_runs_beside_the_other_threads_epilogue(rtl_device):
    """The GEMM side of rule 3: thread 1's GEMMs carry the bit and run beside thread 0's epilogue
    (its partner): same results, and at least half the epilogue's cycles fewer."""
    rows = 64
    progs = {ov: _gemm_beside_epilogue_program(rows, ov) for ov in (False, True)}
    cycles = {ov: _cycles(rtl_device, p) for ov, p in progs.items()}
    print(
        f"\nGEMM beside the epilogue: cycles without overlap {cycles[False]}, with {cycles[True]}"
    )
    assert cycles[False] - cycles[True] >= 2 * rows, cycles
