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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.backend.vta.config import (
    ConvConfig,
    FitError,
    Geometry,
    alu_reset,
    check_fit,
    clip_ops,
    first_chunk_parts,
    gemm_dims,
    overlapped,
    reserved_rows,
    same_pixels,
    shared_inputs,
)
from pyvta.compiler.backend.vta.cost import tile_compute_insns
from pyvta.compiler.backend.vta.deps import insert_dep_tokens, mark_overlaps
from pyvta.compiler.backend.vta.emitter import Emitter, UopOverflowError
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import AluInsn, AluOp, GemmInsn, HwConfig, Insn, MemType, Uop


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
            "data": wl.ci_blocks * wl.height * wl.width * hw.inp_elem_bytes,
            "weights": wl.co_blocks * wl.ci_blocks * wl.kernel_h * wl.kernel_w * hw.wgt_elem_bytes,
            "bias": wl.co_blocks * hw.acc_elem_bytes,
            "output": wl.co_blocks * wl.out_h * wl.out_w * hw.out_elem_bytes,
            "residual": wl.co_blocks * wl.out_h * wl.out_w * hw.out_elem_bytes,
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


KERNEL_ORDER = ("ci", "kh", "kw", "co", "oh", "ow")  # outermost first; outputs innermost


def _gemm(wl: ConvWorkload, c: ConvConfig, g: Geometry, acc0: int, inp0: int, wgt0: int):
    dims = gemm_dims(wl, c, g)
    outer, inner = c.gemm_loops
    kernel_dims = [d for d in KERNEL_ORDER if d not in (outer, inner)]
    grids = np.meshgrid(*[np.arange(dims[d][0]) for d in kernel_dims], indexing="ij")
    flat = [x.reshape(-1) for x in grids]
    base = {}
    for k, (name, off) in enumerate((("dst", acc0), ("src", inp0), ("wgt", wgt0))):
        base[name] = off + sum(f * dims[d][1 + k] for f, d in zip(flat, kernel_dims, strict=True))
    kernel = [
        Uop(int(a), int(b), int(w))
        for a, b, w in zip(base["dst"], base["src"], base["wgt"], strict=True)
    ]
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
    _check_hazard(insn, base["dst"], c)
    return insn, kernel


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


def lower_conv2d(
    wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig, dram: DramMap
) -> LoweredConv:
    """Instruction stream (with dependency tokens and a final FINISH) for one conv2d."""
    g = check_fit(wl, ep, c, hw)
    if hw.batch != 1:
        raise FitError(f"the conv2d template supports BATCH = 1, config has {hw.batch}")
    lay = _Layout.of(wl, ep, c, hw)
    ctx = _Ctx(wl, ep, c, g, dram, lay, reserved_rows(wl, ep))
    ctx = dataclasses.replace(
        ctx, early=_early_starts(ctx), lazy=_lazy_alu_starts(ctx), first_parts=first_chunk_parts(c)
    )
    emit = _emit_overlapped if lay.overlapped else _emit
    try:  # all micro-op kernels resident at once; else loaded on demand into a ring
        em = emit(ctx, Emitter(hw))
    except UopOverflowError:
        try:
            em = emit(ctx, Emitter(hw, dynamic_uops=True))
        except UopOverflowError as exc:
            raise FitError(f"config {c.to_dict()}: {exc}") from None
    insns, accesses = em.program(dram.uops)
    if lay.overlapped:
        insns = mark_overlaps(insns, accesses)
    return LoweredConv(insert_dep_tokens(insns, accesses, hw), list(em.uops), g)


def _emit(x: _Ctx, em: Emitter) -> Emitter:
    """Each group: every thread's tile start, the chunks thread by thread, the epilogues."""
    wl, c = x.wl, x.c
    groups = _tile_groups(wl, c)
    n_chunks = wl.ci_blocks // c.tile_ci
    loaded: dict = {}  # WGT slot row -> its (co, ci) tile; ("inp", INP slot row) -> its input
    _load_constants(em, x)
    for tiles in groups:
        group = list(enumerate(tiles))
        for v, tile in group:
            _tile_start(em, x, v, tile)
        for k in range(n_chunks):
            for v, tile in group:
                _chunk(em, x, x.lay.bases(v), tile, k, loaded)
        for v, tile in group:
            _epilogue(em, x, v, tile)
    em.finish()
    return em


