"""Accelerator-side cycles of one ResNet-18 inference (the 17 convolutions VTA runs; the first
conv and the final dense stay on the CPU), next to the published figures, and the wall time of
the functional simulation of those layers.

Published (TVM/VTA): original design 27.7 M cycles; with a pipelined GEMM 7.7 M; the ideal at
256 MACs/cycle for the offloaded layers about 6.6 M. Target (issue 7): <= 7.4 M (>= 90%).

    .venv/bin/python benchmarks/resnet18.py [--measure] [--no-functional]
"""

from __future__ import annotations

import argparse

import numpy as np

import sim
from compiler.backend.vta import (
    ConvWorkload,
    Epilogue,
    VtaConv2d,
    default_config,
    pack_bias,
    pack_data,
    pack_weights,
)
from driver import SimDevice
from isa import HwConfig

PUBLISHED = {"original VTA": 27.7e6, "pipelined GEMM": 7.7e6, "ideal (256 MACs/cycle)": 6.6e6}


def resnet18_vta_layers() -> list[tuple[str, ConvWorkload, Epilogue]]:
    """(name, workload, epilogue) of every conv VTA runs in ResNet-18, in network order."""
    layers = []

    def conv(name, h, ci, co, k, s, relu=True, residual=False):
        wl = ConvWorkload(h, h, ci, co, k, k, s, k // 2)
        ep = Epilogue(
            bias=True,
            shift=8,
            lo=0 if relu else -128,
            hi=127,
            residual=residual,
            residual_shift=2 if residual else 0,
            bias_via_gemm=True,
        )
        layers.append((name, wl, ep))

    for stage, (h, c) in enumerate([(56, 64), (28, 128), (14, 256), (7, 512)], start=1):
        for block in range(2):
            first = block == 0 and stage > 1
            cin = c // 2 if first else c
            hin = h * 2 if first else h
            conv(f"layer{stage}.{block}.conv1", hin, cin, c, 3, 2 if first else 1)
            if first:
                conv(f"layer{stage}.{block}.downsample", hin, cin, c, 1, 2, relu=False)
            conv(f"layer{stage}.{block}.conv2", h, c, c, 3, 1, residual=True)
    return layers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--measure",
        action="store_true",
        help="pick each layer's config from candidates measured on the cycle model",
    )
    ap.add_argument("--no-functional", action="store_true", help="skip the functional simulation")
    args = ap.parse_args()
    hw = HwConfig()
    timing = sim.Timing()
    rng = np.random.default_rng(0)
    print("seed 0")
    total_cycles = total_gemm = total_macs = 0
    sim_wall = 0.0
    print(f"{'layer':24s} {'workload':34s} {'config':28s} {'cycles':>9s} {'util':>6s}")
    for name, wl, ep in resnet18_vta_layers():
        measure = (
            (lambda insns: sim.cycles_of(insns, hw, timing).total_cycles) if args.measure else None
        )
        c = default_config(wl, ep, hw, vthreads=2, measure=measure)
        dev = SimDevice(hw, dram_bytes=1 << 26, cycles=True, timing=timing)
        w = rng.integers(
            -128, 128, (wl.out_channels, wl.in_channels, wl.kernel_h, wl.kernel_w), dtype=np.int8
        )
        b = rng.integers(-4096, 4096, wl.out_channels).astype(np.int32)
        op = VtaConv2d(wl, ep, pack_weights(w), pack_bias(b), dev, c)
        x = rng.integers(-128, 128, (1, wl.in_channels, wl.height, wl.width), dtype=np.int8)
        res = None
        if ep.residual:
            res = pack_data(
                rng.integers(-128, 128, (1, wl.out_channels, wl.out_h, wl.out_w), dtype=np.int8)
            )
        if args.no_functional:
            report = sim.cycles_of(op.lowered.insns, hw, timing)
        else:
            run = op(pack_data(x), res)
            report, sim_wall = run.report, sim_wall + run.wall_s
        total_cycles += report.total_cycles
        total_gemm += wl.macs / hw.gemm_macs_per_cycle
        total_macs += wl.macs
        cfg = f"{c.tile_h}x{c.tile_w} ci{c.tile_ci} co{c.tile_co} v{c.vthreads}"
        print(
            f"{name:24s} {str(wl):34s} {cfg:28s} {report.total_cycles:9d}"
            f" {100 * wl.macs / hw.gemm_macs_per_cycle / report.total_cycles:5.1f}%"
        )
    ideal = total_macs / hw.gemm_macs_per_cycle
    print(
        f"\ntotal: {total_cycles / 1e6:.2f} M cycles = {total_cycles / timing.clock_mhz / 1e3:.2f} ms"
        f" at {timing.clock_mhz:g} MHz; GEMM utilisation {100 * total_gemm / total_cycles:.1f}%;"
        f" {total_macs / 1e9:.2f} G MACs"
    )
    print(f"ideal at {hw.gemm_macs_per_cycle} MACs/cycle: {ideal / 1e6:.2f} M cycles")
    for label, cycles in PUBLISHED.items():
        print(f"  vs {label:24s} {cycles / 1e6:5.1f} M cycles: {cycles / total_cycles:5.2f}x")
    print(f"target <= 7.4 M cycles: {'met' if total_cycles <= 7.4e6 else 'NOT met'}")
    if not args.no_functional:
        print(
            f"functional simulation of these layers: {sim_wall:.2f} s wall"
            f" ({total_macs / sim_wall / 1e9:.2f} G simulated MACs/s; anchor: original C++"
            " simulator ~1 s for the whole network)"
        )


if __name__ == "__main__":
    main()
