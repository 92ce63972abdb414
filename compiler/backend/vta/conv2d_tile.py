"""The pieces of a conv2d program that both schedules emit (``conv2d._emit``, v0.0.2, and
``conv2d_overlap.emit_overlapped``): the SRAM slots of the threads (``SlotLayout``), a tile's
start (ACC reset and bias), its input-channel chunks (INP/WGT loads and one GEMM) and its
epilogue (the ALU passes, the residual, the store).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pyvta.compiler.backend.vta.config import (
    ConvConfig,
    FitError,
    Geometry,
    alu_reset,
    bias_acc_rows,
    clip_ops,
    gemm_dims,
    keeps_inputs,
    overlapped,
    reserved_rows,
    same_pixels,
    shared_inputs,
)
from pyvta.compiler.backend.vta.emitter import Emitter
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import AluInsn, AluOp, GemmInsn, HwConfig, MemType, Uop

if TYPE_CHECKING:
    from pyvta.compiler.backend.vta.conv2d import DramMap


KERNEL_ORDER = ("ci", "kh", "kw", "co", "oh", "ow")  # outermost first; outputs innermost


def chunk_gemm(wl: ConvWorkload, c: ConvConfig, g: Geometry, acc0: int, inp0: int, wgt0: int):
    """One input-channel chunk's GEMM instruction and its kernel's micro-ops (``chunk_rows``)."""
    insn, rows = chunk_rows(wl, c, g, acc0, inp0, wgt0)
    columns = (rows[n].tolist() for n in ("dst", "src", "wgt"))
    kernel = [Uop(a, b, w) for a, b, w in zip(*columns, strict=True)]
    return insn, kernel


def chunk_rows(wl: ConvWorkload, c: ConvConfig, g: Geometry, acc0: int, inp0: int, wgt0: int):
    """One input-channel chunk's GEMM: its instruction (``c.gemm_loops`` the two hardware
    loops) and its kernel's rows (``dst``, ``src``, ``wgt`` arrays, one entry per micro-op,
    the other axes in ``KERNEL_ORDER``), from ``acc0``, ``inp0`` and ``wgt0``. ``FitError``
    where consecutive micro-ops would write one ACC row."""
    dims = gemm_dims(wl, c, g)
    outer, inner = c.gemm_loops
    kernel_dims = [d for d in KERNEL_ORDER if d not in (outer, inner)]
    grids = np.meshgrid(*[np.arange(dims[d][0]) for d in kernel_dims], indexing="ij")
    flat = [x.reshape(-1) for x in grids]
    rows = {}
    for k, (name, off) in enumerate((("dst", acc0), ("src", inp0), ("wgt", wgt0))):
        rows[name] = off + sum(f * dims[d][1 + k] for f, d in zip(flat, kernel_dims, strict=True))
    eo, ei = dims[outer], dims[inner]
    insn = GemmInsn(
        iter_out=eo[0],
        iter_in=ei[0],
        dst_factor_out=eo[1],
        src_factor_out=eo[2],
        wgt_factor_out=eo[3],
        dst_factor_in=ei[1],
        src_factor_in=ei[2],
        wgt_factor_in=ei[3],
    )
    _check_hazard(insn, rows["dst"], c)
    return insn, rows


def _check_hazard(insn: GemmInsn, dst: np.ndarray, c: ConvConfig) -> None:
    seq = (
        dst[None, None, :]
        + np.arange(insn.iter_out)[:, None, None] * insn.dst_factor_out
        + np.arange(insn.iter_in)[None, :, None] * insn.dst_factor_in
    ).reshape(-1)
    if seq.size > 1 and (seq[1:] == seq[:-1]).any():
        raise FitError(
            f"config {c.to_dict()}: consecutive GEMM micro-ops would write one ACC row"
            " (a pipeline hazard); use a wider tile or other gemm_loops"
        )


@dataclass(frozen=True)
class SlotLayout:
    """SRAM placement: per-thread slots from row 0, program-wide constants at the top. With the
    epilogue overlapped, thread v's ACC slot lies in bank v % 2 (the top bit of the row), each
    bank with its own copy of the bias rows at its top, so a pair on two threads never shares
    a bank (rule 7 of ``isa.layout.OVERLAP_DOC``)."""

    inp_slot: int
    wgt_slot: int
    acc_base: tuple[int, ...]  # per ACC slot (v + vthreads * buffer): its first ACC row
    ones: int  # INP row of the bias digits' input
    bias_wgt: int  # first WGT row of the bias digit blocks
    ident: int  # WGT row of the scaled identity (residual GEMM)
    bias_acc: tuple[int, ...]  # per ACC slot: first ACC row of the biases it reads (ALU path)
    overlapped: bool = False
    acc_slots: int = 1  # ACC slots per thread, used by its tiles in turn
    # one weight tile holds every weight (tile_co, tile_ci the whole layer): loaded once, in
    # thread 0's WGT slot, and read by every thread (not once per thread)
    shared_wgt: bool = False
    # a group's threads compute the same pixels (``tile_groups``): each chunk's input is loaded
    # once, into the INP slot of the chunk's turn, and read by every thread (``emit_overlapped``)
    shared_inp: bool = False

    @classmethod
    def of(cls, wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> SlotLayout:
        v_count = c.vthreads
        fixed = reserved_rows(wl, ep)
        buffers = overlapped(wl, ep, c, hw)
        if buffers:
            half = hw.acc_depth // 2
            slots = range(v_count * buffers)  # slot s: thread s % v_count, in bank s % 2
            per_bank = -(-len(slots) // 2)
            size = (half - fixed["acc"]) // per_bank
            acc_base = tuple((s % 2) * half + (s // 2) * size for s in slots)
            bias_acc = tuple((s % 2 + 1) * half - fixed["acc"] for s in slots)
        else:
            size = (hw.acc_depth - fixed["acc"]) // v_count
            acc_base = tuple(v * size for v in range(v_count))
            bias_acc = (hw.acc_depth - fixed["acc"],) * v_count
        return cls(
            inp_slot=(hw.inp_depth - fixed["inp"]) // v_count,
            wgt_slot=(hw.wgt_depth - fixed["wgt"]) // v_count,
            acc_base=acc_base,
            ones=hw.inp_depth - 1,
            bias_wgt=hw.wgt_depth - fixed["wgt"],
            ident=hw.wgt_depth - 1,
            bias_acc=bias_acc,
            overlapped=buffers > 0,
            acc_slots=max(buffers, 1),
            shared_wgt=c.tile_co == wl.co_blocks and c.tile_ci == wl.ci_blocks,
            shared_inp=shared_inputs(wl, ep, c, hw),
        )

    def bases(self, v: int, slot: int | None = None) -> tuple[int, int, int]:
        """Thread v's first ACC (of ``slot``, default its first), INP and WGT rows (every
        thread's WGT rows from 0 when the weights are ``shared_wgt``)."""
        wgt0 = 0 if self.shared_wgt else v * self.wgt_slot
        return self.acc_base[v if slot is None else slot], v * self.inp_slot, wgt0


