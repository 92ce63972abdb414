"""A depthwise conv on the accelerator's ALU: the MUL with a vector operand over shifted
micro-ops (the alternative to the block-diagonal GEMM the compiler emits, kept to measure it:
``benchmarks/vta_depthwise.py``).

Per-channel weights sit in the accumulator: one int32 row per channel block and tap (its 16
lanes the 16 channels' weights), and one bias row per block, loaded once at the top of ACC.
Per channel block and band of output rows (as ``pool._emit_max``): one padded ACC_8BIT load of
the input rows the band reads (the load's zero padding is the conv's); the output rows reset
(MUL 0); per tap ``(i, j)``: a scratch band reset (MUL 0), the tap's shifted input added into
it (ADD over micro-ops strided by the stride, offset ``i*d`` rows and ``j*d`` columns), multiplied
by the tap's weight row (MUL, the src row repeating) and added to the output rows (ADD); then
``+ bias``, ``>> shift``, clip (MAX, MIN immediates), one STORE. Per tap and output pixel block
that is 1 + 2 + 1 + 2 ALU cycles (``sim.timing``: an immediate or a repeated src row 1 cycle, a
fresh src row 2), against one GEMM micro-op for the block-diagonal GEMM. Batch 1, no residual,
one shift for every channel.
"""

from __future__ import annotations

import numpy as np

from pyvta.compiler.backend.vta.config import FitError
from pyvta.compiler.backend.vta.deps import insert_dep_tokens
from pyvta.compiler.backend.vta.emitter import Emitter
from pyvta.compiler.backend.vta.pool import alu_pass
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue, WorkloadError
from pyvta.driver.kernel import Kernel, RegionKind, layout_regions, relocation_table
from pyvta.isa import AluOp, HwConfig, MemType, encode_insns, encode_uops


def _check(wl: ConvWorkload, ep: Epilogue) -> None:
    depthwise = wl.in_channels == wl.out_channels and wl.groups == wl.ci_blocks
    if not depthwise or wl.batch != 1 or ep.residual or ep.channel_shift:
        raise WorkloadError(
            f"{wl}: the ALU depthwise kernel takes a depthwise conv (groups = channel blocks),"
            " batch 1, no residual, one shift"
        )


def _band_rows(wl: ConvWorkload, half: int) -> int:
    wp = wl.width + wl.pad_l + wl.pad_r
    for rows in range(wl.out_h, 0, -1):
        if ((rows - 1) * wl.stride + wl.ext_h) * wp + 2 * rows * wl.out_w <= half:
            return rows
    raise FitError(f"{wl}: one output row's input and scratch exceed half the free ACC")