def _emit_overlapped(x: _Ctx, em: Emitter) -> Emitter:
    """Software-pipelined for the two compute pipes: each thread's epilogue (ALU) after the next
    GEMM of another thread, so that it runs beside it (an epilogue with a GEMM pass, the
    residual: its head then, the pass joining the GEMMs, its tail after the next GEMM of
    another thread); ``mark_overlaps`` then sets the overlap bits where the footprints allow.
    With two ACC slots per thread (``_Layout.acc_slots``) a group's tile starts come first,
    the odd threads' resets on the ALU pipe (``config.alu_reset``) and before the GEMM pipe's
    (two threads, one chunk: reset 1 (ALU), reset 0, GEMM 0, epilogue 1 of the last group,
    GEMM 1, epilogue 0, reset 1', ...); with one, a thread's tile start comes just before its
    first chunk, after the epilogue of its last tile. With ``_early_starts`` a group's tiles
    start (on the ALU) beside the group before's second chunk, and the tails go beside the
    next group's first GEMMs."""
    wl, c, lay = x.wl, x.c, x.lay
    n_chunks = wl.ci_blocks // c.tile_ci
    loaded: dict = {}  # WGT slot row -> its (co, ci) tile; ("inp", INP slot row) -> its input
    pending: list[tuple[int, tuple, int, str]] = []  # (thread, tile, slot, part) to emit

    def emit(entry) -> None:
        v, tile, slot, part = entry
        _epilogue(em, x, v, tile, slot, part)
        if part == "head":  # it ended with a GEMM pass of thread v (one cycle a row)
            pending.append((v, tile, slot, "tail"))
            gemm_emitted(v, short=True)

    def gemm_emitted(v: int, short: bool = False) -> None:
        """A GEMM of thread v was emitted: the other threads' pending parts go beside it. Beside
        a ``short`` one (a residual pass) only heads while another group follows: a tail (three
        ALU passes) there would hold back the next GEMM, which waits for all but the ALU's
        latest instruction."""
        hold = short and not last_group and early
        for entry in [p for p in pending if p[0] != v and not (hold and p[3] == "tail")]:
            if entry in pending:
                pending.remove(entry)
                emit(entry)

    def finish_first(due) -> None:
        while any(due(p) for p in pending):
            entry = next(p for p in pending if due(p))
            pending.remove(entry)
            emit(entry)

    def start(v: int, tile, slot: int) -> None:
        finish_first(lambda p: p[2] == slot)  # what reads this ACC slot
        _tile_start(em, x, v, tile, slot, late_residual=True)

    def residual_rows(v: int, tile) -> None:
        """After the tile's first chunk (its loads go first): its residual rows, once the
        last tile's pass (a head) has read them."""
        if x.ep.residual_via_gemm and x.ep.residual_after_shift:
            finish_first(lambda p: p[3] == "head" and p[0] == v)
            _residual_loads(em, x, v, tile)

    last_part = "head" if _splits(x.ep) else "all"
    last_group = False
    early = x.early
    started: set[tuple] = set()  # tiles started early (beside the group before)
    groups = _tile_groups(wl, c)
    _load_constants(em, x)
    for n, tiles in enumerate(groups):
        last_group = n + 1 == len(groups)
        group = [(v, tile, v + c.vthreads * (n % lay.acc_slots)) for v, tile in enumerate(tiles)]
        ahead = [  # the next group's tiles, started beside this group's GEMMs (early starts)
            (v, tile, v + c.vthreads * ((n + 1) % lay.acc_slots))
            for v, tile in enumerate(groups[n + 1] if early and n + 1 < len(groups) else [])
        ]
        # the group's tile starts first (the first group's always: nothing is pending), ALU
        # resets first: a GEMM reset after them covers the last group's GEMMs, so it can free
        # their input slots for the loads (insert_dep_tokens); else each just before its chunk
        batch = (lay.acc_slots > 1 and not (x.lazy and n > 0)) or n == 0
        if batch:
            for v, tile, slot in sorted(group, key=lambda t: t[0] % 2 == 0):
                if (v, tile, slot) not in started:  # (not started early)
                    start(v, tile, slot)
        for k in range(n_chunks):
            for v, tile, slot in group:
                if k == 0 and not batch:
                    start(v, tile, slot)
                parts = x.first_parts if n == 0 and k == 0 else 1
                bases = lay.bases(v, slot)
                if lay.shared_inp:  # the chunk's turn picks the INP slot, for every thread
                    turn = (n * n_chunks + k) % c.vthreads
                    bases = (bases[0], turn * lay.inp_slot, bases[2])
                _chunk(em, x, bases, tile, k, loaded, parts)
                if k == 0:
                    residual_rows(v, tile)
                if k == n_chunks - 1:
                    pending.append((v, tile, slot, last_part))
                if k == EARLY_START_CHUNK:  # the other bank's next tile beside this GEMM
                    for w, tile_w, slot_w in [a for a in ahead if a[2] % 2 != slot % 2]:
                        start(w, tile_w, slot_w)
                        started.add((w, tile_w, slot_w))
                gemm_emitted(v)
    while pending:  # the program's tail: nothing beside it
        v, tile, slot, part = pending.pop(0)
        if pending or part == "head" or x.ep.residual:
            emit((v, tile, slot, part))
        else:  # the last: its stores start after each block's passes
            _epilogue_by_block(em, x, v, tile, slot, part)
    em.finish()
    return em