@dataclass(frozen=True)
class Ctx:
    """Everything the emitting helpers share for one lowering."""

    wl: ConvWorkload
    ep: Epilogue
    c: ConvConfig
    g: Geometry
    dram: DramMap
    lay: SlotLayout
    fixed: dict
    early: bool = False  # ``early_starts``
    lazy: bool = False  # ``lazy_alu_starts``
    first_parts: int = 1  # ``first_chunk_parts``


def load_constants(em: Emitter, x: Ctx) -> None:
    wl, ep, dram, lay, fixed = x.wl, x.ep, x.dram, x.lay, x.fixed
    if fixed["inp"]:
        em.load(MemType.INP, lay.ones, dram.ones, 1, 1, 1)
    if fixed["wgt"]:
        n = fixed["wgt"]
        first = dram.wgt_consts + (0 if ep.bias and ep.bias_via_gemm else wl.co_blocks)
        em.load(MemType.WGT, lay.bias_wgt, first, 1, n, n)
    if fixed["acc"]:
        for row in sorted(set(lay.bias_acc)):  # one copy per ACC bank when overlapped
            em.load(MemType.ACC, row, dram.bias, 1, fixed["acc"], fixed["acc"])


def tile_start(
    em: Emitter, x: Ctx, v: int, tile, slot: int | None = None, late_residual: bool = False
) -> None:
    """Reset the tile's ACC rows (on the GEMM pipe, or the ALU's: ``config.alu_reset``); add
    the bias and the residual with GEMM passes if chosen. ``late_residual``: the residual rows
    a pass after the shift reads are loaded by the caller (``residual_loads``), later."""
    wl, ep, c, g, lay = x.wl, x.ep, x.c, x.g, x.lay
    co0, oh0, ow0 = tile
    p = g.pixels
    rows = c.tile_co * p
    acc0 = lay.acc_base[v if slot is None else slot]
    if x.lazy:
        _alu_rows(em, AluOp.MUL, acc0, rows, 0)
    elif x.early:
        _alu_rows(em, AluOp.MUL, acc0, rows, 0)
        if ep.bias and not ep.bias_via_gemm:
            _alu_bias(em, x, tile, v if slot is None else slot)
    elif alu_reset(wl, ep, c, em.hw, v):
        _alu_rows(em, AluOp.MUL, acc0, rows, 0)
    else:
        em.loop(
            GemmInsn(reset_reg=True, iter_out=rows, iter_in=1, dst_factor_out=1), [Uop(dst=acc0)]
        )
    if ep.bias and ep.bias_via_gemm:
        em.loop(
            GemmInsn(
                iter_out=c.tile_co, iter_in=p, dst_factor_out=p, wgt_factor_out=1, dst_factor_in=1
            ),
            [Uop(dst=acc0, src=lay.ones, wgt=lay.bias_wgt + co0)],
        )
    if ep.residual_via_gemm and not (late_residual and ep.residual_after_shift):
        residual_loads(em, x, v, tile)
        if not ep.residual_after_shift:
            res0 = v * lay.inp_slot + g.inp_rows - rows
            _residual_gemm(em, ep, acc0, res0, rows, lay.ident)


