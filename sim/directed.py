"""Directed programs: every instruction type, GEMM/ALU loop form and padding case, small enough to
read in a disassembly. They check an accelerator that is not the simulator (the RTL, a board)
against it: each builder returns a ``sim.Program``, and the expected result is whatever
``sim.run`` computes.
"""

from __future__ import annotations

import numpy as np

from pyvta.isa import (
    DEFAULT_CONFIG,
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    HwConfig,
    Load,
    MemType,
    Store,
    Uop,
    clip_imm,
    encode_uops,
)
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.programs import (
    acc_load_program,
    alu_chain_program,
    matmul_program,
    padded_load_program,
)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _i8(rng, shape):
    return rng.integers(-128, 128, shape, dtype=np.int8)


def _two_weight_rows(wgt_addr: int) -> Load:
    """LOAD WGT rows 0 and 1 from ``wgt_addr``, then "tile loaded" to compute."""
    return Load(
        MemType.WGT,
        sram_base=0,
        dram_base=wgt_addr,
        y_size=1,
        x_size=2,
        x_stride=2,
        push_next_dep=True,
    )


def _store_and_finish(pb: ProgramBuilder, rows: int, stride: int | None = None):
    """STORE ``rows`` OUT rows twice (y_size 2, ``stride`` apart) one row into a fresh buffer, FINISH."""
    stride = rows if stride is None else stride
    o_addr = pb.alloc(stride * 2 + rows, "out")
    pb.store_and_finish(0, o_addr + 1, rows, y_size=2, x_stride=stride)


def gemm_loops_program(cfg: HwConfig = DEFAULT_CONFIG, seed: int = 0):
    """2-D unaligned UOP load, GEMM with both loop levels and all factors, GEMM reset, WGT pads
    (ignored), strided store."""
    rng = _rng(seed)
    pb = ProgramBuilder(cfg)
    inp_addr = pb.put(_i8(rng, (24, cfg.batch, cfg.block_in)), "inp")
    wgt_addr = pb.put(_i8(rng, (12, cfg.block_out, cfg.block_in)), "wgt")
    uops = [Uop(dst=d, src=(3 * d) % 7, wgt=d % 5) for d in range(16)]
    raw = np.frombuffer(encode_uops(uops, cfg), np.uint8)
    u_addr = pb.dram.put(raw, 64) // 4  # micro-op units
    # Three rows of 5 micro-ops, DRAM stride 5, starting one micro-op in (a narrow, unaligned read).
    pb.emit(Load(MemType.UOP, sram_base=3, dram_base=u_addr + 1, y_size=3, x_size=5, x_stride=5))
    pb.emit(Load(MemType.INP, sram_base=2, dram_base=inp_addr, y_size=2, x_size=9, x_stride=12))
    pb.emit(
        Load(
            MemType.WGT,
            sram_base=1,
            dram_base=wgt_addr,
            y_size=1,
            x_size=12,
            x_stride=12,
            y_pad_0=2,
            x_pad_1=3,
            push_next_dep=True,
        )
    )
    pb.emit(
        GemmInsn(
            reset_reg=True,
            uop_bgn=3,
            uop_end=18,
            iter_out=2,
            iter_in=1,
            dst_factor_out=20,
            pop_prev_dep=True,
        )
    )
    pb.emit(
        GemmInsn(
            uop_bgn=3,
            uop_end=18,
            iter_out=2,
            iter_in=3,
            dst_factor_out=20,
            dst_factor_in=0,
            src_factor_out=5,
            src_factor_in=2,
            wgt_factor_out=3,
            wgt_factor_in=1,
            push_next_dep=True,
        )
    )
    _store_and_finish(pb, rows=35, stride=40)
    return pb.build()


