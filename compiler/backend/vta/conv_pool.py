"""A conv followed by a 3x3, stride-2, pad-1 max pool in one kernel (the ResNet stem): the pool
runs on the conv's accumulators beside the GEMMs (the overlap bit), so its ALU work is hidden
and its input never goes back through DRAM.

Schedule: column strips of 2 conv columns (one pool column) x every conv row; two virtual
threads, each with half the output channel blocks, its ACC rows in its own bank. Per strip and
thread: INP loads of the strip's input (the other thread's GEMM meanwhile), one GEMM
(``conv2d_tile.chunk_gemm``), then the epilogue while the other thread's GEMM runs: + bias, >>
the channel shifts (per-channel weight scales: the shift rows after the bias rows, as the conv
template's ``epilogue``), >> shift, clip, the vertical max in place (even rows max= their odd
neighbours), the pool column into dense rows ``max(V0, V1, carry)`` (``carry``: the previous
strip's right column), ``carry := V1``, the reset of the strip's rows (MUL 0), and one STORE per
channel block of the pool column (56 rows of one pixel, DRAM stride OW). The padding (row -1,
column -1) is skipped: windows at the border read only real pixels.
"""

from __future__ import annotations

import dataclasses

from pyvta.compiler.backend.vta.config import ConvConfig, FitError, clip_ops, geometry
from pyvta.compiler.backend.vta.conv2d_tile import chunk_gemm
from pyvta.compiler.backend.vta.deps import insert_dep_tokens, mark_overlaps
from pyvta.compiler.backend.vta.emitter import Emitter
from pyvta.compiler.backend.vta.pool import alu_pass
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import AluInsn, AluOp, HwConfig, MemType, Uop

POOL_ATTRS = {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}  # the one fused pool


def fusable(wl: ConvWorkload, ep: Epilogue, hw: HwConfig) -> bool:
    """Whether ``wl`` (+ the 3x3/2 pad-1 max pool) fits this schedule: even output sides, an
    even number of output blocks, no residual, a strip's rows in half the ACC."""
    if wl.out_h % 2 or wl.out_w % 2 or wl.co_blocks % 2 or ep.residual:
        return False
    tile_co = wl.co_blocks // 2
    acc = tile_co * (2 * wl.out_h + wl.out_h) + _const_rows(wl, ep)  # strip, dense + carry
    return acc <= hw.acc_depth // 2 and _fits_inp(wl, hw)


def _const_rows(wl: ConvWorkload, ep: Epilogue) -> int:
    """ACC rows of the bias and (``ep.channel_shift``) the channel shift rows after it."""
    return wl.co_blocks * (1 + int(ep.channel_shift))