def _epilogue_by_block(em: Emitter, x: _Ctx, v: int, tile, slot: int, part: str) -> None:
    """The epilogue of a tile without a residual, one channel block at a time (all its passes,
    then its store), so that the stores run beside the ALU passes of the blocks after it:
    for the program's last tile, which nothing else hides."""
    co0, oh0, ow0 = tile
    p = x.g.pixels
    one = dataclasses.replace(x.c, tile_co=1)
    for j in range(x.c.tile_co):
        lay = dataclasses.replace(x.lay, acc_base=tuple(b + j * p for b in x.lay.acc_base))
        _epilogue(em, dataclasses.replace(x, c=one, lay=lay), v, (co0 + j, oh0, ow0), slot, part)


# The chunk (of the current group) beside whose GEMMs the next group's tiles start (their ACC
# reset and bias, on the ALU pipe; ``_early_starts``): the second, by when the store of each
# ACC slot's previous tile, beside the first, is done.
EARLY_START_CHUNK = 1
EARLY_START_MIN_GROUPS = 8
# ACC rows a tile needs for early starts to pay: on small tiles the starts' ALU instructions (and
# the drains of their pushes) cost more than the resets they move off the GEMM pipe (a 2x1-pixel,
# two-block tile: 2% slower)
EARLY_START_MIN_ROWS = 128


def _lazy_alu_starts(x: _Ctx) -> bool:
    """Whether ``_emit_overlapped`` resets each tile on the ALU just before its GEMM (beside the
    other thread's GEMM before, after that thread's epilogue) instead of a group's resets at
    its start, one on the GEMM pipe: two threads, two ACC slots each, one chunk a tile, and
    GEMMs long enough for the ALU work beside them: at least one GEMM cycle a row for each ALU
    pass of a tile (its reset and its epilogue's passes, one cycle a row each; the 1x1 layers
    of ResNet-18: reset, bias, shift, CLIP beside 4 GEMM cycles a row from 64 input channels,
    from 128 with MAX and MIN for the clip)."""
    wl, c = x.wl, x.c
    alu_passes = 1 + len(tile_compute_insns(wl, x.ep, c, x.g).epilogue_alus)
    return (
        x.lay.acc_slots > 1
        and c.vthreads == 2
        and wl.ci_blocks == c.tile_ci
        and c.tile_ci * wl.kernel_h * wl.kernel_w >= alu_passes
    )


def _early_starts(x: _Ctx) -> bool:
    """Whether ``_emit_overlapped`` starts each tile (ALU reset, then the ALU bias: adding it
    first or last gives the same int32 sum) beside the other thread's GEMMs of the group before,
    so that neither the GEMM pipe nor the next group's first GEMM waits for a tile start: two
    threads (in two ACC banks), two ACC slots each, and at least two chunks per tile (the
    second chunk's GEMMs take the starts; with one chunk, the previous epilogue of that slot
    would not be stored yet), and ``EARLY_START_MIN_GROUPS`` groups (with fewer, the first
    group's starts, in sequence on the ALU, and the program's tail outweigh what the others
    gain: ResNet-18's 7x7 residual layers, two groups, lose 0.8%), on tiles of at least
    ``EARLY_START_MIN_ROWS`` ACC rows. With them, the tails of the
    epilogues (the ALU passes after a residual pass) also wait for the next group's first
    GEMMs instead of going beside a residual pass (``_emit_overlapped``)."""
    return (
        x.lay.acc_slots > 1
        and x.c.vthreads == 2
        and x.wl.ci_blocks // x.c.tile_ci > EARLY_START_CHUNK
        and len(_tile_groups(x.wl, x.c)) >= EARLY_START_MIN_GROUPS
        and x.c.tile_co * x.g.pixels >= EARLY_START_MIN_ROWS
    )