def alu_ops_program(cfg: HwConfig = DEFAULT_CONFIG, seed: int = 0):
    """Every ALU op with a register operand and with immediates, incl. negative and large shifts
    and CLIP's bounds from a register and an immediate."""
    rng = _rng(seed)
    rows = 6
    a = rng.integers(-(2**31), 2**31, (rows, cfg.block_out), dtype=np.int64).astype(np.int32)
    b = rng.integers(-40, 40, (rows, cfg.block_out)).astype(np.int32)
    b[0, :4] = [31, 32, -31, -33]
    b[1, :3] = [2**31 - 1, -(2**31), 0]
    steps = [
        (AluOp.SHR, False, 0),
        (AluOp.CLIP, False, 0),  # bounds: the bytes of the src lanes' low half-word
        (AluOp.ADD, False, 0),
        (AluOp.MUL, False, 0),
        (AluOp.MAX, False, 0),
        (AluOp.MIN, False, 0),
        (AluOp.SHR, True, -3),
        (AluOp.SHR, True, 40),
        (AluOp.SHR, True, -40),
        (AluOp.MUL, True, -32768),
        (AluOp.ADD, True, 32767),
        (AluOp.MIN, True, -7),
        (AluOp.MAX, True, 5),
        (AluOp.ADD, True, 7),
        (AluOp.CLIP, True, clip_imm(-100, 90)),
    ]
    return alu_chain_program(a, b, steps=steps, cfg=cfg).program


def alu_src_raw_program(cfg: HwConfig = DEFAULT_CONFIG, seed: int = 0):
    """ALU whose source row was written by the micro-op just before (read-after-write through src)."""
    rng = _rng(seed)
    pb = ProgramBuilder(cfg)
    rows = 8
    a = rng.integers(-1000, 1000, (rows, cfg.batch, cfg.block_out)).astype("<i4")
    a_addr = pb.put(a, "acc")
    pb.emit(Load(MemType.ACC, sram_base=0, dram_base=a_addr, y_size=1, x_size=rows, x_stride=rows))
    pb.load_uops([Uop(dst=1, src=0)], sram_base=10)
    # acc[i+1] = acc[i+1] + acc[i] for i = 0..6: a prefix sum, each step reads the row just written.
    pb.emit(
        AluInsn(
            alu_opcode=AluOp.ADD,
            uop_bgn=10,
            uop_end=11,
            iter_out=rows - 1,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=1,
            push_next_dep=True,
        )
    )
    _store_and_finish(pb, rows=rows)
    return pb.build()


def dram_bursts_program(cfg: HwConfig = DEFAULT_CONFIG, seed: int = 0):
    """Long rows: a WGT load across several 4 KiB pages and an INP row of more than 256 beats."""
    rng = _rng(seed)
    pb = ProgramBuilder(cfg)
    n_wgt, n_inp = 40, 150
    wgt_addr = pb.put(_i8(rng, (n_wgt, cfg.block_out, cfg.block_in)), "wgt")
    inp_addr = pb.put(_i8(rng, (n_inp, cfg.batch, cfg.block_in)), "inp")
    pb.emit(
        Load(MemType.WGT, sram_base=7, dram_base=wgt_addr, y_size=1, x_size=n_wgt, x_stride=n_wgt)
    )
    pb.emit(
        Load(
            MemType.INP,
            sram_base=0,
            dram_base=inp_addr + 1,
            y_size=1,
            x_size=n_inp - 1,
            x_stride=n_inp,
            push_next_dep=True,
        )
    )
    pb.load_uops([Uop(dst=0, src=0, wgt=7)], sram_base=0)
    pb.emit(
        GemmInsn(
            reset_reg=True,
            uop_bgn=0,
            uop_end=1,
            iter_out=n_wgt,
            iter_in=1,
            dst_factor_out=1,
            pop_prev_dep=True,
        )
    )
    pb.emit(
        GemmInsn(
            uop_bgn=0,
            uop_end=1,
            iter_out=3,
            iter_in=n_wgt,
            dst_factor_in=1,
            src_factor_out=1,
            src_factor_in=3,
            wgt_factor_in=1,
            push_next_dep=True,
        )
    )
    _store_and_finish(pb, rows=n_wgt, stride=n_wgt + 3)
    return pb.build()


