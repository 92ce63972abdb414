"""Accelerator-side cycles of one ResNet-18 inference: the generated, int8-quantized network
(power-of-two scales) compiled for VTA and run on the simulator; per-layer cycles and GEMM
utilisation next to the published figures, and the wall time of the functional simulation of
the accelerator layers. ``--partition whole`` (default): every layer on the accelerator (the
stem folded, max pool, global pool, classifier; target <= 7.6 M cycles, issue 32); ``legacy``:
the first conv, the pools and the final dense in float on the CPU (the 19 conv layers; target
<= 7.4 M, issue 7). ``--host-runs N``: the host CPU time per inference of both partitions, side
by side (the CPU nodes' wall time, golden accelerator, N interleaved runs, medians).

Published (TVM/VTA): original design 27.7 M cycles; with a pipelined GEMM 7.7 M; the ideal at
256 MACs/cycle for the offloaded layers about 6.6 M. Target (issue 7): <= 7.4 M (>= 90%).

    .venv/bin/python benchmarks/resnet18.py [--search 12] [--size 224]
    .venv/bin/python benchmarks/resnet18.py --tune 400 --tuning-log r18.jsonl   # tune, then run
    .venv/bin/python benchmarks/resnet18.py --tuning-log tuner/pretuned/resnet18_224_vta-sim.jsonl
    .venv/bin/python benchmarks/resnet18.py --config bitstreams/configs/small.json --check
    .venv/bin/python benchmarks/resnet18.py --tuning-log tuner/pretuned/resnet18_224_vta-sim.jsonl --breakdown

``--tune N`` first tunes every accelerator layer for N trials on the cycle model (XGBoost rank
model + simulated annealing, ``tuner.network``; appended to ``--tuning-log``, resumable); with
``--tuning-log`` each layer then runs with the best config in that log (the shipped
``tuner/pretuned`` log is the best of such a run, ``tuner.log.write_best``). ``--config`` compiles
for another hardware config (the graph packed to its block); ``--check`` also runs the compiled
model with the numpy golden model of the accelerator and compares the outputs bit for bit.
``--breakdown`` also runs the network lowered with VTA v0.0.2's instructions only
(``ConvConfig.v002``: no epilogue overlap, no CLIP; same tile configs) and prints both side by side, per layer and in total; then,
per distinct accelerator layer (the overlapped lowering), where its cycles go on the compute module
(from the cycle model's traced report of its lowering): the GEMM ideal (the conv's MACs), the
rest of the GEMM instructions (setup, pipeline fill, bias/residual passes), the ACC resets, the
epilogue's ALU passes, the compute module's own loads (micro-ops, ACC), and its idle time
(neither pipe busy: waiting for loads and stores); and the load/store modules' busy time. With
the two pipes overlapped the compute shares add up to more than 100% less the idle time.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from pyvta.compiler.backend.vta.graph_backend import accelerator_for, kernel_workload
from pyvta.compiler.backend.vta.operator import kernel_epilogue
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver import SimDevice
from pyvta.isa import DEFAULT_CONFIG, HwConfig
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.ir import HOST

# Published figures for the default (1x16) config.
PUBLISHED = {"original VTA": 27.7e6, "pipelined GEMM": 7.7e6, "ideal (256 MACs/cycle)": 6.6e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--search",
        type=int,
        default=12,
        help="configs per layer measured on the cycle model (0: analytic default)",
    )
    ap.add_argument(
        "--explore",
        type=int,
        default=0,
        help="extra random configs per layer measured on the cycle model",
    )
    ap.add_argument("--tune", type=int, default=0, help="tune each layer for N trials first")
    ap.add_argument("--tuning-log", default=None, help="JSON-lines log of per-layer tuning")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", metavar="FILE", help="hardware config JSON (default: PYNQ)")
    ap.add_argument("--check", action="store_true", help="compare with the golden model")
    ap.add_argument("--breakdown", action="store_true", help="per-layer table of where cycles go")
    ap.add_argument("--partition", default="whole", choices=("whole", "legacy"))
    ap.add_argument("--host-runs", type=int, default=0, help="host CPU time: N runs per partition")
    args = ap.parse_args()
    hw = HwConfig.load(args.config) if args.config else DEFAULT_CONFIG
    macs_per_cycle = hw.gemm_macs_per_cycle
    print(f"seed {args.seed}; hardware config {hw.tag}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18.onnx")
        save_model("resnet18", path, size=args.size)
        t0 = time.perf_counter()
        cm = compile_model(path, "vta", lower=False, hw=hw, vta_partition=args.partition)
        print(
            f"ResNet-18 {args.size}x{args.size} compiled for VTA ({args.partition} partition) in"
            f" {time.perf_counter() - t0:.1f} s"
        )
        if args.host_runs:
            print(host_time_table(path, hw, args.host_runs, args.seed))
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
    configs = None
    if args.tune or args.tuning_log:
        from pyvta.tuner.network import network_configs, network_layers, tune_network

        layers = network_layers(cm)
        log = args.tuning_log or os.path.join(tempfile.mkdtemp(), "resnet18.jsonl")
        if args.tune:
            summary = tune_network(layers, args.tune, log=log, seed=args.seed, resume=True)
            print(summary.table())
        configs = network_configs(log, layers)
        print(f"tuned configs for {len(configs)} of {len(layers)} distinct layers from {log}")
    t0 = time.perf_counter()
    vta = accelerator_for(
        cm.graph, SimDevice(config=hw), configs, search=args.search, explore=args.explore
    )
    how = "tuned configs" if configs else f"search {args.search}, explore {args.explore}"
    print(f"accelerator kernels lowered ({how}) and loaded in {time.perf_counter() - t0:.1f} s")
    (out,), _table = run_model(cm, x, backends={"vta": vta})  # the measured run
    print(f"\n{'#':>2} {'workload':36s} {'config':26s} {'cycles':>9s} {'util':>6s}")
    total = macs = 0
    for i, r in enumerate(vta.runs):
        c = r.config
        cfg = (
            f"{c['tile_h']}x{c['tile_w']} ci{c['tile_ci']} co{c['tile_co']} v{c['vthreads']}"
            if c
            else "(+ max pool, fused)"
            if str(kernel_workload(r.kernel)).startswith("conv")
            else "(ALU)"
        )
        total += r.cycles
        macs += kernel_workload(r.kernel).macs
        print(
            f"{i:2d} {str(kernel_workload(r.kernel)):36s} {cfg:26s} {r.cycles:9d}"
            f" {100 * kernel_workload(r.kernel).macs / macs_per_cycle / r.cycles:5.1f}%"
        )
    sim_s = sum(r.sim_wall_s for r in vta.runs)
    ideal = macs / macs_per_cycle
    print(
        f"\ntotal: {total / 1e6:.2f} M cycles = {total / 100e3:.2f} ms at 100 MHz;"
        f" GEMM utilisation {100 * ideal / total:.1f}%; {macs / 1e9:.2f} G MACs"
        f" ({len(vta.runs)} accelerator layers)"
    )
    print(f"ideal at {macs_per_cycle} MACs/cycle: {ideal / 1e6:.2f} M cycles")
    if hw.tag == DEFAULT_CONFIG.tag:
        for label, cycles in PUBLISHED.items():
            print(f"  vs {label:24s} {cycles / 1e6:5.1f} M cycles: {cycles / total:5.2f}x")
        goal = 7.6e6 if args.partition == "whole" else 7.4e6
        print(
            f"target <= {goal / 1e6:.1f} M cycles ({args.partition} partition):"
            f" {'met' if total <= goal else 'NOT met'}"
        )
    host = [r for r in _table.rows if r.target == HOST]
    print(
        f"host CPU nodes: {len(host)} ({', '.join(sorted({r.op for r in host}))}),"
        f" {sum(r.ms for r in host):.2f} ms wall in this run"
    )
    print(
        f"functional simulation of the accelerator layers: {sim_s:.2f} s wall"
        f" ({macs / sim_s / 1e9:.2f} G simulated MACs/s; anchor: the original C++ simulator,"
        " ~1 s per inference)"
    )

    if args.breakdown and args.partition == "whole":
        print("(--breakdown: the tables below cover the conv/dense layers)")
    if args.breakdown:
        print("\n" + overlap_comparison(cm, x, vta, hw))
        print("\n" + breakdown_table(vta.runs, hw))

    if args.check:
        (golden,), _ = run_model(cm, x)  # the accelerator layers on the numpy golden model
        same = np.array_equal(out, golden)
        print(f"output vs the golden model: {'EQUAL bit for bit' if same else 'DIFFERS'}")


def host_time_table(path: str, hw: HwConfig, runs: int, seed: int) -> str:
    """Host CPU ms per inference (the wall time of the CPU nodes; the accelerator nodes on the
    golden model, not counted) for both partitions, ``runs`` interleaved runs each, medians."""
    models = {p: compile_model(path, "vta", lower=False, hw=hw, vta_partition=p)
              for p in ("legacy", "whole")}  # fmt: skip
    shape = models["whole"].graph.values[models["whole"].input_names[0]].shape
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    ms: dict[str, list[float]] = {p: [] for p in models}
    ops: dict[str, dict[str, list[float]]] = {p: {} for p in models}
    for _ in range(runs):
        for p, cm in models.items():
            _, table = run_model(cm, x)
            cpu = [r for r in table.rows if r.target == HOST]
            ms[p].append(sum(r.ms for r in cpu))
            for r in cpu:
                ops[p].setdefault(r.op, []).append(r.ms)
    lines = [f"host CPU time per inference (this host, {runs} interleaved runs, medians):"]
    for p in models:
        per_op = ", ".join(
            f"{op} {np.median(v) * len(v) / runs:.2f}"
            for op, v in sorted(ops[p].items(), key=lambda kv: -sum(kv[1]))
        )
        lines.append(f"  {p:6s} {np.median(ms[p]):8.2f} ms  ({per_op})")
    lines.append(f"  legacy / whole: {np.median(ms['legacy']) / np.median(ms['whole']):.1f}x")
    return "\n".join(lines)


def overlap_comparison(cm, x, vta, hw: HwConfig) -> str:
    """The network run again with the same tile configs, v0.0.2 instructions only: per layer and
    in total, cycles and GEMM utilisation before (off) and after (``vta``'s run)."""
    from pyvta.compiler.backend.vta.config import ConvConfig

    off = {}
    for r in vta.runs:
        if not r.config:  # (a pool: no tile config)
            continue
        c = ConvConfig.from_dict(r.config).v002()
        off[(kernel_workload(r.kernel), kernel_epilogue(r.kernel))] = off[
            kernel_workload(r.kernel)
        ] = c
    before = accelerator_for(cm.graph, SimDevice(config=hw), off)
    run_model(cm, x, backends={"vta": before})
    mpc = hw.gemm_macs_per_cycle
    head = f"{'#':>2} {'workload':36s} {'k':>3s} {'off':>9s} {'util':>6s} {'on':>9s} {'util':>6s}"
    lines = [
        "v0.0.2 lowering (off: no overlap, no CLIP) vs the extensions (on), same tile configs:",
        head,
    ]
    tot = {"off": 0, "on": 0}
    macs = 0
    for i, (a, b) in enumerate(zip(before.runs, vta.runs, strict=True)):
        if not b.config:
            continue
        tot["off"] += a.cycles
        tot["on"] += b.cycles
        macs += kernel_workload(b.kernel).macs
        k = f"{kernel_workload(b.kernel).kernel_h}x{kernel_workload(b.kernel).kernel_w}"
        lines.append(
            f"{i:2d} {str(kernel_workload(b.kernel)):36s} {k:>3s} {a.cycles:9d}"
            f" {100 * kernel_workload(a.kernel).macs / mpc / a.cycles:5.1f}% {b.cycles:9d}"
            f" {100 * kernel_workload(b.kernel).macs / mpc / b.cycles:5.1f}%"
        )
    ideal = macs / mpc
    lines.append(
        f"total: off {tot['off'] / 1e6:.3f} M cycles ({100 * ideal / tot['off']:.1f}%), on"
        f" {tot['on'] / 1e6:.3f} M cycles ({100 * ideal / tot['on']:.1f}%): "
        f"{tot['off'] / tot['on']:.3f}x; target <= 6.9 M:"
        f" {'met' if tot['on'] <= 6.9e6 else 'NOT met'}"
    )
    return "\n".join(lines)


def _busy_union(events) -> int:
    """Cycles in which at least one of ``events`` (start, duration) runs."""
    total, end = 0, -1
    for e in sorted(events, key=lambda e: e.start_cycle):
        lo, hi = max(e.start_cycle, end), e.start_cycle + e.dur_cycles
        if hi > lo:
            total += hi - lo
        end = max(end, hi)
    return total


def breakdown_table(runs, hw: HwConfig) -> str:
    """The ``--breakdown`` table: one row per distinct (workload, epilogue, config) of ``runs``
    (``runtime.accelerator.AcceleratorBackend.runs``), its lowering traced on the cycle model; shares of its cycles."""
    from pyvta import sim
    from pyvta.compiler.backend.vta.config import ConvConfig
    from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d

    distinct: dict[tuple, list] = {}
    for r in runs:
        if not r.config:  # (a pool)
            continue
        key = (
            kernel_workload(r.kernel),
            kernel_epilogue(r.kernel),
            json.dumps(r.config, sort_keys=True),
        )
        distinct.setdefault(key, [0, r])[0] += 1
    parts = ("ideal", "gemm+", "reset", "alu", "c-dma", "idle", "load", "store")
    head = f"{'workload':36s} {'n':>2s} {'cycles':>8s} " + " ".join(f"{p:>6s}" for p in parts)
    lines = [
        "shares of each layer's cycles: compute module = ideal + gemm+ + reset + alu + c-dma +"
        " idle (waiting for DMA); load, store: those modules' busy time",
        head,
        "-" * len(head),
    ]
    sums = dict.fromkeys(("cycles", *parts), 0.0)
    for (wl, ep, _), (count, r) in distinct.items():
        low = lower_conv2d(wl, ep, ConvConfig.from_dict(r.config), hw, DramMap.disjoint(wl, hw))
        rep = sim.cycles_of(low.insns, hw, trace=True)
        got = {"ideal": wl.macs / hw.gemm_macs_per_cycle} | dict.fromkeys(parts[1:5], 0.0)
        for e in rep.events:
            if e.module != "compute":
                continue
            kind = {"GEMM": "gemm+", "GEMM reset": "reset"}.get(e.name, "c-dma")
            got["alu" if e.name.startswith("ALU") else kind] += e.dur_cycles
        got["gemm+"] -= got["ideal"]
        compute = [e for e in rep.events if e.module == "compute"]
        got["idle"] = rep.total_cycles - _busy_union(compute)
        got["load"] = rep.modules["load"].busy_cycles
        got["store"] = rep.modules["store"].busy_cycles
        note = "" if rep.total_cycles == r.cycles else f"  (the run took {r.cycles})"
        lines.append(
            f"{str(wl):36s} {count:2d} {rep.total_cycles:8d} "
            + " ".join(f"{100 * got[p] / rep.total_cycles:5.1f}%" for p in parts)
            + note
        )
        sums["cycles"] += count * rep.total_cycles
        for p in parts:
            sums[p] += count * got[p]
    lines.append("-" * len(head))
    lines.append(
        f"{'all (weighted by launches)':36s} {'':2s} {sums['cycles']:8.0f} "
        + " ".join(f"{100 * sums[p] / sums['cycles']:5.1f}%" for p in parts)
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()  # (tuning workers are spawned processes: keep this guard)