def lower_depthwise_alu(wl, ep, hw: HwConfig, data: int, out: int, consts: int, uops: int):
    """(instructions with tokens and FINISH, micro-ops); ``data``/``out`` int8 row units,
    ``consts`` ACC row units (weights (cb, taps) rows then bias (cb) rows), ``uops``."""
    _check(wl, ep)
    taps, cb = wl.kernel_h * wl.kernel_w, wl.co_blocks
    n_const = cb * (taps + 1)
    w0 = hw.acc_depth - n_const  # the constant rows at the top of ACC
    half = w0 // 2
    band = _band_rows(wl, half)
    if band * wl.out_w == 1:
        raise FitError(f"{wl}: one output pixel per band would write one ACC row back to back")
    em = Emitter(hw)
    em.load(MemType.ACC, w0, consts, 1, n_const, n_const)
    s, d, pl, pr = wl.stride, wl.dilation, wl.pad_l, wl.pad_r
    wp = wl.width + pl + pr
    turn = 0
    for c in range(cb):
        plane_in, plane_out = c * wl.height * wl.width, c * wl.out_h * wl.out_w
        for oh0 in range(0, wl.out_h, band):
            rows = min(band, wl.out_h - oh0)
            base = turn * half
            turn ^= 1
            top = oh0 * s - wl.pad
            in_h = (rows - 1) * s + wl.ext_h
            y0, y1 = max(0, -top), max(0, top + in_h - wl.height)
            em.load(MemType.ACC_8BIT, base, data + plane_in + (top + y0) * wl.width,
                    in_h - y0 - y1, wl.width, wl.width, (y0, y1, pl, pr))  # fmt: skip
            px = rows * wl.out_w
            o, tmp = base + in_h * wp, base + in_h * wp + px
            shape = (rows, wl.out_w, wl.out_w, 1)
            flat = (px, 1, 1, 0)
            alu_pass(em, AluOp.MUL, o, flat, imm=0)
            for t in range(taps):
                i, j = divmod(t, wl.kernel_w)
                alu_pass(em, AluOp.MUL, tmp, flat, imm=0)
                src = base + i * d * wp + j * d
                alu_pass(em, AluOp.ADD, tmp, shape, src=src, sf=(s * wp, s))
                alu_pass(em, AluOp.MUL, tmp, flat, src=w0 + c * taps + t)
                alu_pass(em, AluOp.ADD, o, flat, src=tmp, sf=(1, 0))
            if ep.bias:
                alu_pass(em, AluOp.ADD, o, flat, src=w0 + cb * taps + c)
            if ep.shift:
                alu_pass(em, AluOp.SHR, o, flat, imm=ep.shift)
            alu_pass(em, AluOp.MAX, o, flat, imm=ep.lo)
            alu_pass(em, AluOp.MIN, o, flat, imm=ep.hi)
            em.store(o, out + plane_out + oh0 * wl.out_w, 1, px, px)
    em.finish()
    insns, accesses = em.program(uops)
    return insert_dep_tokens(insns, accesses, hw), list(em.uops)


def build_depthwise_alu_kernel(
    wl: ConvWorkload, ep: Epilogue, weights: np.ndarray, bias: np.ndarray, hw: HwConfig
) -> Kernel:
    """``wl`` on the ALU as a relocatable kernel: ``weights`` (C, 1, KH, KW) int8, ``bias`` (C,)
    int32; regions ``input`` (C/B, H, W, B) and ``output`` (C/B, OH, OW, B) int8."""
    _check(wl, ep)
    b, cb, taps = wl.block, wl.co_blocks, wl.kernel_h * wl.kernel_w
    w = np.zeros((cb * b, taps), np.int32)
    w[: wl.out_channels] = weights.reshape(wl.out_channels, taps)
    bb = np.zeros(cb * b, np.int32)
    bb[: wl.out_channels] = bias
    rows = np.concatenate([w.reshape(cb, b, taps).transpose(0, 2, 1).reshape(-1, b),
                           bb.reshape(cb, b)])  # fmt: skip
    row = hw.out_elem_bytes
    sizes = [
        ("input", RegionKind.INPUT, cb * wl.height * wl.width * row),
        ("output", RegionKind.OUTPUT, cb * wl.out_h * wl.out_w * row),
        ("consts", RegionKind.CONST, rows.nbytes),
        ("uops", RegionKind.CONST, 0),
    ]
    base = {r.name: r.offset for r in layout_regions(sizes)}
    insns, uops = lower_depthwise_alu(wl, ep, hw, base["input"] // row, base["output"] // row,
                                      base["consts"] // hw.acc_elem_bytes,
                                      base["uops"] // hw.uop_elem_bytes)  # fmt: skip
    consts = {"consts": rows.astype("<i4").tobytes(), "uops": encode_uops(uops, hw)}
    consts["insns"] = encode_insns(insns, hw)
    sizes[-1] = ("uops", RegionKind.CONST, len(consts["uops"]))
    sizes.append(("insns", RegionKind.CONST, len(consts["insns"])))
    regions = layout_regions(sizes)
    info = {"kind": "depthwise_alu", "workload": wl.to_dict(), "config": {}, "uops": len(uops)}
    return Kernel(hw.tag, regions, consts, relocation_table(insns, regions, hw), len(insns), info)
