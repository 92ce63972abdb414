"""ResNet-18 through the RTL: the zoo's network (``pyvta zoo resnet18``) compiled for VTA and run on
``AcceleratorBackend(driver.open("rtl"))`` next to ``SimDevice``: outputs bit for bit, and per
accelerator layer the RTL's cycles (CYCLES register) next to the cycle model's.

    .venv/bin/python benchmarks/rtl_network.py [--size 224] [--search 12] [--seed 0]

Both devices use the same layer configs: the simulator's cycle model runs with the RTL memory
model's latency (``sim.Timing.rtl_testbench()``), which is also what the RTL device's
``estimate_cycles`` answers, so ``--search`` picks the same candidates on both. Targets (issue 16):
outputs identical; whole network within 3% of the cycle model; RTL wall time under 2 minutes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from pyvta import driver, sim
from pyvta.compiler.backend.vta.graph_backend import AcceleratorBackend
from pyvta.compiler.graph.compiled_model import compile_model, run_model
from pyvta.compiler.graph.zoo import save_model

TARGET_WALL_S = 120.0
TARGET_ERROR = 0.03


def _run(cm, x, device, search: int):
    backend = AcceleratorBackend(device, search=search)
    t0, c0 = time.perf_counter(), time.process_time()
    outputs, _ = run_model(cm, x, backend)
    return outputs, backend, (time.perf_counter() - t0, time.process_time() - c0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--search", type=int, default=12, help="configs per layer on the cycle model")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"seed {args.seed}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18.onnx")
        save_model("resnet18", path, size=args.size)
        cm = compile_model(path, "vta")
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)

    timing = sim.Timing.rtl_testbench()
    ref, sim_backend, sim_wall = _run(cm, x, driver.SimDevice(timing=timing), args.search)
    t0 = time.perf_counter()
    rtl_dev = driver.open("rtl")
    print(f"RTL device open: {time.perf_counter() - t0:.1f} s (library cached)")
    out, rtl_backend, rtl_wall = _run(cm, x, rtl_dev, args.search)

    same = len(out) == len(ref) and all(np.array_equal(a, b) for a, b in zip(out, ref, strict=True))
    print(f"\n{'#':>2} {'workload':36s} {'rtl':>10s} {'model':>10s} {'error':>7s}")
    for i, (r, m) in enumerate(zip(rtl_backend.runs, sim_backend.runs, strict=True)):
        assert r.workload == m.workload and r.config == m.config, "layers differ between devices"
        print(
            f"{i:2d} {str(r.workload):36s} {r.cycles:10d} {m.cycles:10d}"
            f" {100 * (m.cycles - r.cycles) / r.cycles:+6.1f}%"
        )
    rtl_total = rtl_backend.total_cycles
    model_total = sim_backend.total_cycles
    error = (model_total - rtl_total) / rtl_total
    rtl_sim_s = sum(r.sim_wall_s for r in rtl_backend.runs)
    (rtl_wall, rtl_cpu), (sim_wall, _) = rtl_wall, sim_wall
    print(
        f"\ntotal ({len(rtl_backend.runs)} accelerator launches): RTL {rtl_total:,} cycles,"
        f" cycle model {model_total:,} ({100 * error:+.2f}%; target within"
        f" {100 * TARGET_ERROR:.0f}%: {'met' if abs(error) <= TARGET_ERROR else 'NOT met'})"
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
