"""The analytic cost of one conv2d layer as ``conv2d.lower_conv2d`` lowers it, without lowering.

The instructions the template emits per tile are described here once (``tile_compute_insns``,
the DMA counts of ``conv_cost``) and costed per module with the cycle model's formulas and
constants (``sim.timing.Timing``: the GEMM/ALU instruction costs and the chunk GEMM's
read-after-write holds, the DMA rows' beats at the bus's or the request rate, the per-transfer
sequencer, setup and latency). ``default`` ranks configs by it and the tuner's
context features read its parts. What it leaves out is how the modules overlap (dependency
stalls, waits for the DRAM port's channels): ``ConvCost.total_cycles`` bounds that simply.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.backend.vta.config import (
    ConvConfig,
    Geometry,
    alu_reset,
    check_fit,
    clip_ops,
    first_chunk_parts,
    gemm_dims,
    overlapped,
    reserved_rows,
    shared_inputs,
)
from pyvta.compiler.backend.vta.conv2d_tile import chunk_rows
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import GemmInsn, HwConfig, MemType, encode_uops
from pyvta.sim.timing import Timing, expanded_rows


@dataclass(frozen=True)
class TileCompute:
    """The GEMM and ALU instructions of one output tile, by phase: before the chunks (ACC reset,
    bias and residual passes), one GEMM per input-channel chunk, the epilogue."""

    start_gemms: tuple[int, ...]  # micro-op iterations of each GEMM
    chunk_gemm: int  # micro-op iterations of one chunk's GEMM
    chunks: int
    epilogue_gemms: tuple[int, ...]
    # (iterations, immediate operand, src-row repeats (Timing.alu_issue_cycles)) of each ALU op
    epilogue_alus: tuple[tuple[int, bool, int], ...]
    # the chunk's GEMM as conv2d lowers it (loops, and its kernel's ACC rows), for the holds of
    # micro-ops on rows the ones just before write (Timing.gemm_raw_stall_cycles)
    chunk_insn: GemmInsn | None = None
    chunk_kernel_dst: tuple[int, ...] = ()

    @property
    def n_insns(self) -> int:
        return (
            len(self.start_gemms) + self.chunks + len(self.epilogue_gemms) + len(self.epilogue_alus)
        )

    def start_cycles(self, t: Timing) -> int:
        return sum(t.gemm_issue_cycles(n) for n in self.start_gemms)

    def chunk_cycles(self, t: Timing) -> int:
        """One chunk's GEMM; it pushes a token (its input buffer is free for the next load), so
        it waits for the pipeline to drain."""
        issue = t.gemm_issue_cycles(self.chunk_gemm) + self.chunk_raw_stall_cycles(t)
        return issue + t.gemm_drain_cycles(self.chunk_gemm)

    def chunk_raw_stall_cycles(self, t: Timing) -> int:
        if self.chunk_insn is None:
            return 0
        return _gemm_raw_stall_cycles(t, self.chunk_insn, self.chunk_kernel_dst)

    def epilogue_cycles(self, t: Timing) -> int:
        return sum(t.gemm_issue_cycles(n) for n in self.epilogue_gemms) + self.alu_cycles(t)

    def alu_cycles(self, t: Timing) -> int:
        """The epilogue's ALU instructions; the last pushes the tile to the store module, so
        it waits for the pipeline to drain."""
        issue = sum(t.alu_issue_cycles(n, imm, rep) for n, imm, rep in self.epilogue_alus)
        return issue + (t.alu_drain_cycles(self.epilogue_alus[-1][0]) if self.epilogue_alus else 0)

    def cycles(self, t: Timing) -> int:
        return self.start_cycles(t) + self.chunks * self.chunk_cycles(t) + self.epilogue_cycles(t)


def tile_compute_insns(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, g: Geometry) -> TileCompute:
    """What ``conv2d_tile.tile_start``, ``chunk`` and ``epilogue`` emit on the compute module for
    one tile (each pass one micro-op iteration per ACC row of the tile)."""
    rows = c.tile_co * g.pixels
    start, epi_gemm = [rows], []  # the ACC reset
    alu: list[tuple[int, bool, int]] = []
    if ep.bias and ep.bias_via_gemm:
        start.append(rows)
    if ep.residual_via_gemm:
        (epi_gemm if ep.residual_after_shift else start).append(ep.residual_passes * rows)
    if ep.bias and not ep.bias_via_gemm:  # one bias row per channel block, over its pixels
        alu.append((rows, False, c.tile_co * (g.pixels - 1)))
    if ep.channel_shift:  # one shift row per channel block, likewise
        alu.append((rows, False, c.tile_co * (g.pixels - 1)))
    if ep.residual and not ep.residual_via_gemm:
        if ep.residual_shift:
            alu.append((rows, True, 0))
        alu.append((rows, False, 0))
    if ep.residual_via_gemm and ep.residual_after_shift:
        pre = ep.residual_pre_shift
        alu += [(rows, True, 0)] * ((1 if pre else 0) + (1 if ep.shift - pre else 0))
    elif ep.shift:
        alu.append((rows, True, 0))
    alu += [(rows, True, 0)] * len(clip_ops(ep, c))  # CLIP, or MAX lo and MIN hi
    chunk = c.tile_co * c.tile_ci * wl.kernel_h * wl.kernel_w * g.pixels
    insn, rows = chunk_rows(wl, c, g, 0, 0, 0)
    return TileCompute(
        tuple(start),
        chunk,
        wl.red_blocks // c.tile_ci,
        tuple(epi_gemm),
        tuple(alu),
        insn,
        tuple(rows["dst"].tolist()),
    )


def uop_image(uops_addr: int, uops: list, hw: HwConfig) -> np.ndarray:
    """A DRAM image holding only ``uops`` at ``uops_addr`` (micro-op units, ``DramMap.uops``):
    what the cycle model (``sim.cycles_of(..., dram=)``) replays of a lowered stream to see its
    kernels' rows (read-after-write holds, src-row repeats, ACC banks) without its data."""
    raw = np.frombuffer(encode_uops(uops, hw), np.uint8)
    at = uops_addr * hw.uop_elem_bytes
    image = np.zeros(at + max(hw.uop_buff_bytes, raw.size), np.uint8)
    image[at : at + raw.size] = raw
    return image


