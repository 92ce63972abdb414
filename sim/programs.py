"""Hand-built example programs: a tiled int8 matrix multiply with tokens and double buffering,
padded loads, an ALU chain, and seeded random valid programs (for differential testing).

Each builder returns the Program and a ``readback(dram) -> result`` function, plus (where it has
one) the numpy reference the result must equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
)
from pyvta.isa.layout import MEMOP_PAD_BITS
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.errors import ArgumentError
from pyvta.sim.program import Program

MAX_PAD = (1 << MEMOP_PAD_BITS) - 1


@dataclass
class Example:
    program: Program
    readback: Callable[[np.ndarray], np.ndarray]
    expected: np.ndarray | None = None


def pack_inp(a: np.ndarray, cfg: HwConfig) -> np.ndarray:
    """(M, K) int8 -> (M, K/block_in, block_in): one INP row per (m, k-block) (batch 1)."""
    m, k = a.shape
    return np.ascontiguousarray(a.reshape(m, k // cfg.block_in, cfg.block_in))


def pack_wgt(b: np.ndarray, cfg: HwConfig) -> np.ndarray:
    """(K, N) int8 -> (N/bo, K/bi, bo, bi): WGT rows [n-block][k-block], output-major."""
    k, n = b.shape
    bi, bo = cfg.block_in, cfg.block_out
    return np.ascontiguousarray(b.reshape(k // bi, bi, n // bo, bo).transpose(2, 0, 3, 1))


def matmul_program(
    a: np.ndarray,
    b: np.ndarray,
    cfg: HwConfig = DEFAULT_CONFIG,
    x_pad_blocks: tuple[int, int] = (0, 0),
    tile_rows: int | None = None,
) -> Example:
    """C = A @ B[k0:k0+K] in int32 on the accelerator (batch 1), with tokens and double buffering.

    ``a`` is (M, K) int8 with K a multiple of block_in; ``b`` is (Kb, N) int8 with N a multiple of
    block_out and Kb = K + block_in * (x_pad_blocks[0] + x_pad_blocks[1]): A's rows are zero-padded
    in the load (x_pad) so the padded B rows must not contribute. Rows of the last tile past M are
    y-padded with zeros. The int32 result leaves the accelerator as four byte planes (STORE of
    OUT after ALU shifts by 8) that ``readback`` reassembles.
    """
    if cfg.batch != 1:
        raise ArgumentError(f"matmul_program needs BATCH=1, config has {cfg.batch}")
    for name, arr in (("a", a), ("b", b)):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.int8 or arr.ndim != 2:
            got = f"{arr.dtype}{list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr)
            raise ArgumentError(
                f"{name} must be a 2-D int8 array, got {got} (its bytes would be reinterpreted;"
                " convert with np.clip(x, -128, 127).astype(np.int8))"
            )
    bi, bo = cfg.block_in, cfg.block_out
    m, k = a.shape
    kb_rows, n = b.shape
    x0, x1 = x_pad_blocks
    if k % bi or n % bo or kb_rows != k + bi * (x0 + x1) or max(x0, x1) > MAX_PAD:
        raise ArgumentError(
            f"shapes A {a.shape}, B {b.shape}, x_pad {x_pad_blocks} do not fit: K and N must be"
            f" multiples of {bi}/{bo}, B rows = K + {bi}*(x_pad), pads <= {MAX_PAD}"
        )
    kbt, nb = kb_rows // bi, n // bo  # k blocks as seen by the GEMM (with padding), n blocks
    if nb * kbt > cfg.wgt_depth:
        raise ArgumentError(f"B needs {nb * kbt} WGT rows; the buffer has {cfg.wgt_depth}")
    if tile_rows is None:
        tile_rows = 1
        while (
            tile_rows * 2 * kbt * 2 <= cfg.inp_depth
            and tile_rows * 2 * nb * 2 <= cfg.acc_depth
            and tile_rows < m
        ):
            tile_rows *= 2
    t_rows = tile_rows
    if 2 * t_rows * kbt > cfg.inp_depth or 2 * t_rows * nb > cfg.acc_depth:
        raise ArgumentError(f"tile_rows {t_rows} does not fit two INP/ACC tiles")
    n_tiles = -(-m // t_rows)
    pb = ProgramBuilder(cfg)
    a_addr = pb.put(pack_inp(a, cfg), "inp")
    w_addr = pb.put(pack_wgt(b, cfg), "wgt")
    plane_elems = n_tiles * t_rows * nb
    out_addr = pb.alloc(4 * plane_elems, "out")

    def uops_for(buf: int) -> tuple[list[Uop], list[Uop], list[Uop]]:
        acc0, inp0 = buf * t_rows * nb, buf * t_rows * kbt
        reset = [Uop(dst=acc0 + j) for j in range(nb)]
        main = [Uop(dst=acc0 + j, src=inp0, wgt=j * kbt) for j in range(nb)]
        shift = [Uop(dst=acc0 + j, src=acc0 + j) for j in range(nb)]
        return reset, main, shift

    all_uops, offsets = [], []
    for buf in (0, 1):
        for group in uops_for(buf):
            offsets.append(len(all_uops))
            all_uops += group
    pb.load_uops(all_uops, sram_base=0)
    pb.emit(
        Load(
            MemType.WGT, sram_base=0, dram_base=w_addr, y_size=1, x_size=nb * kbt, x_stride=nb * kbt
        )
    )

    load_q, compute_q, store_q = [], [], []
    for t in range(n_tiles):
        buf = t % 2
        rows = min(t_rows, m - t * t_rows)
        y_pad = min(t_rows - rows, MAX_PAD)
        load_q.append(
            Load(
                MemType.INP,
                sram_base=buf * t_rows * kbt,
                dram_base=a_addr + t * t_rows * (k // bi),
                y_size=rows,
                x_size=k // bi,
                x_stride=k // bi,
                y_pad_1=y_pad,
                x_pad_0=x0,
                x_pad_1=x1,
                pop_next_dep=t >= 2,
                push_next_dep=True,
            )
        )
        o_reset, o_main, o_shift = offsets[3 * buf : 3 * buf + 3]
        compute_q.append(
            GemmInsn(
                reset_reg=True,
                uop_bgn=o_reset,
                uop_end=o_reset + nb,
                iter_out=t_rows,
                iter_in=1,
                dst_factor_out=nb,
                pop_next_dep=t >= 1,
            )
        )
        compute_q.append(
            GemmInsn(
                uop_bgn=o_main,
                uop_end=o_main + nb,
                iter_out=kbt,
                iter_in=t_rows,
                src_factor_out=1,
                wgt_factor_out=1,
                dst_factor_in=nb,
                src_factor_in=kbt,
                pop_prev_dep=True,
                push_prev_dep=True,
                push_next_dep=True,
            )
        )
        for _ in range(3):
            compute_q.append(
                AluInsn(
                    alu_opcode=AluOp.SHR,
                    use_imm=True,
                    imm=8,
                    uop_bgn=o_shift,
                    uop_end=o_shift + nb,
                    iter_out=t_rows,
                    iter_in=1,
                    dst_factor_out=nb,
                    src_factor_out=nb,
                    pop_next_dep=True,
                    push_next_dep=True,
                )
            )
        for p in range(4):
            store_q.append(
                Store(
                    sram_base=buf * t_rows * nb,
                    dram_base=out_addr + p * plane_elems + t * t_rows * nb,
                    y_size=1,
                    x_size=rows * nb,
                    x_stride=rows * nb,
                    pop_prev_dep=True,
                    push_prev_dep=True,
                )
            )
    for _ in range(min(n_tiles, 2)):  # drain the c2l tokens nobody waits for
        load_q.append(Load(MemType.INP, pop_next_dep=True))
    compute_q.append(FinishInsn(pop_next_dep=True))
    # One stream: fetch dispatches in order, each module sees its own queue in order.
    for insn in load_q + compute_q + store_q:
        pb.emit(insn)
    program = pb.build()

    def readback(dram: np.ndarray) -> np.ndarray:
        raw = pb.read(dram, out_addr, "out", 4 * plane_elems).reshape(4, n_tiles * t_rows, n)
        planes = raw[:, :m].astype(np.uint32)
        word = planes[0] | planes[1] << 8 | planes[2] << 16 | planes[3] << 24
        return word.view(np.int32)

    b_used = b[x0 * bi : x0 * bi + k].astype(np.int64)
    expected = (a.astype(np.int64) @ b_used).astype(np.int32)
    return Example(program, readback, expected)


def _store_and_finish(
    pb: ProgramBuilder, sram_base: int, o_addr: int, shape: tuple[int, ...]
) -> tuple[Program, Callable[[np.ndarray], np.ndarray]]:
    """STORE the OUT rows holding ``shape`` (rows first) to ``o_addr`` after compute's token,
    FINISH after the store's; returns the program and a readback of those rows as int8."""
    rows = int(np.prod(shape[:-1]))
    pb.store_and_finish(sram_base, o_addr, rows)
    program = pb.build()

    def readback(dram: np.ndarray) -> np.ndarray:
        return pb.read(dram, o_addr, "out", rows).view(np.int8).reshape(shape)

    return program, readback