def cross_insn_raw_program(cfg: HwConfig = DEFAULT_CONFIG, seed: int = 0):
    """GEMM and ALU instructions of one micro-op each, back to back with no token between them,
    each reading ACC rows the one before has just written (through dst and through src): a
    pipelined compute unit that lets an instruction follow the previous one without a drain
    must stall on these hazards across instructions."""
    rng = _rng(seed)
    pb = ProgramBuilder(cfg)
    acc = rng.integers(-3000, 3000, (4, cfg.batch, cfg.block_out)).astype("<i4")
    acc_addr = pb.put(acc, "acc")
    inp_addr = pb.put(_i8(rng, (2, cfg.batch, cfg.block_in)), "inp")
    wgt_addr = pb.put(_i8(rng, (2, cfg.block_out, cfg.block_in)), "wgt")
    pb.emit(Load(MemType.ACC, sram_base=0, dram_base=acc_addr, y_size=1, x_size=4, x_stride=4))
    uops = [
        Uop(dst=0, src=0, wgt=0),  # 0: GEMM acc[0] += inp[0] . wgt[0]
        Uop(dst=1, src=0),  # 1: ALU acc[1] op= acc[0]
        Uop(dst=1),  # 2: ALU acc[1] op= imm
        Uop(dst=1, src=1, wgt=1),  # 3: GEMM acc[1] += inp[1] . wgt[1]
        Uop(dst=2, src=1),  # 4: ALU acc[2] op= acc[1]
        Uop(dst=3, src=0, wgt=0),  # 5: GEMM into acc[3]
        Uop(dst=3, src=2),  # 6: ALU acc[3] op= acc[2]
    ]
    pb.load_uops(uops, sram_base=0)
    pb.emit(Load(MemType.INP, sram_base=0, dram_base=inp_addr, y_size=1, x_size=2, x_stride=2))
    pb.emit(_two_weight_rows(wgt_addr))

    def gemm(u: int, **kw):
        return GemmInsn(uop_bgn=u, uop_end=u + 1, iter_out=1, iter_in=1, **kw)

    def alu(u: int, op: AluOp, imm: int | None = None, **kw):
        return AluInsn(
            alu_opcode=op,
            uop_bgn=u,
            uop_end=u + 1,
            iter_out=1,
            iter_in=1,
            use_imm=imm is not None,
            imm=imm or 0,
            **kw,
        )

    pb.emit(gemm(0, pop_prev_dep=True))
    pb.emit(alu(1, AluOp.ADD))
    pb.emit(alu(2, AluOp.MUL, imm=-3))
    pb.emit(gemm(3))
    pb.emit(alu(4, AluOp.MAX))
    pb.emit(gemm(5, reset_reg=True))
    pb.emit(gemm(5))
    pb.emit(alu(6, AluOp.ADD))
    pb.emit(alu(6, AluOp.SHR, imm=2, push_next_dep=True))
    _store_and_finish(pb, rows=4)
    return pb.build()


