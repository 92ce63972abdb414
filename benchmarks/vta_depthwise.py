"""Depthwise convolutions on the accelerator: the MobileNet-style network (``pyvta zoo mobilenet``)
whole on VTA, and the depthwise lowering choices side by side on its depthwise layers.

    .venv/bin/python benchmarks/vta_depthwise.py [--size 224] [--seed 0] [--rtl]

1. The network, compiled for ``vta`` (whole partition: stem, depthwise and pointwise convs,
   global pool, classifier), analytic default schedules (no tuning log covers it), run on
   ``SimDevice`` and through the golden model: outputs bit for bit, the per-layer table
   (cycles, GEMM micro-ops, utilisation = GEMM micro-ops / cycles) and the total. ``--rtl``: also
   on the fast Verilated RTL device (``driver.open("rtl")``), its cycles beside the model's
   (``sim.Timing.rtl_testbench()`` latency, as ``benchmarks/rtl_network.py``).
2. Each distinct depthwise layer lowered three ways, each measured on the cycle model with
   seeded data and checked against ``reference_conv``:
   - ``block groups`` (what the compiler emits): each 16-channel output block reduces over its
     own input block only, a GEMM whose weight block is diagonal (15/16 of the MACs are zeros);
   - ``one block-diagonal GEMM``: the depthwise as an ordinary conv over every input block
     (weights zero off the diagonal: ``ci_blocks`` x more GEMM work again);
   - ``ALU MUL`` (``compiler.backend.vta.depthwise_alu``): per-channel weight rows in ACC, per
     tap a scratch band of the shifted input multiplied by the tap's weight row (MUL with a
     vector operand) and added to the output rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta import driver, sim
from pyvta.compiler.backend.vta import Epilogue, VtaConv2d, pack_bias, pack_data, unpack_data
from pyvta.compiler.backend.vta.depthwise_alu import build_depthwise_alu_kernel
from pyvta.compiler.backend.vta.graph_backend import accelerator_nodes, kernel_workload, node_layer
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.compiler.backend.vta.workload import WorkloadError
from pyvta.compiler.graph.compile import compile_model, lower_kernels
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver.kernel import load_kernel
from pyvta.runtime import layout
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.ir import ACCELERATOR


def _run(cm, x, device):
    backend = cm.accelerator(device)
    t0 = time.perf_counter()
    outputs, _ = run_model(cm, x, backends={"vta": backend})
    return outputs, backend, time.perf_counter() - t0


def measure_choice(wl, choice: str, rng) -> tuple[int, bool]:
    """(cycles, bit-exact vs ``reference_conv``) of the depthwise ``wl`` lowered as ``choice``:
    "groups" (its block groups), "dense" (one block-diagonal GEMM over every input block) or
    "alu" (``depthwise_alu``)."""
    c = wl.in_channels
    w = rng.integers(-128, 128, (c, 1, wl.kernel_h, wl.kernel_w), dtype=np.int8)
    b = rng.integers(-2000, 2000, c).astype(np.int32)
    x = rng.integers(-128, 128, (1, c, wl.height, wl.width), dtype=np.int8)
    ep = Epilogue.requant(shift=8, relu=True)
    wl = dataclasses.replace(wl, groups=1 if choice == "dense" else wl.groups, batch=1)
    dev = driver.SimDevice(dram_bytes=1 << 27)
    if choice == "alu":
        kernel = build_depthwise_alu_kernel(wl, ep, w, b, dev.config)
        outs, r = load_kernel(dev, kernel).run({"input": pack_data(x)})
        out = outs["output"].view(np.int8).reshape(wl.co_blocks, wl.out_h, wl.out_w, wl.block)
        got, cycles = unpack_data(out, c), r.cycles
    else:
        wp = layout.pack_group_oihw(w, c, wl.groups, wl.block)
        op = VtaConv2d(wl, ep, wp, pack_bias(b, wl.block), dev, None)
        run = op(pack_data(x), None)
        got, cycles = unpack_data(run.output, c), run.cycles
    expected = reference_conv(x, layout.dense_group_oihw(w, c), b, ep, wl)
    return cycles, bool(np.array_equal(got, expected))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtl", action="store_true", help="also run on the fast RTL device")
    ap.add_argument("--no-choices", dest="choices", action="store_false")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mobilenet.onnx"
        save_model("mobilenet", str(path), size=args.size)
        cm = compile_model(path, "vta", lower=False)
    on_cpu = [f"{n.name} ({n.op})" for n in cm.graph.nodes if n.target != ACCELERATOR]
    print(
        f"MobileNet-style {args.size}x{args.size}, whole partition; CPU nodes: {', '.join(on_cpu)}"
    )
    t0 = time.perf_counter()
    lower_kernels(cm)
    print(f"lowered {len(cm.kernels)} kernels in {time.perf_counter() - t0:.0f} s")
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
    timing = sim.Timing.rtl_testbench() if args.rtl else sim.Timing()
    out, be, sim_s = _run(cm, x, driver.SimDevice(cm.hw, timing=timing))
    gold, _ = run_model(cm, x)
    exact = all(np.array_equal(a, b) for a, b in zip(out, gold, strict=True))
    rtl = None
    if args.rtl:
        dev = driver.open("rtl", config=cm.hw)
        rtl_out, rtl, rtl_s = _run(cm, x, dev)
        rtl_exact = all(np.array_equal(a, b) for a, b in zip(rtl_out, out, strict=True))
        dev.close()

    print(f"\n{'#':>2} {'layer':42s} {'sim cycles':>10s} {'GEMM uops':>10s} {'util':>6s}"
          + (f" {'rtl cycles':>10s} {'model':>7s}" if rtl else ""))  # fmt: skip
    for i, r in enumerate(be.runs):
        wl = kernel_workload(r.kernel)
        uops = getattr(wl, "gemm_uops", 0)
        line = f"{i:2d} {str(wl):42s} {r.cycles:10,d} {uops:10,d} {uops / r.cycles:6.1%}"
        if rtl:
            rc = rtl.runs[i].cycles
            line += f" {rc:10,d} {100 * (r.cycles - rc) / rc:+6.1f}%"
        print(line)
    dw = [r for r in be.runs if getattr(kernel_workload(r.kernel), "groups", 1) > 1]
    total = be.total_cycles
    print(f"\ntotal: {total:,} cycles ({total / 1e5:.2f} ms at 100 MHz) in {len(be.runs)} launches;"
          f" depthwise {sum(r.cycles for r in dw):,} ({len(dw)} layers); SimDevice {sim_s:.0f} s")  # fmt: skip
    print(f"outputs bit-exact, SimDevice vs golden model: {exact}")
    if rtl:
        rt = rtl.total_cycles
        print(f"RTL: {rt:,} cycles (model {100 * (total - rt) / rt:+.2f}%), outputs bit-identical"
              f" to SimDevice: {rtl_exact}; RTL wall {rtl_s:.0f} s")  # fmt: skip

    ok = exact and (rtl_exact if rtl else True)
    if args.choices:
        rng = np.random.default_rng(args.seed)
        print("\ndepthwise choices per distinct layer (cycles on the cycle model; exact: vs"
              " reference_conv):")  # fmt: skip
        print(f"  {'layer':40s} {'count':>5s} {'block groups':>16s} {'one block-diag':>16s}"
              f" {'ALU MUL':>16s}")  # fmt: skip
        seen: dict = {}
        for node in accelerator_nodes(cm.graph):
            wl = node_layer(cm.graph, node).workload
            if wl.groups > 1:
                seen[wl] = seen.get(wl, 0) + 1
        sums, left_out = [0, 0, 0], []
        for wl, count in seen.items():
            line, cycles_of = f"  {str(wl):40s} {count:5d}", []
            for choice in ("groups", "dense", "alu"):
                try:
                    cycles, exact = measure_choice(wl, choice, rng)
                except WorkloadError:  # e.g. the ALU kernel takes one group per channel block
                    line += f" {'cannot':>16s}"
                    continue
                ok = ok and exact
                cycles_of.append(count * cycles)
                line += f" {cycles:12,d} {'ok' if exact else 'BAD':>3s}"
            print(line, flush=True)
            if len(cycles_of) == len(sums):  # the sums compare the layers every choice takes
                sums = [a + b for a, b in zip(sums, cycles_of, strict=True)]
            else:
                left_out.append(str(wl))
        print(f"  {'all depthwise layers of the network':40s} {'':5s}"
              + "".join(f" {v:16,d}" for v in sums))  # fmt: skip
        if left_out:
            print(f"  (left out of the sums, a choice cannot take them: {', '.join(left_out)})")
        print(f"  vs block groups: one block-diagonal GEMM {sums[1] / sums[0]:.2f}x,"
              f" ALU MUL {sums[2] / sums[0]:.2f}x the cycles")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