@functools.lru_cache(maxsize=4096)
def _gemm_raw_stall_cycles(t: Timing, insn: GemmInsn, kernel_dst: tuple[int, ...]) -> int:
    rows = expanded_rows(insn, {"dst": np.array(kernel_dst, np.int64)}, "dst")
    return t.gemm_raw_stall_cycles(rows)


@dataclass(frozen=True)
class ConvCost:
    """Cycles and traffic of one lowered conv2d layer (whole layer, one launch).

    The module cycles are each module's busy time as the cycle model counts it, less its waits
    for the DRAM port (``ModuleStats.busy_cycles - dram_stall_cycles``)."""

    compute_cycles: float  # GEMM/ALU instructions, micro-op loads, ALU-path residual loads
    load_cycles: float  # input and weight loads: setup, latency, port beats, zero padding
    store_cycles: float  # output stores: setup, latency, port beats
    port_cycles: float  # the busier AXI data channel's beats (read: loads, fetch; write: stores)
    fetch_cycles: float  # the fetch module: per-instruction dispatch and the instruction beats
    dma_latency_cycles: float  # the loads' and stores' setup and latency (inside load + store)
    gemm_cycles: int  # ideal: the conv's GEMM micro-ops, one per cycle
    alu_cycles: float  # the epilogue's ALU instructions (inside compute)
    inp_bytes: int  # input loaded (halos and reloads, padding not read)
    wgt_bytes: int  # weights loaded (with reloads)
    out_bytes: int  # output stored
    inp_loads: int  # input DMA transfers
    wgt_loads: int
    stores: int
    tiles: int  # output tiles (channel tiles x spatial tiles)
    chunks: int  # input-channel chunks per tile
    kernel_uops: int  # micro-ops of the chunk GEMM's kernel
    vthreads: int
    # the modules overlapped (``_pipeline_cycles``), at least the DRAM port's and fetch's time
    total_cycles: float


# Tile groups the pipeline model steps through before it extrapolates (the pattern repeats).
STEADY_GROUPS = 4


