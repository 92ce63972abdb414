"""The VTA conv2d template: a tiled, virtual-threaded loop program lowered to instructions.

For each output tile (tile_co blocks x tile_h x tile_w pixels), assigned round-robin to
``vthreads`` virtual threads that own separate halves of the INP, WGT and ACC buffers:
    reset the ACC tile (GEMM reset); load the bias rows (ACC load)
    for each input-channel chunk (tile_ci blocks):
        LOAD INP: one 2-D strided load per channel block, the spatial zero padding folded
                  into the pad fields
        LOAD WGT: one 2-D load of the chunk's weights (skipped when unchanged)
        GEMM:     one instruction; two dimensions in its hardware loops, the rest in its
                  micro-op kernel
    ALU epilogue: + bias, + residual << residual_shift, >> shift, clip to [lo, hi]
    STORE the int8 OUT rows.
The threads' streams are interleaved chunk by chunk so one thread's loads overlap another's
GEMMs; ``insert_dep_tokens`` then derives every dependency token from the accesses.
The config's loop orders (``config.TILE_ORDERS``: channel or spatial tiles outer;
``config.CHUNK_ORDERS``: the chunks upwards, or alternating direction) decide which loads a
slot's contents make unnecessary, and ``uop_mode`` whether the micro-op kernels are loaded
once at the start or into a ring at first use; their defaults are the program above.

``conv2d_tile`` holds the pieces both schedules emit (slots, a tile's start, its chunks, its
epilogue); ``conv2d_overlap`` the schedule with the epilogue beside the GEMMs (the ISA's
overlap bit); ``_emit`` here is the v0.0.2 one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyvta.compiler.backend.vta.config import (
    ConvConfig,
    FitError,
    Geometry,
    check_fit,
    chunk_index,
    first_chunk_parts,
    reserved_rows,
)
from pyvta.compiler.backend.vta.conv2d_overlap import (
    early_starts,
    emit_overlapped,
    lazy_alu_starts,
)
from pyvta.compiler.backend.vta.conv2d_tile import (
    Ctx,
    SlotLayout,
    chunk,
    epilogue,
    load_constants,
    tile_groups,
    tile_start,
)
from pyvta.compiler.backend.vta.deps import insert_dep_tokens, mark_overlaps
from pyvta.compiler.backend.vta.emitter import Emitter, UopOverflowError
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import HwConfig, Insn, Uop


@dataclass(frozen=True)
class DramMap:
    """Where the operands live in DRAM, in element units of their memory type."""

    data: int  # INP elements
    weights: int  # WGT elements
    bias: int  # ACC elements
    output: int  # OUT elements
    residual: int = 0  # int8 rows: INP elements (GEMM path) / OUT-sized ACC_8BIT elements
    uops: int = 0  # micro-op units
    wgt_consts: int = 0  # WGT elements: bias digit blocks (co_blocks), then 2^k * identity
    ones: int = 0  # INP element: the bias digits' input row (1, 127, ..., 127)

    @classmethod
    def disjoint(cls, wl: ConvWorkload, hw: HwConfig) -> DramMap:
        """Non-overlapping regions for every operand (for measuring a config without a device)."""
        sizes = {
            "data": wl.batch * wl.ci_blocks * wl.height * wl.width * hw.inp_elem_bytes,
            "weights": wl.co_blocks * wl.red_blocks * wl.kernel_h * wl.kernel_w * hw.wgt_elem_bytes,
            "bias": 2 * wl.co_blocks * hw.acc_elem_bytes,  # bias rows, channel shift rows
            "output": wl.batch * wl.co_blocks * wl.out_h * wl.out_w * hw.out_elem_bytes,
            "residual": wl.batch * wl.co_blocks * wl.out_h * wl.out_w * hw.out_elem_bytes,
            "uops": hw.uop_buff_bytes,
            "wgt_consts": (wl.co_blocks + 1) * hw.wgt_elem_bytes,
            "ones": hw.inp_elem_bytes,
        }
        elem = {
            "data": hw.inp_elem_bytes,
            "weights": hw.wgt_elem_bytes,
            "bias": hw.acc_elem_bytes,
            "output": hw.out_elem_bytes,
            "residual": hw.out_elem_bytes,
            "uops": hw.uop_elem_bytes,
            "wgt_consts": hw.wgt_elem_bytes,
            "ones": hw.inp_elem_bytes,
        }
        addr, bases = 1 << 12, {}
        for name, size in sizes.items():
            bases[name] = addr // elem[name]
            addr += -(-size // 4096) * 4096
        return cls(**bases)


@dataclass
class LoweredConv:
    insns: list[Insn]
    uops: list[Uop]
    geometry: Geometry


def lower_conv2d(
    wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig, dram: DramMap
) -> LoweredConv:
    """Instruction stream (with dependency tokens and a final FINISH) for one conv2d."""
    g = check_fit(wl, ep, c, hw)
    if hw.batch != 1:
        raise FitError(f"the conv2d template supports BATCH = 1, config has {hw.batch}")
    lay = SlotLayout.of(wl, ep, c, hw)
    ctx = Ctx(wl, ep, c, g, dram, lay, reserved_rows(wl, ep))
    ctx = dataclasses.replace(
        ctx, early=early_starts(ctx), lazy=lazy_alu_starts(ctx), first_parts=first_chunk_parts(c)
    )
    emit = emit_overlapped if lay.overlapped else _emit
    try:  # all micro-op kernels resident at once; else loaded on demand into a ring
        em = emit(ctx, Emitter(hw, dynamic_uops=c.uop_mode == "ring"))
    except UopOverflowError:
        try:
            em = emit(ctx, Emitter(hw, dynamic_uops=True))
        except UopOverflowError as exc:
            raise FitError(f"config {c.to_dict()}: {exc}") from None
    insns, accesses = em.program(dram.uops)
    if lay.overlapped:
        insns = mark_overlaps(insns, accesses)
    return LoweredConv(insert_dep_tokens(insns, accesses, hw), list(em.uops), g)


def _emit(x: Ctx, em: Emitter) -> Emitter:
    """Each group: every thread's tile start, the chunks thread by thread, the epilogues."""
    wl, c = x.wl, x.c
    groups = tile_groups(wl, c)
    n_chunks = wl.red_blocks // c.tile_ci
    loaded: dict = {}  # WGT slot row -> its (co, ci) tile; ("inp", INP slot row) -> its input
    load_constants(em, x)
    for n, tiles in enumerate(groups):
        group = list(enumerate(tiles))
        for v, tile in group:
            tile_start(em, x, v, tile)
        for k in range(n_chunks):
            for v, tile in group:
                chunk(em, x, x.lay.bases(v), tile, chunk_index(c, n, k, n_chunks), loaded)
        for v, tile in group:
            epilogue(em, x, v, tile)
    em.finish()
    return em