def _config(wl: ConvWorkload) -> ConvConfig:
    return ConvConfig(wl.out_h, 2, wl.ci_blocks, wl.co_blocks // 2, vthreads=2)


def _fits_inp(wl: ConvWorkload, hw: HwConfig) -> bool:
    g = geometry(wl, Epilogue(), _config(wl))
    wgt = wl.co_blocks * wl.ci_blocks * wl.kernel_h * wl.kernel_w
    return 2 * g.inp_rows <= hw.inp_depth and wgt <= hw.wgt_depth


def lower_conv_pool(wl: ConvWorkload, ep: Epilogue, hw: HwConfig, dram) -> tuple[list, list]:
    """(instructions, micro-ops) of conv + pool; ``dram``: bases ``data``, ``weights``, ``bias``,
    ``output``, ``uops`` (``conv2d.DramMap``). ``ep`` needs ``bias_via_gemm`` False."""
    if not fusable(wl, ep, hw):
        raise FitError(f"{wl} + max pool 3x3/2: no fused schedule fits")
    ep = dataclasses.replace(ep, bias_via_gemm=False)
    c = _config(wl)
    g = geometry(wl, ep, c)
    oh, ow = wl.out_h // 2, wl.out_w // 2
    half, p = hw.acc_depth // 2, g.pixels
    kk = wl.kernel_h * wl.kernel_w
    em = Emitter(hw)
    n_wgt = wl.co_blocks * wl.ci_blocks * kk
    em.load(MemType.WGT, 0, dram.weights, 1, n_wgt, n_wgt)
    n_const = _const_rows(wl, ep)
    bias_acc = [v * half + half - n_const for v in range(2)]
    for row in bias_acc:  # one copy per bank (a thread's epilogue reads its own bank)
        em.load(MemType.ACC, row, dram.bias, 1, n_const, n_const)
    slot = [v * half for v in range(2)]  # strip rows: co x (conv rows x 2 columns)
    dense = [s + c.tile_co * p for s in slot]  # the pool column: co x oh
    carry = [d + c.tile_co * oh for d in dense]  # the previous strip's right column (vertical max)
    for v in range(2):
        alu_pass(em, AluOp.MUL, slot[v], (c.tile_co * p, 1, 1, 0), imm=0)
    pending = None  # the thread whose epilogue follows the next GEMM
    for n, j in ((n, j) for n in range(wl.batch) for j in range(ow)):  # (images one by one)
        data = dram.data + n * wl.ci_blocks * wl.height * wl.width
        out = dram.output + n * wl.co_blocks * oh * ow
        for v in range(2):
            inp0 = v * g.inp_rows
            for ci in range(wl.ci_blocks):
                em.load(
                    MemType.INP,
                    inp0 + ci * g.in_h * g.in_w,
                    data + ci * wl.height * wl.width + 2 * j,
                    g.in_h,
                    2,
                    wl.width,
                )
            insn, kernel = chunk_gemm(wl, c, g, slot[v], inp0, v * c.tile_co * wl.ci_blocks * kk)
            em.loop(insn, kernel)
            if pending is not None:
                _epilogue(em, wl, ep, c, *pending)
            pending = (out, v, j, slot[v], dense[v], carry[v], bias_acc[v])
    _epilogue(em, wl, ep, c, *pending)
    em.finish()
    insns, accesses = em.program(dram.uops)
    insns = mark_overlaps(insns, accesses)
    return insert_dep_tokens(insns, accesses, hw), list(em.uops)


def _epilogue(em, wl, ep, c, out, v, j, acc0, dense, carry, bias) -> None:
    p, tco = 2 * wl.out_h, c.tile_co
    oh = wl.out_h // 2
    # + bias, then >> the channel shifts: each block's row over the strip's pixels (the src row
    # repeats)
    rows = [(AluOp.ADD, bias)] + [(AluOp.SHR, bias + wl.co_blocks)] * ep.channel_shift
    for op, src in rows:
        em.loop(
            AluInsn(alu_opcode=op, iter_out=tco, iter_in=p, dst_factor_out=p,
                    src_factor_out=1, dst_factor_in=1),
            [Uop(dst=acc0, src=src + v * tco)],
        )  # fmt: skip
    if ep.shift:
        alu_pass(em, AluOp.SHR, acc0, (tco * p, 1, 1, 0), imm=ep.shift)
    for op, imm in clip_ops(ep, c):
        alu_pass(em, op, acc0, (tco * p, 1, 1, 0), imm=imm)
    # vertical max in place: row 2y (pixel 4y + col) max= rows 2y + 1 and 2y - 1
    cols = [Uop(dst=acc0 + k * p + col, src=acc0 + k * p + col + 2)
            for k in range(tco) for col in (0, 1)]  # fmt: skip
    _loop(em, AluOp.MAX, oh, 4, 4, cols)
    if oh > 1:
        up = [Uop(dst=u.dst + 4, src=u.dst + 2) for u in cols]
        _loop(em, AluOp.MAX, oh - 1, 4, 4, up)
    # the pool column: dense[k, y] = max(V0, V1, carry); then carry := V1
    alu_pass(em, AluOp.MUL, dense, (tco * oh, 1, 1, 0), imm=0)
    per_block = [(dense + k * oh, acc0 + k * p) for k in range(tco)]
    _loop(em, AluOp.ADD, oh, 1, 4, [Uop(dst=d, src=s) for d, s in per_block])
    _loop(em, AluOp.MAX, oh, 1, 4, [Uop(dst=d, src=s + 1) for d, s in per_block])
    if j:
        _loop(em, AluOp.MAX, oh, 1, 1, [Uop(dst=d, src=carry + k * oh)
                                         for k, (d, _) in enumerate(per_block)])  # fmt: skip
    alu_pass(em, AluOp.MUL, carry, (tco * oh, 1, 1, 0), imm=0)
    _loop(em, AluOp.ADD, oh, 1, 4, [Uop(dst=carry + k * oh, src=s + 1)
                                    for k, (_, s) in enumerate(per_block)])  # fmt: skip
    alu_pass(em, AluOp.MUL, acc0, (tco * p, 1, 1, 0), imm=0)  # (the next strip accumulates here)
    ow = wl.out_w // 2
    for k in range(tco):
        plane = (v * tco + k) * oh * ow
        em.store(dense + k * oh, out + plane + j, oh, 1, ow)


def _loop(em, op: AluOp, n: int, dst_f: int, src_f: int, uops: list[Uop]) -> None:
    """ALU register op: ``n`` iterations (dst/src factors) over the micro-ops ``uops``."""
    em.loop(
        AluInsn(alu_opcode=op, iter_out=n, iter_in=1, dst_factor_out=dst_f, src_factor_out=src_f),
        uops,
    )


def build_conv_pool_kernel(wl, ep, weights, bias, hw: HwConfig, channel_shifts=None):
    """conv (+ epilogue) + the 3x3/2 max pool lowered at base 0 into a relocatable kernel:
    regions ``input`` ([N,] ci_b, H, W, b), ``output`` ([N,] co_b, OH/2, OW/2, b) int8, ``weights``,
    ``bias`` (then ``channel_shifts``, (co_b, b) int32, with ``ep.channel_shift``), ``uops``,
    ``insns``; ``info["kind"]`` is ``"conv_pool"``."""
    import numpy as np

    from pyvta.compiler.backend.vta.conv2d import DramMap
    from pyvta.compiler.backend.vta.operator import lowered_program, program_regions
    from pyvta.driver.kernel import Kernel, RegionKind

    out_bytes = wl.batch * wl.co_blocks * (wl.out_h // 2) * (wl.out_w // 2) * hw.out_elem_bytes
    consts = {
        "weights": np.ascontiguousarray(weights, np.int8).tobytes(),
        "bias": np.ascontiguousarray(bias, "<i4").tobytes(),
    }
    if ep.channel_shift != (channel_shifts is not None):
        raise ValueError("channel_shifts are given exactly when the epilogue has channel_shift")
    if channel_shifts is not None:
        consts["bias"] += np.ascontiguousarray(channel_shifts, "<i4").tobytes()
    sizes = [
        (
            "input",
            RegionKind.INPUT,
            wl.batch * wl.ci_blocks * wl.height * wl.width * hw.inp_elem_bytes,
        ),
        ("output", RegionKind.OUTPUT, out_bytes),
        *[(k, RegionKind.CONST, len(v)) for k, v in consts.items()],
    ]
    base = {r.name: r.offset for r in program_regions(sizes, b"", b"")}
    dram = DramMap(
        data=base["input"] // hw.inp_elem_bytes,
        weights=base["weights"] // hw.wgt_elem_bytes,
        bias=base["bias"] // hw.acc_elem_bytes,
        output=base["output"] // hw.out_elem_bytes,
        uops=base["uops"] // hw.uop_elem_bytes,
    )
    program = lowered_program(
        ("conv_pool", wl, ep, hw, dram), lambda: lower_conv_pool(wl, ep, hw, dram), sizes, hw,
        keep=True,
    )  # fmt: skip
    consts["uops"], consts["insns"] = program.uops, program.insns
    regions = program_regions(sizes, program.uops, program.insns)
    info = {
        "kind": "conv_pool",
        "workload": wl.to_dict(),
        "epilogue": dataclasses.asdict(ep),
        "config": {},
        "uops": program.uop_count,
    }
    return Kernel(hw.tag, regions, consts, program.relocs, program.insn_count, info)