def residual_loads(em: Emitter, x: Ctx, v: int, tile) -> None:
    """The tile's residual rows into thread v's INP slot, after its data rows (GEMM path)."""
    res0 = v * x.lay.inp_slot + x.g.inp_rows - x.c.tile_co * x.g.pixels
    _load_residual(em, x, tile, MemType.INP, res0)


def _load_residual(em: Emitter, x: Ctx, tile, mem: MemType, sram0: int) -> None:
    """The tile's int8 residual rows (one 2-D load per channel block) into ``mem`` from row
    ``sram0``: INP for the GEMM path, ACC_8BIT (sign-extended) for the ALU path."""
    wl, c, p = x.wl, x.c, x.g.pixels
    co0, oh0, ow0 = tile
    n, oh = image_row(wl, oh0)
    for co in range(c.tile_co):
        em.load(
            mem,
            sram0 + co * p,
            x.dram.residual + ((n * wl.co_blocks + co0 + co) * wl.out_h + oh) * wl.out_w + ow0,
            c.tile_h,
            c.tile_w,
            wl.out_w,
        )


def _residual_gemm(em: Emitter, ep: Epilogue, acc0: int, res0: int, rows: int, ident: int) -> None:
    """acc += residual * 2^e (the scaled identity weights), in ``residual_passes`` passes."""
    em.loop(
        GemmInsn(iter_out=ep.residual_passes, iter_in=rows, dst_factor_in=1, src_factor_in=1),
        [Uop(dst=acc0, src=res0, wgt=ident)],
    )


def tile_groups(wl: ConvWorkload, c: ConvConfig) -> list[list[tuple[int, int, int]]]:
    """Output tiles (co, oh, ow) in groups of ``vthreads``, one tile per thread.

    When the output-channel tiles divide among the threads, each thread keeps its own channel
    tiles (its weights change only when its channel tile does, while the others compute);
    otherwise the threads take consecutive spatial tiles of one channel tile. With
    ``tile_order`` "sp" the spatial tiles are the outer loop: a group's threads take
    consecutive channel tiles of one spatial tile (each thread's input stays for its next).
    """
    v = c.vthreads
    cos = list(range(0, wl.co_blocks, c.tile_co))
    rows = wl.batch * wl.out_h  # the images one under the other (``image_row``)
    sps = [(oh, ow) for oh in range(0, rows, c.tile_h) for ow in range(0, wl.out_w, c.tile_w)]
    if c.tile_order == "sp":
        tiles = [(co, oh, ow) for oh, ow in sps for co in cos]
        return [tiles[i : i + v] for i in range(0, len(tiles), v)]
    if same_pixels(wl, c):
        return [
            [(cos[i + t], oh, ow) for t in range(v)]
            for i in range(0, len(cos), v)
            for oh, ow in sps
        ]
    tiles = [(co, oh, ow) for co in cos for oh, ow in sps]
    return [tiles[i : i + v] for i in range(0, len(tiles), v)]