def _identity_wgt(cfg: HwConfig) -> np.ndarray:
    return np.eye(cfg.block_out, cfg.block_in, dtype=np.int8)[None]


def padded_load_program(
    data: np.ndarray, pads: tuple[int, int, int, int], cfg: HwConfig = DEFAULT_CONFIG
) -> Example:
    """LOAD INP with zero padding (y_pad_0, y_pad_1, x_pad_0, x_pad_1), copied to OUT by a GEMM
    with identity weights, then stored: the result is ``np.pad`` of the (rows, cols, block_in)
    int8 ``data`` (batch 1)."""
    rows, cols, _ = data.shape
    y0, y1, x0, x1 = pads
    out_rows, out_cols = y0 + rows + y1, x0 + cols + x1
    total = out_rows * out_cols
    pb = ProgramBuilder(cfg)
    d_addr = pb.put(np.ascontiguousarray(data, np.int8), "inp")
    w_addr = pb.put(_identity_wgt(cfg), "wgt")
    o_addr = pb.alloc(total, "out")
    pb.emit(Load(MemType.WGT, sram_base=3, dram_base=w_addr, y_size=1, x_size=1, x_stride=1))
    pb.emit(
        Load(
            MemType.INP,
            sram_base=5,
            dram_base=d_addr,
            y_size=rows,
            x_size=cols,
            x_stride=cols,
            y_pad_0=y0,
            y_pad_1=y1,
            x_pad_0=x0,
            x_pad_1=x1,
            push_next_dep=True,
        )
    )
    pb.load_uops([Uop(dst=0, src=5, wgt=3)], sram_base=0)
    pb.emit(
        GemmInsn(reset_reg=True, uop_bgn=0, uop_end=1, iter_out=total, iter_in=1, dst_factor_out=1)
    )
    pb.emit(
        GemmInsn(
            uop_bgn=0,
            uop_end=1,
            iter_out=total,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=1,
            pop_prev_dep=True,
            push_next_dep=True,
        )
    )
    program, readback = _store_and_finish(pb, 0, o_addr, (out_rows, out_cols, cfg.block_out))
    expected = np.pad(data, ((y0, y1), (x0, x1), (0, 0)))

    return Example(program, readback, expected)