def _pipeline_cycles(
    threads: int, groups: int, chunks: int, per_tile: dict[str, float], start: float
) -> float:
    """The three modules stepping through the program in order, ``threads`` tiles a group
    (``conv2d._emit``): a thread's next chunk load waits for its last GEMM (one INP/WGT slot per
    thread), its ACC reset for its last store (one ACC slot), each GEMM for its load, each store
    for its epilogue. ``per_tile``: cycles of ``start`` (reset, bias/residual passes), ``chunk``
    (one GEMM), ``epilogue`` on the compute module, ``load`` (one chunk's loads), ``store``.
    Simulates ``STEADY_GROUPS`` groups and extrapolates the last one's period."""
    comp, load, store = start, 0.0, 0.0
    gemm_end, store_end = [0.0] * threads, [0.0] * threads
    ends = []
    for _ in range(min(groups, STEADY_GROUPS)):
        for t in range(threads):
            comp = max(comp, store_end[t]) + per_tile["start"]
        for _ in range(chunks):
            for t in range(threads):
                load = max(load, gemm_end[t]) + per_tile["load"]
                comp = max(comp, load) + per_tile["chunk"]
                gemm_end[t] = comp
        for t in range(threads):
            comp += per_tile["epilogue"]
            store = max(store, comp) + per_tile["store"]
            store_end[t] = store
        ends.append(max(comp, store))
    period = ends[-1] - ends[-2] if len(ends) > 1 else ends[-1]
    return ends[-1] + (groups - len(ends)) * period


def _overlapped_pipeline_cycles(
    threads: int,
    groups: int,
    chunks: int,
    per_tile: dict[str, float],
    start: float,
    buffers: int,
    alu_resets: frozenset[int],
) -> float:
    """``_pipeline_cycles`` for ``conv2d_overlap.emit_overlapped``: the GEMM and ALU pipes apart,
    each epilogue on the ALU pipe once the next chunk of another thread has started, a tile start
    waiting for the store of its ACC slot (``buffers`` slots per thread, used in turn: with
    two, a group's tile starts first, ALU resets (``alu_resets``) first; with one, each just
    before the thread's first chunk)."""
    gemm = alu = start
    load = store = 0.0
    gemm_end, reset_end = [0.0] * threads, [0.0] * threads
    store_end: dict[int, float] = {}
    pending: list[tuple[int, int, float]] = []  # (thread, slot, its last chunk's end)
    ends = []

    def epilogue(begin: float) -> None:
        nonlocal alu, store
        _, slot, ready = pending.pop(0)
        alu = max(alu, ready, begin) + per_tile["epilogue"]
        store = max(store, alu) + per_tile["store"]
        store_end[slot] = store

    def tile_start(t: int, slot: int) -> None:
        nonlocal alu, gemm
        while any(p[1] == slot for p in pending):
            epilogue(gemm)
        if t in alu_resets:
            alu = reset_end[t] = max(alu, store_end.get(slot, 0.0)) + per_tile["start"]
        else:
            gemm = reset_end[t] = max(gemm, store_end.get(slot, 0.0)) + per_tile["start"]

    for n in range(min(groups, STEADY_GROUPS)):
        slots = [t + threads * (n % buffers) for t in range(threads)]
        if buffers > 1:
            for t in sorted(range(threads), key=lambda t: t not in alu_resets):
                tile_start(t, slots[t])
        for k in range(chunks):
            for t in range(threads):
                if k == 0 and buffers == 1:
                    tile_start(t, slots[t])
                load = max(load, gemm_end[t]) + per_tile["load"]
                begin = max(gemm, load, reset_end[t])
                gemm = gemm_end[t] = begin + per_tile["chunk"]
                while pending and pending[0][0] != t:
                    epilogue(begin)
                if k == chunks - 1:
                    pending.append((t, slots[t], gemm))
        ends.append(max(gemm, alu, store))
    period = ends[-1] - ends[-2] if len(ends) > 1 else ends[-1]
    tail = len(pending) * (per_tile["epilogue"] + per_tile["store"])
    return ends[-1] + (groups - len(ends)) * period + tail