@dataclass(frozen=True)
class _Layout:
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
    # a group's threads compute the same pixels (``_tile_groups``): each chunk's input is loaded
    # once, into the INP slot of the chunk's turn, and read by every thread (``_emit_overlapped``)
    shared_inp: bool = False

    @classmethod
    def of(cls, wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> _Layout:
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
class _Ctx:
    """Everything the emitting helpers share for one lowering."""

    wl: ConvWorkload
    ep: Epilogue
    c: ConvConfig
    g: Geometry
    dram: DramMap
    lay: _Layout
    fixed: dict
    early: bool = False  # ``_early_starts``
    lazy: bool = False  # ``_lazy_alu_starts``
    first_parts: int = 1  # ``first_chunk_parts``


def _load_constants(em: Emitter, x: _Ctx) -> None:
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


def _tile_start(
    em: Emitter, x: _Ctx, v: int, tile, slot: int | None = None, late_residual: bool = False
) -> None:
    """Reset the tile's ACC rows (on the GEMM pipe, or the ALU's: ``config.alu_reset``); add
    the bias and the residual with GEMM passes if chosen. ``late_residual``: the residual rows
    a pass after the shift reads are loaded by the caller (``_residual_loads``), later."""
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
        _residual_loads(em, x, v, tile)
        if not ep.residual_after_shift:
            res0 = v * lay.inp_slot + g.inp_rows - rows
            _residual_gemm(em, ep, acc0, res0, rows, lay.ident)


def _residual_loads(em: Emitter, x: _Ctx, v: int, tile) -> None:
    """The tile's residual rows into thread v's INP slot, after its data rows (GEMM path)."""
    res0 = v * x.lay.inp_slot + x.g.inp_rows - x.c.tile_co * x.g.pixels
    _load_residual(em, x, tile, MemType.INP, res0)


def _load_residual(em: Emitter, x: _Ctx, tile, mem: MemType, sram0: int) -> None:
    """The tile's int8 residual rows (one 2-D load per channel block) into ``mem`` from row
    ``sram0``: INP for the GEMM path, ACC_8BIT (sign-extended) for the ALU path."""
    wl, c, p = x.wl, x.c, x.g.pixels
    co0, oh0, ow0 = tile
    for co in range(c.tile_co):
        em.load(
            mem,
            sram0 + co * p,
            x.dram.residual + ((co0 + co) * wl.out_h + oh0) * wl.out_w + ow0,
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


def _tile_groups(wl: ConvWorkload, c: ConvConfig) -> list[list[tuple[int, int, int]]]:
    """Output tiles (co, oh, ow) in groups of ``vthreads``, one tile per thread.

    When the output-channel tiles divide among the threads, each thread keeps its own channel
    tiles (its weights change only when its channel tile does, while the others compute);
    otherwise the threads take consecutive spatial tiles of one channel tile.
    """
    v = c.vthreads
    cos = list(range(0, wl.co_blocks, c.tile_co))
    sps = [(oh, ow) for oh in range(0, wl.out_h, c.tile_h) for ow in range(0, wl.out_w, c.tile_w)]
    if same_pixels(wl, c):
        return [
            [(cos[i + t], oh, ow) for t in range(v)]
            for i in range(0, len(cos), v)
            for oh, ow in sps
        ]
    tiles = [(co, oh, ow) for co in cos for oh, ow in sps]
    return [tiles[i : i + v] for i in range(0, len(tiles), v)]


def _chunk(em: Emitter, x: _Ctx, bases, tile, k: int, loaded: dict, parts: int = 1) -> None:
    """Chunk k of a tile: its input loads and its weights (each unless its slot holds them:
    ``loaded`` maps a slot's first row to what it holds), its GEMM; with ``parts`` > 1 and
    weights to load, those and the GEMM in that many runs of channel blocks
    (``first_chunk_parts``)."""
    wl, c, g, dram = x.wl, x.c, x.g, x.dram
    acc0, inp0, wgt0 = bases
    co0, oh0, ow0 = tile
    ci0 = k * c.tile_ci
    s, pad = wl.stride, wl.pad
    # input rows/cols the tile needs, in unpadded coordinates, and how much falls in the padding
    top, left = oh0 * s - pad, ow0 * s - pad
    y0, x0 = max(0, -top), max(0, -left)
    y1 = max(0, top + (g.in_h - 1) * g.row_step + 1 - wl.height)  # (row_step > 1: no padding)
    x1 = max(0, left + g.in_w - wl.width)
    ys, xs = g.in_h - y0 - y1, g.in_w - x0 - x1
    if ys <= 0 or xs <= 0:
        raise FitError(f"config {c.to_dict()}: a tile of {wl} lies entirely in the padding")
    inp_key = ("inp", oh0, ow0, ci0)
    held = x.lay.shared_inp and loaded.get(("inp", inp0)) == inp_key
    for ci in range(0 if held else c.tile_ci):
        plane = (ci0 + ci) * wl.height * wl.width
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
                dram.weights + ((co0 + j * part_co) * wl.ci_blocks + ci0) * kk,
                part_co,
                c.tile_ci * kk,
                wl.ci_blocks * kk,
            )
        insn, kernel = _gemm(
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


def _alu_bias(em: Emitter, x: _Ctx, tile, slot: int) -> None:
    """acc += bias on the ALU: each channel block's bias row broadcast over the tile's pixels
    (one cycle a row: the src row repeats, rule 8 of ``isa.layout.OVERLAP_DOC``)."""
    p = x.g.pixels
    em.loop(
        AluInsn(
            alu_opcode=AluOp.ADD,
            iter_out=x.c.tile_co,
            iter_in=p,
            dst_factor_out=p,
            src_factor_out=1,
            dst_factor_in=1,
        ),
        [Uop(dst=x.lay.acc_base[slot], src=x.lay.bias_acc[slot] + tile[0])],
    )


def _splits(ep: Epilogue) -> bool:
    """Whether the epilogue has a GEMM pass in the middle (the residual, after the shift): its
    ``head`` ends with it, its ``tail`` is the ALU passes after it and the stores."""
    return ep.residual_via_gemm and ep.residual_after_shift


def _epilogue(
    em: Emitter, x: _Ctx, v: int, tile, slot: int | None = None, part: str = "all"
) -> None:
    """The tile's epilogue (``part``: "all", or its "head" or "tail", ``_splits``)."""
    if part == "tail":
        return _epilogue_tail(em, x, v, tile, slot)
    ep, c, g, lay = x.ep, x.c, x.g, x.lay
    p = g.pixels
    rows = c.tile_co * p
    slot = v if slot is None else slot
    acc0 = lay.acc_base[slot]
    if ep.bias and not ep.bias_via_gemm and not x.early:
        _alu_bias(em, x, tile, slot)
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
    if _splits(ep):
        pre = ep.residual_pre_shift
        if pre:
            _alu_rows(em, AluOp.SHR, acc0, rows, pre)
        _residual_gemm(em, ep, acc0, v * lay.inp_slot + g.inp_rows - rows, rows, lay.ident)
    if part == "all":
        _epilogue_tail(em, x, v, tile, slot)


def _epilogue_tail(em: Emitter, x: _Ctx, v: int, tile, slot: int | None) -> None:
    wl, ep, c, g, dram, lay = x.wl, x.ep, x.c, x.g, x.dram, x.lay
    co0, oh0, ow0 = tile
    p = g.pixels
    rows = c.tile_co * p
    acc0 = lay.acc_base[v if slot is None else slot]
    if _splits(ep):
        if ep.shift - ep.residual_pre_shift:
            _alu_rows(em, AluOp.SHR, acc0, rows, ep.shift - ep.residual_pre_shift)
    elif ep.shift:
        _alu_rows(em, AluOp.SHR, acc0, rows, ep.shift)
    for op, imm in clip_ops(ep, c):
        _alu_rows(em, op, acc0, rows, imm)
    out_plane = wl.out_h * wl.out_w
    if c.tile_w == wl.out_w and c.tile_h == wl.out_h:
        em.store(acc0, dram.output + co0 * out_plane, 1, rows, rows)
        return
    for co in range(c.tile_co):
        base = dram.output + (co0 + co) * out_plane + oh0 * wl.out_w + ow0
        if c.tile_w == wl.out_w:
            em.store(acc0 + co * p, base, 1, p, p)
        else:
            em.store(acc0 + co * p, base, c.tile_h, c.tile_w, wl.out_w)
