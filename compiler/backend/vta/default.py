"""A default config per shape: the fitting point of the space with the lowest analytic estimate.

The estimate follows the cycle model's structure (GEMM one micro-op per cycle, ALU two per
row-op, DMA at the bus width with a latency per instruction; with two or more virtual threads
loads and stores overlap compute) without running it; the tuner measures for real.
"""

from __future__ import annotations

from compiler.backend.vta.config import ConvConfig, FitError, all_configs, check_fit
from compiler.backend.vta.workload import ConvWorkload, Epilogue
from isa import HwConfig

DMA_LATENCY_CYCLES = 34
INSN_OVERHEAD_CYCLES = 8
ALU_CYCLES_PER_ROW = 2


def estimate_cycles(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> float:
    g = check_fit(wl, ep, c, hw)
    kk = wl.kernel_h * wl.kernel_w
    co_tiles = wl.co_blocks // c.tile_co
    sp_tiles = (wl.out_h // c.tile_h) * (wl.out_w // c.tile_w)
    tiles = co_tiles * sp_tiles
    chunks = wl.ci_blocks // c.tile_ci
    bus = hw.bus_width_bytes
    rows = c.tile_co * g.pixels
    gemm = wl.co_blocks * wl.ci_blocks * kk * wl.out_h * wl.out_w
    n_alu = 2 + (1 if ep.bias else 0) + (1 if ep.shift else 0) + (2 if ep.residual else 0)
    compute = gemm + tiles * (
        rows * (1 + n_alu * ALU_CYCLES_PER_ROW) + (chunks + n_alu + 1) * INSN_OVERHEAD_CYCLES
    )
    inp_bytes = tiles * chunks * g.inp_rows * hw.inp_elem_bytes
    wgt_loads = tiles * chunks if chunks > 1 else co_tiles * min(c.vthreads, sp_tiles)
    wgt_bytes = wgt_loads * g.wgt_rows * hw.wgt_elem_bytes
    load = (inp_bytes + wgt_bytes) / bus + (
        tiles * chunks * c.tile_ci + wgt_loads
    ) * DMA_LATENCY_CYCLES
    if ep.residual:
        compute += tiles * (rows * hw.out_elem_bytes / bus + c.tile_co * DMA_LATENCY_CYCLES)
    n_stores = 1 if (c.tile_h == wl.out_h and c.tile_w == wl.out_w) else c.tile_co
    store = tiles * (rows * hw.out_elem_bytes / bus + n_stores * DMA_LATENCY_CYCLES)
    if c.vthreads == 1:
        return compute + load + store
    return max(compute, load, store) + (compute + load + store) / max(tiles, 1)


def ranked_configs(wl: ConvWorkload, ep: Epilogue, hw: HwConfig) -> list[tuple[float, ConvConfig]]:
    """Every fitting config with its estimate, best first."""
    scored = []
    for c in all_configs(wl):
        try:
            scored.append((estimate_cycles(wl, ep, c, hw), c))
        except FitError:
            continue
    scored.sort(key=lambda t: (t[0], -t[1].tile_h * t[1].tile_w * t[1].tile_co))
    return scored


def default_config(wl: ConvWorkload, ep: Epilogue, hw: HwConfig) -> ConvConfig:
    """The best-estimated config that also lowers (no micro-op overflow or hazard)."""
    from compiler.backend.vta.conv2d import DramMap, lower_conv2d

    ranked = ranked_configs(wl, ep, hw)
    for _, c in ranked[:64]:
        try:
            lower_conv2d(wl, ep, c, hw, DramMap(0, 0, 0, 0, 0, 0))
            return c
        except FitError:
            continue
    raise FitError(
        f"no config of the conv2d template fits {wl} on {hw.tag}"
        f" ({len(ranked)} fit the buffers, none of the best 64 lowers)"
    )