def narrow_rows_program(cfg: HwConfig = DEFAULT_CONFIG, seed: int = 0):
    """DRAM rows of one and two elements (INP loads, an OUT store: each row one DMA request, so
    they run at the request rate, not the bus's) and a GEMM whose micro-ops accumulate into the
    ACC row of the micro-op two before (two output pixels innermost: the issue stage holds
    each one until that row is written)."""
    rng = _rng(seed)
    pb = ProgramBuilder(cfg)
    inp_addr = pb.put(_i8(rng, (24, cfg.batch, cfg.block_in)), "inp")
    wgt_addr = pb.put(_i8(rng, (2, cfg.block_out, cfg.block_in)), "wgt")
    pb.load_uops(
        [Uop(dst=0), Uop(dst=0, src=0, wgt=0), Uop(dst=1, src=1, wgt=0)]
        + [Uop(dst=0, src=2, wgt=1), Uop(dst=1, src=3, wgt=1)],
        0,
    )
    # rows of one element (every other one) into INP 0..5, of two (every fourth pair) into 6..11
    pb.emit(Load(MemType.INP, sram_base=0, dram_base=inp_addr, y_size=6, x_size=1, x_stride=2))
    pb.emit(Load(MemType.INP, sram_base=6, dram_base=inp_addr + 12, y_size=3, x_size=2, x_stride=4))
    pb.emit(_two_weight_rows(wgt_addr))
    pb.emit(GemmInsn(reset_reg=True, uop_bgn=0, uop_end=1, iter_out=6, iter_in=1, dst_factor_out=1))
    pb.emit(
        GemmInsn(
            uop_bgn=1,
            uop_end=5,
            iter_out=3,
            iter_in=1,
            dst_factor_out=2,
            src_factor_out=4,
            pop_prev_dep=True,
            push_next_dep=True,
        )
    )
    o_addr = pb.alloc(16, "out")
    pb.store_and_finish(0, o_addr + 1, 2, y_size=3, x_stride=5)
    return pb.build()


def dep_only_program(cfg: HwConfig = DEFAULT_CONFIG):
    """LOAD/STORE with x_size 0 only pass tokens around (load -> compute -> store -> compute)."""
    pb = ProgramBuilder(cfg)
    pb.emit(Load(MemType.INP, push_next_dep=True))
    pb.emit(Load(MemType.UOP, pop_prev_dep=True, push_next_dep=True, push_prev_dep=True))
    pb.emit(Store(pop_prev_dep=True, push_prev_dep=True))
    pb.emit(Load(MemType.WGT, pop_next_dep=True))
    pb.emit(FinishInsn(pop_next_dep=True))
    return pb.build()


def directed_programs(cfg: HwConfig = DEFAULT_CONFIG) -> dict[str, object]:
    """Name -> Program for every directed case."""
    rng = _rng(7)
    bi, bo = cfg.block_in, cfg.block_out
    progs = {
        "matmul_small": matmul_program(
            _i8(rng, (4, 2 * bi)), _i8(rng, (2 * bi, 2 * bo)), cfg
        ).program,
        "matmul_tiled_xpad": matmul_program(
            _i8(rng, (9, 3 * bi)), _i8(rng, (5 * bi, 3 * bo)), cfg, x_pad_blocks=(1, 1), tile_rows=4
        ).program,
        "gemm_loops": gemm_loops_program(cfg),
        "alu_ops": alu_ops_program(cfg),
        "alu_chain": alu_chain_program(
            rng.integers(-5000, 5000, (5, cfg.block_out)).astype(np.int32),
            rng.integers(-5000, 5000, (5, cfg.block_out)).astype(np.int32),
            cfg=cfg,
        ).program,
        "alu_src_raw": alu_src_raw_program(cfg),
        "cross_insn_raw": cross_insn_raw_program(cfg),
        "dram_bursts": dram_bursts_program(cfg),
        "narrow_rows": narrow_rows_program(cfg),
        "dep_only": dep_only_program(cfg),
    }
    for pads in [(0, 0, 0, 0), (1, 2, 3, 4), (0, 3, 0, 0), (0, 0, 2, 0), (15, 15, 15, 15)]:
        data = _i8(rng, (3, 2, cfg.block_in))
        name = "pad_inp_" + "_".join(map(str, pads))
        progs[name] = padded_load_program(data, pads, cfg).program
    for eight_bit in (False, True):
        for pads in [(0, 0, 0, 0), (2, 1, 1, 3)]:
            shape = (2, 3, cfg.block_out)
            data = (
                _i8(rng, shape)
                if eight_bit
                else rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
            )
            name = f"pad_{'acc8' if eight_bit else 'acc'}_" + "_".join(map(str, pads))
            progs[name] = acc_load_program(data, pads, eight_bit=eight_bit, cfg=cfg).program
    return progs
