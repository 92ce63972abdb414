"""The conv2d schedule with the epilogue overlapped (``isa.layout.OVERLAP_DOC``): each thread's
ALU work beside another thread's GEMMs, and when tiles start early or lazily (on the ALU pipe).
``conv2d.lower_conv2d`` picks it where ``config.overlapped`` says so.
"""

from __future__ import annotations

import dataclasses

from pyvta.compiler.backend.vta.config import chunk_index
from pyvta.compiler.backend.vta.conv2d_tile import (
    Ctx,
    chunk,
    epilogue,
    load_constants,
    residual_loads,
    splits,
    tile_groups,
    tile_start,
)
from pyvta.compiler.backend.vta.cost import tile_compute_insns
from pyvta.compiler.backend.vta.emitter import Emitter


def emit_overlapped(x: Ctx, em: Emitter) -> Emitter:
    """Software-pipelined for the two compute pipes: each thread's epilogue (ALU) after the next
    GEMM of another thread, so that it runs beside it (an epilogue with a GEMM pass, the
    residual: its head then, the pass joining the GEMMs, its tail after the next GEMM of
    another thread); ``mark_overlaps`` then sets the overlap bits where the footprints allow.
    With two ACC slots per thread (``SlotLayout.acc_slots``) a group's tile starts come first,
    the odd threads' resets on the ALU pipe (``config.alu_reset``) and before the GEMM pipe's
    (two threads, one chunk: reset 1 (ALU), reset 0, GEMM 0, epilogue 1 of the last group,
    GEMM 1, epilogue 0, reset 1', ...); with one, a thread's tile start comes just before its
    first chunk, after the epilogue of its last tile. With ``early_starts`` a group's tiles
    start (on the ALU) beside the group before's second chunk, and the tails go beside the
    next group's first GEMMs."""
    wl, c, lay = x.wl, x.c, x.lay
    n_chunks = wl.red_blocks // c.tile_ci
    loaded: dict = {}  # WGT slot row -> its (co, ci) tile; ("inp", INP slot row) -> its input
    pending: list[tuple[int, tuple, int, str]] = []  # (thread, tile, slot, part) to emit

    def emit(entry) -> None:
        v, tile, slot, part = entry
        epilogue(em, x, v, tile, slot, part)
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
        tile_start(em, x, v, tile, slot, late_residual=True)

    def residual_rows(v: int, tile) -> None:
        """After the tile's first chunk (its loads go first): its residual rows, once the
        last tile's pass (a head) has read them."""
        if x.ep.residual_via_gemm and x.ep.residual_after_shift:
            finish_first(lambda p: p[3] == "head" and p[0] == v)
            residual_loads(em, x, v, tile)

    last_part = "head" if splits(x.ep) else "all"
    last_group = False
    early = x.early
    started: set[tuple] = set()  # tiles started early (beside the group before)
    groups = tile_groups(wl, c)
    load_constants(em, x)
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
                chunk(em, x, bases, tile, chunk_index(c, n, k, n_chunks), loaded, parts)
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


def _epilogue_by_block(em: Emitter, x: Ctx, v: int, tile, slot: int, part: str) -> None:
    """The epilogue of a tile without a residual, one channel block at a time (all its passes,
    then its store), so that the stores run beside the ALU passes of the blocks after it:
    for the program's last tile, which nothing else hides."""
    co0, oh0, ow0 = tile
    p = x.g.pixels
    one = dataclasses.replace(x.c, tile_co=1)
    for j in range(x.c.tile_co):
        lay = dataclasses.replace(x.lay, acc_base=tuple(b + j * p for b in x.lay.acc_base))
        epilogue(em, dataclasses.replace(x, c=one, lay=lay), v, (co0 + j, oh0, ow0), slot, part)


# The chunk (of the current group) beside whose GEMMs the next group's tiles start (their ACC
# reset and bias, on the ALU pipe; ``early_starts``): the second, by when the store of each
# ACC slot's previous tile, beside the first, is done.
EARLY_START_CHUNK = 1

EARLY_START_MIN_GROUPS = 8

# ACC rows a tile needs for early starts to pay: on small tiles the starts' ALU instructions (and
# the drains of their pushes) cost more than the resets they move off the GEMM pipe (a 2x1-pixel,
# two-block tile: 2% slower)
EARLY_START_MIN_ROWS = 128


def lazy_alu_starts(x: Ctx) -> bool:
    """Whether ``emit_overlapped`` resets each tile on the ALU just before its GEMM (beside the
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
        and wl.red_blocks == c.tile_ci
        and c.tile_ci * wl.kernel_h * wl.kernel_w >= alu_passes
    )


def early_starts(x: Ctx) -> bool:
    """Whether ``emit_overlapped`` starts each tile (ALU reset, then the ALU bias: adding it
    first or last gives the same int32 sum) beside the other thread's GEMMs of the group before,
    so that neither the GEMM pipe nor the next group's first GEMM waits for a tile start: two
    threads (in two ACC banks), two ACC slots each, and at least two chunks per tile (the
    second chunk's GEMMs take the starts; with one chunk, the previous epilogue of that slot
    would not be stored yet), and ``EARLY_START_MIN_GROUPS`` groups (with fewer, the first
    group's starts, in sequence on the ALU, and the program's tail outweigh what the others
    gain: ResNet-18's 7x7 residual layers, two groups, lose 0.8%), on tiles of at least
    ``EARLY_START_MIN_ROWS`` ACC rows. With them, the tails of the
    epilogues (the ALU passes after a residual pass) also wait for the next group's first
    GEMMs instead of going beside a residual pass (``emit_overlapped``)."""
    return (
        x.lay.acc_slots > 1
        and x.c.vthreads == 2
        and x.wl.red_blocks // x.c.tile_ci > EARLY_START_CHUNK
        and len(tile_groups(x.wl, x.c)) >= EARLY_START_MIN_GROUPS
        and x.c.tile_co * x.g.pixels >= EARLY_START_MIN_ROWS
    )