def acc_load_program(
    data: np.ndarray,
    pads: tuple[int, int, int, int],
    eight_bit: bool = False,
    cfg: HwConfig = DEFAULT_CONFIG,
) -> Example:
    """LOAD ACC (int32 rows) or ACC_8BIT (int8 rows, sign-extended) with padding, ALU ADD 0 to
    copy into OUT, STORE: the result is the low byte of ``np.pad(data)``. ``data`` is
    (rows, cols, block_out) int32 or int8."""
    rows, cols, _ = data.shape
    y0, y1, x0, x1 = pads
    out_rows, out_cols = y0 + rows + y1, x0 + cols + x1
    total = out_rows * out_cols
    pb = ProgramBuilder(cfg)
    mem = MemType.ACC_8BIT if eight_bit else MemType.ACC
    d_addr = pb.put(
        np.ascontiguousarray(data, np.int8 if eight_bit else "<i4"), "out" if eight_bit else "acc"
    )
    o_addr = pb.alloc(total, "out")
    pb.load_uops([Uop(dst=7, src=7)], sram_base=2)
    pb.emit(
        Load(
            mem,
            sram_base=7,
            dram_base=d_addr,
            y_size=rows,
            x_size=cols,
            x_stride=cols,
            y_pad_0=y0,
            y_pad_1=y1,
            x_pad_0=x0,
            x_pad_1=x1,
        )
    )
    pb.emit(
        AluInsn(
            alu_opcode=AluOp.ADD,
            use_imm=True,
            imm=0,
            uop_bgn=2,
            uop_end=3,
            iter_out=total,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=1,
            push_next_dep=True,
        )
    )
    program, readback = _store_and_finish(pb, 7, o_addr, (out_rows, out_cols, cfg.block_out))
    expected = np.pad(data.astype(np.int32), ((y0, y1), (x0, x1), (0, 0))).astype(np.int8)

    return Example(program, readback, expected)


# (opcode, use_imm, imm) steps of the ALU chain example.
ALU_CHAIN = (
    (AluOp.ADD, False, 0),
    (AluOp.MUL, True, 3),
    (AluOp.SHR, True, 2),
    (AluOp.ADD, True, -5),
    (AluOp.MAX, True, -128),
    (AluOp.MIN, True, 127),
)


def alu_chain_program(
    a: np.ndarray, b: np.ndarray, steps=ALU_CHAIN, cfg: HwConfig = DEFAULT_CONFIG
) -> Example:
    """Load ACC rows ``a`` and ``b`` ((rows, block_out) int32, batch 1), then for each step apply
    ``a = op(a, imm if use_imm else b)`` with one ALU instruction, and store ``a``'s low bytes.
    The expected value is left to the caller (a numpy reference of the same steps)."""
    rows = a.shape[0]
    pb = ProgramBuilder(cfg)
    a_addr = pb.put(np.ascontiguousarray(a, "<i4"), "acc")
    b_addr = pb.put(np.ascontiguousarray(b, "<i4"), "acc")
    o_addr = pb.alloc(rows, "out")
    pb.load_uops([Uop(dst=0, src=rows)], sram_base=0)
    pb.emit(Load(MemType.ACC, sram_base=0, dram_base=a_addr, y_size=1, x_size=rows, x_stride=rows))
    pb.emit(
        Load(MemType.ACC, sram_base=rows, dram_base=b_addr, y_size=1, x_size=rows, x_stride=rows)
    )
    for n, (op, use_imm, imm) in enumerate(steps):
        pb.emit(
            AluInsn(
                alu_opcode=op,
                use_imm=use_imm,
                imm=imm,
                uop_bgn=0,
                uop_end=1,
                iter_out=rows,
                iter_in=1,
                dst_factor_out=1,
                src_factor_out=1,
                push_next_dep=n == len(steps) - 1,
            )
        )
    program, readback = _store_and_finish(pb, 0, o_addr, (rows, cfg.block_out))

    return Example(program, readback)