def image_row(wl: ConvWorkload, oh0: int) -> tuple[int, int]:
    """(image, output row in it) of a tile's first row ``oh0`` among ``batch * out_h`` rows."""
    return divmod(oh0, wl.out_h)


def chunk(em: Emitter, x: Ctx, bases, tile, k: int, loaded: dict, parts: int = 1) -> None:
    """Chunk k of a tile: its input loads and its weights (each unless its slot holds them:
    ``loaded`` maps a slot's first row to what it holds), its GEMM; with ``parts`` > 1 and
    weights to load, those and the GEMM in that many runs of channel blocks
    (``first_chunk_parts``)."""
    wl, c, g, dram = x.wl, x.c, x.g, x.dram
    acc0, inp0, wgt0 = bases
    co0, oh0, ow0 = tile
    ci0 = k * c.tile_ci
    s = wl.stride
    n, oh = image_row(wl, oh0)
    # input rows/cols the tile needs, in unpadded coordinates, and how much falls in the padding
    top, left = oh * s - wl.pad, ow0 * s - wl.pad_l
    y0, x0 = max(0, -top), max(0, -left)
    y1 = max(0, top + (g.in_h - 1) * g.row_step + 1 - wl.height)  # (row_step > 1: no padding)
    x1 = max(0, left + g.in_w - wl.width)
    ys, xs = g.in_h - y0 - y1, g.in_w - x0 - x1
    if ys <= 0 or xs <= 0:
        raise FitError(f"config {c.to_dict()}: a tile of {wl} lies entirely in the padding")
    inp_key = ("inp", oh0, ow0, wl.input_block(co0, ci0))
    keep = x.lay.shared_inp or keeps_inputs(c)
    held = keep and loaded.get(("inp", inp0)) == inp_key
    for ci in range(0 if held else c.tile_ci):
        plane = (n * wl.ci_blocks + wl.input_block(co0, ci0 + ci)) * wl.height * wl.width
        em.load(
            MemType.INP,
            inp0 + ci * g.in_h * g.in_w,
            dram.data + plane + (top + y0) * wl.width + (left + x0),
            ys,
            xs,
            wl.width * g.row_step,
            (y0, y1, x0, x1),
        )
    loaded[("inp", inp0)] = inp_key
    key = (co0, ci0)
    if loaded.get(wgt0) == key:
        parts = 1
    kk = wl.kernel_h * wl.kernel_w
    part_co = c.tile_co // parts
    part = dataclasses.replace(c, tile_co=part_co)
    for j in range(parts):  # (the weights of part j, then its GEMM)
        if loaded.get(wgt0) != key:
            em.load(
                MemType.WGT,
                wgt0 + j * part_co * c.tile_ci * kk,
                dram.weights + ((co0 + j * part_co) * wl.red_blocks + ci0) * kk,
                part_co,
                c.tile_ci * kk,
                wl.red_blocks * kk,
            )
        insn, kernel = chunk_gemm(
            wl, part, g, acc0 + j * part_co * g.pixels, inp0, wgt0 + j * part_co * c.tile_ci * kk
        )
        em.loop(insn, kernel)
    loaded[wgt0] = key


def _alu_rows(em: Emitter, op: AluOp, acc0: int, rows: int, imm: int) -> None:
    em.loop(
        AluInsn(
            alu_opcode=op,
            use_imm=True,
            imm=imm,
            iter_out=rows,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=1,
        ),
        [Uop(dst=acc0, src=acc0)],
    )


