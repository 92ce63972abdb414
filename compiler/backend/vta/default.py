"""A default config per shape: the fitting point of the space with the lowest analytic estimate.

The estimate follows the cycle model's structure (GEMM one micro-op per cycle, ALU two per
row-op, DMA at the bus width with a latency per instruction; with two or more virtual threads
loads and stores overlap compute) without running it; the tuner measures for real.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyvta.compiler.backend.vta.config import ConvConfig, FitError, all_configs, check_fit
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import HwConfig, Insn

DMA_LATENCY_CYCLES = 34
INSN_OVERHEAD_CYCLES = 8
ALU_CYCLES_PER_ROW = 2  # an ALU op with a register operand (bias, residual add)
ALU_IMM_CYCLES_PER_ROW = 1


@dataclass(frozen=True)
class Estimate:
    """The analytic estimate's pieces for one config (cycles, bytes and transfer counts, whole
    layer). ``total_cycles``: compute, load and store in sequence with one virtual thread; with
    two or more, the largest of the three plus one tile's share of the DMA (fill and drain)."""

    compute_cycles: float  # GEMM micro-ops, ALU row-ops, per-instruction overhead (+ residual)
    load_cycles: float  # input and weight DMA at the bus width, with a latency per transfer
    store_cycles: float  # output DMA at the bus width, with a latency per transfer
    gemm_cycles: int  # ideal: one GEMM micro-op per cycle, nothing else
    alu_cycles: float  # the epilogue's ALU row-ops (all tiles)
    inp_bytes: int  # input loaded (with halos and reloads)
    wgt_bytes: int  # weights loaded (with reloads)
    out_bytes: int  # output stored
    inp_loads: int  # input DMA transfers (one per channel block per tile and chunk)
    wgt_loads: int  # weight DMA transfers
    stores: int  # output DMA transfers
    tiles: int  # output tiles (channel tiles x spatial tiles)
    chunks: int  # input-channel chunks per tile
    vthreads: int

    @property
    def total_cycles(self) -> float:
        compute, load, store = self.compute_cycles, self.load_cycles, self.store_cycles
        if self.vthreads == 1:
            return compute + load + store
        return max(compute, load, store) + (load + store) / max(self.tiles, 1)


