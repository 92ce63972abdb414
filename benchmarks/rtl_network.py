"""ResNet-18 through the RTL: the zoo's network (``pyvta zoo resnet18``) compiled for VTA (the
shipped pretuned layer configs) and run on the fast RTL device (``driver.open("rtl")``) next to
``SimDevice``: outputs bit for bit, and per accelerator layer the RTL's cycles (CYCLES register)
next to the cycle model's.

    .venv/bin/python benchmarks/rtl_network.py [--size 224] [--seed 0] [--no-overlap]
    .venv/bin/python benchmarks/rtl_network.py --config bitstreams/configs/ultrascale.json

The simulator's cycle model runs with the RTL memory model's latency
(``sim.Timing.rtl_testbench()``). Targets (issues 16, 19): outputs identical; whole network within
3% of the cycle model; RTL wall time under 2 minutes; at most 7.6 M cycles (224x224, default
config; the whole network on the accelerator, issue 32: stem, pools and classifier included). ``--config``: another hardware config (the RTL built for it, the graph packed to its
block, the compiler's analytic default schedules: the shipped log is for the default config).
``--no-overlap``: the layers lowered with VTA v0.0.2's instructions only (``ConvConfig.v002``: no
epilogue overlap, no CLIP), same tile configs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta import driver, sim
from pyvta.compiler.backend.vta.graph_backend import kernel_workload
from pyvta.compiler.graph.compile import compile_model, lower_kernels
from pyvta.compiler.graph.zoo import save_model
from pyvta.isa import DEFAULT_CONFIG, HwConfig
from pyvta.runtime.compiled_model import run_model
from pyvta.tuner.network import pretuned_log

TARGET_WALL_S = 120.0
TARGET_ERROR = 0.03
TARGET_CYCLES = 7.6e6  # (6.9 M for the 19 conv layers alone, issue 19)


def _run(cm, x, device):
    backend = cm.accelerator(device)
    t0, c0 = time.perf_counter(), time.process_time()
    outputs, _ = run_model(cm, x, backends={"vta": backend})
    return outputs, backend, (time.perf_counter() - t0, time.process_time() - c0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--no-overlap",
        action="store_true",
        help="lower with v0.0.2 instructions only (no overlap, no CLIP)",
    )
    ap.add_argument("--config", metavar="FILE", help="hardware config JSON (default: PYNQ)")
    args = ap.parse_args(argv)
    hw = HwConfig.load(args.config) if args.config else DEFAULT_CONFIG
    print(f"seed {args.seed}; hardware config {hw.tag}")
    t0 = time.perf_counter()
    rtl_dev = driver.open("rtl", config=hw)
    print(f"RTL device open (built or cached): {time.perf_counter() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "resnet18.onnx"
        save_model("resnet18", str(path), size=args.size)
        cm = compile_model(path, "vta", lower=False, hw=hw)
    log = pretuned_log(f"resnet18_{args.size}") if hw == DEFAULT_CONFIG else None
    configs = None
    if log:
        from pyvta.commands.network import tuned_configs

        configs = tuned_configs(cm, log)
    if args.no_overlap:
        from pyvta.compiler.backend.vta.config import ConvConfig

        configs = {
            k: c.v002() if isinstance(c, ConvConfig) else c for k, c in (configs or {}).items()
        }
    lower_kernels(cm, hw, configs)
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)

    timing = sim.Timing.rtl_testbench()
    ref, sim_backend, sim_wall = _run(cm, x, driver.SimDevice(cm.hw, timing=timing))
    out, rtl_backend, rtl_wall = _run(cm, x, rtl_dev)

    same = len(out) == len(ref) and all(np.array_equal(a, b) for a, b in zip(out, ref, strict=True))
    print(f"\n{'#':>2} {'workload':36s} {'rtl':>10s} {'model':>10s} {'error':>7s}")
    for i, (r, m) in enumerate(zip(rtl_backend.runs, sim_backend.runs, strict=True)):
        assert r.kernel.info == m.kernel.info, "layers differ between devices"
        print(
            f"{i:2d} {str(kernel_workload(r.kernel)):36s} {r.cycles:10d} {m.cycles:10d}"
            f" {100 * (m.cycles - r.cycles) / r.cycles:+6.1f}%"
        )
    rtl_total = sum(r.cycles for r in rtl_backend.runs)
    model_total = sum(r.cycles for r in sim_backend.runs)
    error = (model_total - rtl_total) / rtl_total
    rtl_sim_s = sum(r.sim_wall_s for r in rtl_backend.runs)
    cycles_target = (
        f" (target at most {TARGET_CYCLES / 1e6:.1f} M: "
        f"{'met' if rtl_total <= TARGET_CYCLES else 'NOT met'})"
        if hw == DEFAULT_CONFIG and args.size == 224
        else ""
    )
    (rtl_wall, rtl_cpu), (sim_wall, _) = rtl_wall, sim_wall
    print(
        f"\ntotal ({len(rtl_backend.runs)} accelerator launches): RTL {rtl_total:,} cycles"
        f"{cycles_target}, cycle model {model_total:,}"
        f" ({100 * error:+.2f}%; target within {100 * TARGET_ERROR:.0f}%:"
        f" {'met' if abs(error) <= TARGET_ERROR else 'NOT met'})"
    )
    print(f"outputs bit-identical to SimDevice: {same}")
    print(
        f"wall: RTL network {rtl_wall:.1f} s ({rtl_cpu:.1f} CPU s; launches {rtl_sim_s:.1f} s wall"
        f" -> {rtl_total / rtl_sim_s:,.0f} cycles/wall-s), SimDevice network {sim_wall:.1f} s;"
        f" target RTL under {TARGET_WALL_S:.0f} s: {'met' if rtl_wall < TARGET_WALL_S else 'NOT met'}"
    )
    rtl_dev.close()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