def conv_cost(
    wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig, timing: Timing | None = None
) -> ConvCost:
    """The cost of ``lower_conv2d(wl, ep, c, hw, ...)`` (``FitError`` if ``c`` does not fit)."""
    t = timing or Timing()
    g = check_fit(wl, ep, c, hw)
    co_tiles = wl.co_blocks // c.tile_co
    sp_tiles = wl.batch * (wl.out_h // c.tile_h) * (wl.out_w // c.tile_w)
    tiles, chunks = co_tiles * sp_tiles, wl.red_blocks // c.tile_ci
    tile = tile_compute_insns(wl, ep, c, g)
    dims = gemm_dims(wl, c, g)
    kernel_uops = math.prod(e for d, (e, *_) in dims.items() if d not in c.gemm_loops)
    dma = _dma(
        wl, ep, c, g, hw, t, co_tiles, sp_tiles, chunks, 2 if overlapped(wl, ep, c, hw) else 1
    )
    buffers = overlapped(wl, ep, c, hw)
    kernels = min(c.vthreads * max(buffers, 1), tiles)  # one chunk kernel per ACC slot
    ring = kernels * kernel_uops >= hw.uop_depth
    uop_cycles = kernel_uops * t.uop_cycles_per_elem  # one kernel's load
    uops = tiles * chunks * uop_cycles if ring else kernels * uop_cycles
    per_tile = {
        "start": tile.start_cycles(t),
        "chunk": tile.chunk_cycles(t) + (uop_cycles if ring else 0),
        "epilogue": tile.epilogue_cycles(t) + (dma.compute - dma.compute_const) / tiles,
        "load": dma.load / (tiles * chunks),
        "store": dma.store / tiles,
    }
    # the first chunks' GEMMs in parts: one more GEMM setup for each more weight load
    split_gemms = dma.wgt_loads - _weight_loads(c, co_tiles, sp_tiles, chunks)
    compute = (
        tiles * tile.cycles(t) + split_gemms * t.gemm_setup_cycles + dma.compute + uops
    ) + t.finish_cycles
    insns = tiles * tile.n_insns + split_gemms + dma.transfers + 1
    insn_beats = t.row_beats(1, hw.insn_bytes, hw.bus_width_bytes)
    port = max(dma.read_port + insns * insn_beats, dma.store_port)  # AXI read, write channels
    # hw.fetch: the instructions' beats, one dispatched a cycle at most, behind the first's latency
    fetch = insns * max(insn_beats, t.fetch_dispatch_cycles) + t.fetch_insn_cycles
    threads = min(c.vthreads, tiles)
    start = (0 if ring else uops) + dma.compute_const
    groups = -(-tiles // threads)
    if buffers:
        resets = frozenset(v for v in range(threads) if alu_reset(wl, ep, c, hw, v))
        steps = _overlapped_pipeline_cycles(
            threads, groups, chunks, per_tile, start, buffers, resets
        )
    else:
        steps = _pipeline_cycles(threads, groups, chunks, per_tile, start)
    return ConvCost(
        compute_cycles=compute,
        load_cycles=dma.load,
        store_cycles=dma.store,
        port_cycles=port,
        fetch_cycles=fetch,
        dma_latency_cycles=dma.latency,
        gemm_cycles=wl.gemm_uops,
        alu_cycles=tiles * tile.alu_cycles(t),
        inp_bytes=dma.inp_bytes,
        wgt_bytes=dma.wgt_bytes,
        out_bytes=tiles * c.tile_co * g.pixels * hw.out_elem_bytes,
        inp_loads=dma.inp_loads,
        wgt_loads=dma.wgt_loads,
        stores=dma.stores,
        tiles=tiles,
        chunks=chunks,
        kernel_uops=kernel_uops,
        vthreads=c.vthreads,
        total_cycles=max(steps + t.finish_cycles, port, fetch),
    )


@dataclass(frozen=True)
class _Dma:
    load: float  # load module
    store: float  # store module
    store_port: float  # the stores' beats on the AXI write channel (inside ``store``)
    compute: float  # ACC loads on the compute module: ALU-path residuals, constants
    compute_const: float  # the constants' share of ``compute`` (once, at the start)
    read_port: float  # the loads' beats on the AXI read channel (instructions aside)
    latency: float  # setup + latency of the load and store module's transfers
    transfers: int
    inp_bytes: int
    wgt_bytes: int
    inp_loads: int
    wgt_loads: int
    stores: int


def _dma(
    wl, ep, c, g, hw, t: Timing, co_tiles: int, sp_tiles: int, chunks: int, bias_copies: int
) -> _Dma:
    """The layer's transfers as ``conv2d`` emits them and the cycle model costs them
    (``Timing.write_cycles``: each DRAM row at the bus's or the DMA's request rate, the zero
    padding one element a cycle, that before the first beat hidden by the setup and latency):
    per tile and chunk ``tile_ci`` input loads (clipped at the image edge, the rest
    zero-filled; once per group with ``shared_inputs``), the chunk's weights when they change
    (the first group's first chunks' in ``first_chunk_parts`` loads), ``tile_co`` residual
    loads (or none), one store per channel block (one when the tile is the whole image, except
    for the last tile of an overlapped epilogue without a residual). ``bias_copies``: 2 with the
    epilogue overlapped (one per ACC bank), else 1."""
    bus = hw.bus_width_bytes
    tiles = co_tiles * sp_tiles
    load_fixed = t.dma_sequence_cycles + t.load_setup_cycles + t.dram_latency_cycles
    compute_fixed = t.compute_load_sequence_cycles + t.load_setup_cycles + t.dram_latency_cycles
    slack = t.load_setup_cycles + t.dram_latency_cycles  # the writer's, before the first beat

    def beats(x, elem_bytes):  # (numpy arrays too)
        return t.row_beats(x, elem_bytes, bus)

    def rows_cycles(rows, x, elem_bytes, pads=(0, 0, 0, 0)):  # first beat to last write
        return t.write_cycles(rows, x, beats(x, elem_bytes), pads, slack)

    def clipped(n_out, tile, window, size, pad):  # (before, extent, after) each tile loads
        start = np.arange(0, n_out, tile) * wl.stride - pad
        before = np.maximum(0, -start)
        after = np.maximum(0, start + window - size)
        return before, window - before - after, after

    y0, ys, y1 = (a[:, None] for a in clipped(wl.out_h, c.tile_h, g.in_h, wl.height, wl.pad))
    if g.row_step > 1:  # every row_step-th row (no padding): never clipped
        y0, ys, y1 = 0 * ys, np.full_like(ys, g.in_h), 0 * ys
    x0, xs, x1 = (a[None, :] for a in clipped(wl.out_w, c.tile_w, g.in_w, wl.width, wl.pad_l))
    # input transfers per spatial tile: once per group of threads with shared inputs
    shared = shared_inputs(wl, ep, c, hw)
    per_sp = (co_tiles // c.vthreads if shared else co_tiles) * chunks * c.tile_ci
    inp_elem = hw.inp_elem_bytes
    inp = wl.batch * per_sp * float(rows_cycles(ys, xs, inp_elem, (y0, y1, x0, x1)).sum())
    inp_port = wl.batch * per_sp * float((ys * beats(xs, inp_elem)).sum())
    n_wgt = _weight_loads(c, co_tiles, sp_tiles, chunks)
    wgt_x = c.tile_ci * wl.kernel_h * wl.kernel_w

    def wgt_load(co_blocks):  # (cycles, port beats) of one weight load
        return rows_cycles(co_blocks, wgt_x, hw.wgt_elem_bytes), co_blocks * beats(
            wgt_x, hw.wgt_elem_bytes
        )

    wgt, wgt_port = wgt_load(c.tile_co)
    # the first group's first chunks: their weights in ``first_chunk_parts`` loads each
    parts = first_chunk_parts(c) if bias_copies > 1 else 1
    split = 1 if co_tiles == 1 and chunks == 1 else min(c.vthreads, co_tiles * sp_tiles)
    part, part_port = wgt_load(c.tile_co // parts)
    split_cycles = split * (parts * part - wgt)
    split_port = split * (parts * part_port - wgt_port)
    n_wgt_split = split * (parts - 1)
    out_elem = hw.out_elem_bytes
    # per output channel block: tile_h rows of tile_w pixels (one row if whole rows)
    block = (1, g.pixels) if c.tile_w == wl.out_w else (c.tile_h, c.tile_w)
    per_block = rows_cycles(*block, out_elem)
    per_block_port = block[0] * beats(block[1], out_elem)
    if c.tile_h == wl.out_h and c.tile_w == wl.out_w:
        whole = c.tile_co * g.pixels
        n_out, out, out_port = 1, rows_cycles(1, whole, out_elem), beats(whole, out_elem)
    else:
        n_out, out, out_port = c.tile_co, per_block, per_block_port
    n_res = tiles * c.tile_co if ep.residual else 0
    res, res_port = n_res * per_block, n_res * per_block_port
    via_gemm = ep.residual_via_gemm
    # the program's constants (``conv2d_tile.load_constants``): rows at the top of INP and WGT on
    # the load module, the ALU-path biases into ACC on the compute module
    fixed = reserved_rows(wl, ep)
    const = {}
    for m, n in (
        (MemType.INP, fixed["inp"]),
        (MemType.WGT, fixed["wgt"]),
        (MemType.ACC, fixed["acc"]),
    ):
        elem = hw.elem_bytes_of(m.dram_elem)
        const[m] = (rows_cycles(1, n, elem) if n else 0, beats(n, elem), 1 if n else 0)
    n_const_loads = const[MemType.INP][2] + const[MemType.WGT][2]
    const_load = const[MemType.INP][0] + const[MemType.WGT][0]
    const_port = const[MemType.INP][1] + const[MemType.WGT][1]
    acc_cycles, acc_port, n_acc = const[MemType.ACC]  # once per ACC bank, overlapped
    acc_cycles, acc_port, n_acc = (x * bias_copies for x in (acc_cycles, acc_port, n_acc))
    n_wgt_loads = n_wgt + n_wgt_split
    n_loads = per_sp * sp_tiles + n_wgt_loads + n_const_loads + (n_res if via_gemm else 0)
    load_lat = n_loads * load_fixed
    stores, store_rows, store_port = tiles * n_out, tiles * n_out * out, tiles * n_out * out_port
    if bias_copies > 1 and not ep.residual:  # overlapped: the last tile's blocks stored apart
        stores += c.tile_co - n_out  # (conv2d_overlap._epilogue_by_block)
        store_rows += c.tile_co * per_block - n_out * out
        store_port += c.tile_co * per_block_port - n_out * out_port
    store_fixed = t.dma_sequence_cycles + t.store_setup_cycles + t.dram_latency_cycles
    store_lat = stores * store_fixed
    load_rows = inp + n_wgt * wgt + split_cycles + const_load + (res if via_gemm else 0)
    load_port = (
        inp_port + n_wgt * wgt_port + split_port + const_port + (res_port if via_gemm else 0)
    )
    compute_port = acc_port + (0 if via_gemm else res_port)
    compute_const = acc_cycles + n_acc * compute_fixed
    compute = (0 if via_gemm else res + n_res * compute_fixed) + compute_const
    inp_elems = per_sp * float((ys * xs).sum())
    return _Dma(
        load=load_rows + load_lat,
        store=store_rows + store_lat,
        store_port=store_port,
        compute=compute,
        compute_const=compute_const,
        read_port=load_port + compute_port,
        latency=load_lat + store_lat,
        transfers=per_sp * sp_tiles + n_wgt_loads + n_res + stores + n_const_loads + n_acc,
        inp_bytes=int(inp_elems) * inp_elem,
        wgt_bytes=n_wgt * c.tile_co * wgt_x * hw.wgt_elem_bytes,
        inp_loads=per_sp * sp_tiles,
        wgt_loads=n_wgt_loads,
        stores=stores,
    )


def _weight_loads(c: ConvConfig, co_tiles: int, sp_tiles: int, chunks: int) -> int:
    """Weight loads of ``conv2d._emit``: a thread reloads only when its (channel tile, chunk)
    changes. Threads own channel tiles when those divide among them; else thread ``k`` takes
    tiles ``k, k + v, ...`` of the channel-major tile order (``conv2d_tile.tile_groups``)."""
    tiles = co_tiles * sp_tiles
    if chunks > 1:
        return tiles * chunks
    if (
        co_tiles == 1
    ):  # every weight in one tile: loaded once, shared (conv2d_tile.SlotLayout.shared_wgt)
        return 1
    v = c.vthreads
    if co_tiles % v == 0:
        return co_tiles
    co = np.arange(tiles) // sp_tiles
    return min(v, tiles) + int((co[v:] != co[:-v]).sum())