def estimate_cycles(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> float:
    return estimate_parts(wl, ep, c, hw).total_cycles


def estimate_parts(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> Estimate:
    """The pieces of ``estimate_cycles`` (``FitError`` if the config does not fit)."""
    g = check_fit(wl, ep, c, hw)
    co_tiles = wl.co_blocks // c.tile_co
    sp_tiles = (wl.out_h // c.tile_h) * (wl.out_w // c.tile_w)
    tiles = co_tiles * sp_tiles
    chunks = wl.ci_blocks // c.tile_ci
    bus = hw.bus_width_bytes
    rows = c.tile_co * g.pixels
    gemm = wl.gemm_uops
    n_reg = (1 if ep.bias else 0) + (1 if ep.residual else 0)
    n_imm = 2 + (1 if ep.shift else 0) + (1 if ep.residual and ep.residual_shift else 0)
    per_row = 1 + n_reg * ALU_CYCLES_PER_ROW + n_imm * ALU_IMM_CYCLES_PER_ROW
    alu = tiles * rows * (per_row - 1)
    compute = gemm + tiles * (rows * per_row + (chunks + n_reg + n_imm + 1) * INSN_OVERHEAD_CYCLES)
    inp_loads = tiles * chunks * c.tile_ci
    inp_bytes = tiles * chunks * g.inp_rows * hw.inp_elem_bytes
    wgt_loads = tiles * chunks if chunks > 1 else co_tiles * min(c.vthreads, sp_tiles)
    wgt_bytes = wgt_loads * g.wgt_rows * hw.wgt_elem_bytes
    load = (inp_bytes + wgt_bytes) / bus + (inp_loads + wgt_loads) * DMA_LATENCY_CYCLES
    if ep.residual:
        compute += tiles * (rows * hw.out_elem_bytes / bus + c.tile_co * DMA_LATENCY_CYCLES)
    n_stores = 1 if (c.tile_h == wl.out_h and c.tile_w == wl.out_w) else c.tile_co
    store = tiles * (rows * hw.out_elem_bytes / bus + n_stores * DMA_LATENCY_CYCLES)
    return Estimate(
        compute_cycles=compute,
        load_cycles=load,
        store_cycles=store,
        gemm_cycles=gemm,
        alu_cycles=alu,
        inp_bytes=inp_bytes,
        wgt_bytes=wgt_bytes,
        out_bytes=tiles * rows * hw.out_elem_bytes,
        inp_loads=inp_loads,
        wgt_loads=wgt_loads,
        stores=tiles * n_stores,
        tiles=tiles,
        chunks=chunks,
        vthreads=c.vthreads,
    )


def ranked_configs(
    wl: ConvWorkload, ep: Epilogue, hw: HwConfig, vthreads: int | None = None
) -> list[tuple[float, ConvConfig]]:
    """Every fitting config (with ``vthreads`` threads, if given) with its estimate, best first."""
    scored = []
    for c in all_configs(wl):
        if vthreads is not None and c.vthreads != vthreads:
            continue
        try:
            scored.append((estimate_cycles(wl, ep, c, hw), c))
        except FitError:
            continue
    scored.sort(key=lambda t: (t[0], -t[1].tile_h * t[1].tile_w * t[1].tile_co))
    return scored


def default_config(
    wl: ConvWorkload,
    ep: Epilogue,
    hw: HwConfig,
    vthreads: int | None = None,
    measure: Callable[[list[Insn]], float] | None = None,
    candidates: int = 12,
    explore: int = 0,
    seed: int = 0,
) -> ConvConfig:
    """The best config that also lowers (no micro-op overflow or hazard).

    Without ``measure`` the analytic estimate decides. With it (e.g. the cycle model:
    ``lambda insns: sim.cycles_of(insns, hw).total_cycles``), the best ``candidates`` by estimate
    are lowered and measured, plus ``explore`` configs drawn at random (``seed``) from the rest
    of the fitting space, and the fastest wins. (The tuner searches the space properly.)
    """
    from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d

    ranked = ranked_configs(wl, ep, hw, vthreads)
    if measure is not None:
        chosen = candidate_configs(ranked, candidates)
        if explore:
            import numpy as np

            rest = [t for t in ranked if t not in chosen]
            picks = np.random.default_rng(seed).permutation(len(rest))[:explore]
            chosen += [rest[i] for i in sorted(picks)]
        ranked = chosen
        candidates = len(ranked)
    lowered = []
    for _, c in ranked[: max(64, candidates)]:
        try:
            low = lower_conv2d(wl, ep, c, hw, DramMap.disjoint(wl, hw))
        except FitError:
            continue
        if measure is None:
            return c
        lowered.append((measure(low.insns), c))
        if len(lowered) >= candidates:
            break
    if lowered:
        return min(lowered, key=lambda t: t[0])[1]
    raise FitError(
        f"no config of the conv2d template fits {wl} on {hw.tag}"
        f" ({len(ranked)} fit the buffers, none of the best 64 lowers)"
    )


def candidate_configs(ranked: list, n: int = 12) -> list[tuple[float, ConvConfig]]:
    """The configs worth measuring first, from ``ranked_configs``' list: per thread count (more
    threads first), the best estimates alternated with the largest tiles (the estimate
    under-rates their weight reuse), ``max(n // 2, 4)`` of each count."""
    lists = []
    for v in sorted({c.vthreads for _, c in ranked}, reverse=True):
        mine = [t for t in ranked if t[1].vthreads == v]
        big = sorted(
            mine, key=lambda t: (-t[1].tile_h * t[1].tile_w * t[1].tile_co, -t[1].tile_ci, t[0])
        )
        lists.append(_interleave(mine, big)[: max(n // 2, 4)])
    return [t for group in lists for t in group]


def _interleave(a: list, b: list) -> list:
    seen, out = set(), []
    for pair in zip(a, b, strict=False):
        for item in pair:
            if item[1] not in seen:
                seen.add(item[1])
                out.append(item)
    return out