def _alu_bias(
    em: Emitter, x: Ctx, tile, slot: int, op: AluOp = AluOp.ADD, offset_rows: int = 0
) -> None:
    """acc += bias on the ALU: each channel block's bias row broadcast over the tile's pixels
    (one cycle a row: the src row repeats, rule 8 of ``isa.layout.OVERLAP_DOC``); with ``op``
    SHR and ``offset_rows`` the bias rows, acc >>= the channel shift rows after them."""
    p = x.g.pixels
    em.loop(
        AluInsn(
            alu_opcode=op,
            iter_out=x.c.tile_co,
            iter_in=p,
            dst_factor_out=p,
            src_factor_out=1,
            dst_factor_in=1,
        ),
        [Uop(dst=x.lay.acc_base[slot], src=x.lay.bias_acc[slot] + offset_rows + tile[0])],
    )


def splits(ep: Epilogue) -> bool:
    """Whether the epilogue has a GEMM pass in the middle (the residual, after the shift): its
    ``head`` ends with it, its ``tail`` is the ALU passes after it and the stores."""
    return ep.residual_via_gemm and ep.residual_after_shift


def epilogue(em: Emitter, x: Ctx, v: int, tile, slot: int | None = None, part: str = "all") -> None:
    """The tile's epilogue (``part``: "all", or its "head" or "tail", ``splits``)."""
    if part == "tail":
        return _epilogue_tail(em, x, v, tile, slot)
    ep, c, g, lay = x.ep, x.c, x.g, x.lay
    p = g.pixels
    rows = c.tile_co * p
    slot = v if slot is None else slot
    acc0 = lay.acc_base[slot]
    if ep.bias and not ep.bias_via_gemm and not x.early:
        _alu_bias(em, x, tile, slot)
    if ep.channel_shift:
        _alu_bias(em, x, tile, slot, AluOp.SHR, bias_acc_rows(x.wl, ep))
    if ep.residual and not ep.residual_via_gemm:
        res0 = acc0 + rows
        _load_residual(em, x, tile, MemType.ACC_8BIT, res0)
        if ep.residual_shift:
            _alu_rows(em, AluOp.SHR, res0, rows, -ep.residual_shift)
        em.loop(
            AluInsn(
                alu_opcode=AluOp.ADD, iter_out=rows, iter_in=1, dst_factor_out=1, src_factor_out=1
            ),
            [Uop(dst=acc0, src=res0)],
        )
    if splits(ep):
        pre = ep.residual_pre_shift
        if pre:
            _alu_rows(em, AluOp.SHR, acc0, rows, pre)
        _residual_gemm(em, ep, acc0, v * lay.inp_slot + g.inp_rows - rows, rows, lay.ident)
    if part == "all":
        _epilogue_tail(em, x, v, tile, slot)


def _epilogue_tail(em: Emitter, x: Ctx, v: int, tile, slot: int | None) -> None:
    wl, ep, c, g, dram, lay = x.wl, x.ep, x.c, x.g, x.dram, x.lay
    co0, oh0, ow0 = tile
    p = g.pixels
    rows = c.tile_co * p
    acc0 = lay.acc_base[v if slot is None else slot]
    if splits(ep):
        if ep.shift - ep.residual_pre_shift:
            _alu_rows(em, AluOp.SHR, acc0, rows, ep.shift - ep.residual_pre_shift)
    elif ep.shift:
        _alu_rows(em, AluOp.SHR, acc0, rows, ep.shift)
    for op, imm in clip_ops(ep, c):
        _alu_rows(em, op, acc0, rows, imm)
    out_plane = wl.out_h * wl.out_w
    n, oh = image_row(wl, oh0)
    first = n * wl.co_blocks + co0  # the tile's first output plane
    if c.tile_w == wl.out_w and c.tile_h == wl.out_h:
        em.store(acc0, dram.output + first * out_plane, 1, rows, rows)
        return
    for co in range(c.tile_co):
        base = dram.output + (first + co) * out_plane + oh * wl.out_w + ow0
        if c.tile_w == wl.out_w:
            em.store(acc0 + co * p, base, 1, p, p)
        else:
            em.store(acc0 + co * p, base, c.tile_h, c.tile_w, wl.out_w)
