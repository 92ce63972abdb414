"""Pooling on the accelerator's ALU: max pool and global average pool on packed int8 tensors.

Both read the int8 input into the accumulator with ACC_8BIT loads (sign-extended, on the
compute module), combine rows with ALU micro-ops and store the low bytes of the result rows:

- max pool (any window, strides, pads up to 15): per channel block and band of output rows,
  one padded ACC_8BIT load of the input rows the band reads; the padding (zeros from the load)
  set to -128 by ALU MIN with an immediate; the output rows reset (MUL 0), the first tap added
  (ADD) and the other taps taken with MAX, one ALU instruction per tap (output rows x columns in
  its two loops, so consecutive micro-ops write different rows); then one STORE.
- global average pool (two channel blocks or more): per group of channel blocks, one ACC_8BIT
  load; the pixels summed by a tree of ALU ADDs (half the rows onto the other half, the blocks
  innermost when one row is left, so no two consecutive micro-ops write one row); each block's sum copied to a dense row, then ``(sum * mult + 2**(shift-1) - offset) >> shift``
  (MUL, ADD, SHR with immediates; with ``offset`` an ADD of the negated channel offsets, rows
  of the kernel's ``offset`` region loaded beside the sums) clipped to int8 (MAX, MIN): the
  arithmetic of :func:`runtime.vta_ops.global_avg_pool_int8`.

The ACC buffer is used in two halves in turn, so the store of one band overlaps the next band's
work (``insert_dep_tokens`` derives the tokens). Cost: an ALU register micro-op takes 2 cycles,
an immediate one 1 (``sim.timing``); a max pool of K taps about ``(2 K + 1)`` cycles per output
row, plus the loads of the input on the compute module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyvta.compiler.backend.vta.config import FitError
from pyvta.compiler.backend.vta.deps import insert_dep_tokens
from pyvta.compiler.backend.vta.emitter import Emitter
from pyvta.compiler.backend.vta.workload import MAX_PAD, WorkloadError
from pyvta.driver.kernel import Kernel, RegionKind, layout_regions, relocation_table
from pyvta.isa import AluInsn, AluOp, HwConfig, MemType, Uop, encode_insns, encode_uops

POOL_KINDS = ("max", "global_avg")
ALU_IMM_MAX = (1 << 15) - 1  # the ALU immediate is a signed 16-bit field


@dataclass(frozen=True)
class PoolWorkload:
    """A pool over packed int8 ``(C/B, H, W, B)`` -> ``(C/B, OH, OW, B)``.

    ``kind`` "max": window ``kernel_h x kernel_w``, ``strides``, ``pads`` (top, left, bottom,
    right; padding never wins the max). "global_avg": the whole image to one pixel,
    ``int8(clip((sum * mult + 2**(shift-1) - offset) >> shift))`` (no rounding term for shift
    0; ``offset``: per channel, from the kernel's ``offset`` region, else none)."""

    kind: str
    channels: int
    height: int
    width: int
    kernel_h: int = 1
    kernel_w: int = 1
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    mult: int = 1
    shift: int = 0
    block: int = 16
    offset: bool = False

    def __post_init__(self):
        if self.kind not in POOL_KINDS:
            raise WorkloadError(f"pool kind {self.kind!r} (allowed: {', '.join(POOL_KINDS)})")
        object.__setattr__(self, "strides", tuple(self.strides))
        object.__setattr__(self, "pads", tuple(self.pads))
        if min(self.pads) < 0 or max(self.pads) > MAX_PAD:
            raise WorkloadError(f"pool pads {self.pads} must be in 0..{MAX_PAD} (LOAD pad fields)")
        bad_avg = not 0 < self.mult <= ALU_IMM_MAX or not 0 <= self.shift <= 15
        if self.kind == "global_avg" and bad_avg:
            raise WorkloadError(
                f"average pool mult {self.mult} / shift {self.shift}: allowed 1..{ALU_IMM_MAX}"
                " and 0..15 (ALU immediates)"
            )
        if self.out_h <= 0 or self.out_w <= 0:
            raise WorkloadError(f"pool window larger than the padded input: {self}")

    @property
    def c_blocks(self) -> int:
        return -(-self.channels // self.block)

    @property
    def window(self) -> tuple[int, int]:
        if self.kind == "global_avg":
            return self.height, self.width
        return self.kernel_h, self.kernel_w

    @property
    def out_h(self) -> int:
        t, _, b, _ = self.pads
        return (self.height + t + b - self.window[0]) // self.strides[0] + 1

    @property
    def out_w(self) -> int:
        _, lft, _, r = self.pads
        return (self.width + lft + r - self.window[1]) // self.strides[1] + 1

    @property
    def macs(self) -> int:
        return 0  # (no GEMM work: a row in utilisation tables)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["strides"], d["pads"] = list(self.strides), list(self.pads)
        return d

    def __str__(self) -> str:
        if self.kind == "global_avg":
            return f"gavgpool {self.height}x{self.width} {self.channels}"
        return (
            f"maxpool {self.height}x{self.width} {self.channels} k{self.kernel_h}x{self.kernel_w}"
            f" s{self.strides[0]} p{','.join(map(str, self.pads))}"
        )


def alu_pass(
    em: Emitter, op: AluOp, dst: int, out: tuple, src: int | None = None, sf=(0, 0), imm=0
):
    """One ALU instruction: ``out`` = (iter_out, dst_factor_out, iter_in, dst_factor_in), the
    src factors ``sf``; an immediate operand when ``src`` is None."""
    n_out, d_out, n_in, d_in = out
    em.loop(
        AluInsn(
            alu_opcode=op,
            use_imm=src is None,
            imm=imm,
            iter_out=n_out,
            iter_in=n_in,
            dst_factor_out=d_out,
            dst_factor_in=d_in,
            src_factor_out=sf[0],
            src_factor_in=sf[1],
        ),
        [Uop(dst=dst, src=dst if src is None else src)],
    )


def _max_band_rows(pw: PoolWorkload, half: int) -> int:
    """Output rows per band: the most whose input rows and output rows fit half the ACC."""
    sh = pw.strides[0]
    wp = pw.width + pw.pads[1] + pw.pads[3]
    for rows in range(pw.out_h, 0, -1):
        if ((rows - 1) * sh + pw.kernel_h) * wp + rows * pw.out_w <= half:
            return rows
    raise FitError(
        f"{pw}: one output row's input ({pw.kernel_h} rows of {wp}) exceeds half the ACC"
    )


def _emit_max(em: Emitter, pw: PoolWorkload, hw: HwConfig, data: int, out: int) -> None:
    (sh, sw), (pt, pl, _, pr) = pw.strides, pw.pads
    kh, kw = pw.kernel_h, pw.kernel_w
    wp = pw.width + pl + pr
    half = hw.acc_depth // 2
    band = _max_band_rows(pw, half)
    if band * pw.out_w == 1 and kh * kw > 1:
        raise FitError(f"{pw}: one output pixel per band would write one ACC row back to back")
    turn = 0
    for cb in range(pw.c_blocks):
        plane_in, plane_out = cb * pw.height * pw.width, cb * pw.out_h * pw.out_w
        for oh0 in range(0, pw.out_h, band):
            rows = min(band, pw.out_h - oh0)
            base = turn * half
            turn ^= 1
            top = oh0 * sh - pt  # first input row (unpadded coordinates)
            in_h = (rows - 1) * sh + kh
            y0 = max(0, -top)
            y1 = max(0, top + in_h - pw.height)
            ys = in_h - y0 - y1
            em.load(
                MemType.ACC_8BIT,
                base,
                data + plane_in + (top + y0) * pw.width,
                ys,
                pw.width,
                pw.width,
                (y0, y1, pl, pr),
            )
            # the load's zero padding -> -128 (MIN with the immediate), so it never wins
            if y0:
                alu_pass(em, AluOp.MIN, base, (y0 * wp, 1, 1, 0), imm=-128)
            if y1:
                alu_pass(em, AluOp.MIN, base + (in_h - y1) * wp, (y1 * wp, 1, 1, 0), imm=-128)
            for c in [*range(pl), *range(pl + pw.width, wp)]:
                alu_pass(em, AluOp.MIN, base + c, (in_h, wp, 1, 0), imm=-128)
            o = base + in_h * wp
            shape = (rows, pw.out_w, pw.out_w, 1)
            alu_pass(em, AluOp.MUL, o, (rows * pw.out_w, 1, 1, 0), imm=0)
            for t in range(kh * kw):
                i, j = divmod(t, kw)
                op = AluOp.ADD if t == 0 else AluOp.MAX
                alu_pass(em, op, o, shape, src=base + i * wp + j, sf=(sh * wp, sw))
            em.store(o, out + plane_out + oh0 * pw.out_w, 1, rows * pw.out_w, rows * pw.out_w)


def _emit_global_avg(
    em: Emitter, pw: PoolWorkload, hw: HwConfig, data: int, out: int, offsets: int | None
) -> None:
    hw_px = pw.height * pw.width
    half = hw.acc_depth // 2
    group = min(pw.c_blocks, half // (hw_px + 1 + int(pw.offset)))  # + dense (+ offset) rows
    if group < 2 or pw.c_blocks < 2:  # (one block: consecutive micro-ops on one row)
        raise FitError(
            f"{pw}: needs 2 or more channel blocks whose pixels fit half the ACC ({half} rows)"
        )
    turn = 0
    for cb0 in range(0, pw.c_blocks, group):
        n = min(group, pw.c_blocks - cb0)
        base = turn * half
        turn ^= 1
        em.load(MemType.ACC_8BIT, base, data + cb0 * hw_px, 1, n * hw_px, n * hw_px)
        rows = hw_px  # tree: rows [0, h) += rows [rows - h, rows) of every block
        while rows > 1:
            h = rows // 2
            alu_pass(em, AluOp.ADD, base, (n, hw_px, h, 1), src=base + rows - h, sf=(hw_px, 1))
            rows -= h
        d = base + n * hw_px  # each block's sum to a dense row, then the requantization
        alu_pass(em, AluOp.MUL, d, (n, 1, 1, 0), imm=0)
        alu_pass(em, AluOp.ADD, d, (n, 1, 1, 0), src=base, sf=(hw_px, 0))
        dense = (n, 1, 1, 0)
        if pw.mult != 1:
            alu_pass(em, AluOp.MUL, d, dense, imm=pw.mult)
        if pw.shift:
            alu_pass(em, AluOp.ADD, d, dense, imm=1 << (pw.shift - 1))
        if pw.offset:  # the group's negated channel offsets, one row a block, after the sums
            em.load(MemType.ACC, d + n, offsets + cb0, 1, n, n)
            alu_pass(em, AluOp.ADD, d, (n, 1, 1, 0), src=d + n, sf=(1, 0))
        if pw.shift:
            alu_pass(em, AluOp.SHR, d, dense, imm=pw.shift)
        alu_pass(em, AluOp.MAX, d, dense, imm=-128)
        alu_pass(em, AluOp.MIN, d, dense, imm=127)
        em.store(d, out + cb0, 1, n, n)


def lower_pool(
    pw: PoolWorkload, hw: HwConfig, data: int, out: int, uops: int, offsets: int | None = None
):
    """(instructions with dependency tokens and FINISH, micro-ops) of ``pw``; ``data``/``out``:
    the DRAM bases of the input and output (int8 row units), ``uops`` of the micro-ops,
    ``offsets`` of the negated channel offsets (int32 row units; ``pw.offset``)."""
    if pw.block != hw.block_in or hw.batch != 1:
        raise FitError(f"{pw}: lowered for block {hw.block_in}, batch {hw.batch} (need block"
                       f" {pw.block}, batch 1)")  # fmt: skip
    if pw.offset != (offsets is not None):
        raise ValueError("offsets are given exactly when the pool workload has offset")
    em = Emitter(hw)
    if pw.kind == "max":
        _emit_max(em, pw, hw, data, out)
    else:
        _emit_global_avg(em, pw, hw, data, out, offsets)
    em.finish()
    insns, accesses = em.program(uops)
    return insert_dep_tokens(insns, accesses, hw), list(em.uops)


def build_pool_kernel(pw: PoolWorkload, hw: HwConfig, offsets=None) -> Kernel:
    """``pw`` lowered at base 0 into a relocatable kernel: regions ``input`` (C/B, H, W, B) and
    ``output`` (C/B, OH, OW, B) int8, ``offset`` (with ``pw.offset``: the channel offsets
    ``offsets`` (C/B, B), stored negated as int32), ``uops``, ``insns``; ``info["kind"]`` is
    ``"pool"``."""
    import numpy as np

    if pw.offset != (offsets is not None):
        raise ValueError("offsets are given exactly when the pool workload has offset")
    row = hw.out_elem_bytes
    consts = {}
    if offsets is not None:
        offsets = np.asarray(offsets, np.int64)
        if offsets.shape != (pw.c_blocks, pw.block) or np.abs(offsets).max() >= 2**31:
            raise ValueError(
                f"offsets must be int32 {(pw.c_blocks, pw.block)}, got {offsets.shape}"
            )
        consts["offset"] = np.ascontiguousarray(-offsets, "<i4").tobytes()
    sizes = [
        ("input", RegionKind.INPUT, pw.c_blocks * pw.height * pw.width * row),
        ("output", RegionKind.OUTPUT, pw.c_blocks * pw.out_h * pw.out_w * row),
        *[(k, RegionKind.CONST, len(v)) for k, v in consts.items()],
        ("uops", RegionKind.CONST, 0),
    ]
    base = {r.name: r.offset for r in layout_regions(sizes)}
    off = base["offset"] // hw.acc_elem_bytes if "offset" in base else None
    insns, uops = lower_pool(
        pw, hw, base["input"] // row, base["output"] // row, base["uops"] // hw.uop_elem_bytes, off
    )
    consts |= {"uops": encode_uops(uops, hw), "insns": encode_insns(insns, hw)}
    sizes[-1] = ("uops", RegionKind.CONST, len(consts["uops"]))
    sizes.append(("insns", RegionKind.CONST, len(consts["insns"])))
    regions = layout_regions(sizes)
    info = {"kind": "pool", "workload": pw.to_dict(), "config": {}, "uops": len(uops)}
    return Kernel(hw.tag, regions, consts, relocation_table(insns, regions, hw), len(insns), info)
