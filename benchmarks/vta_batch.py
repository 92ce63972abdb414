"""ResNet-18 throughput on the accelerator for batches of N images (issue 32): the whole network
on VTA, each layer one launch for all N images (a conv's tiles run over the N images, its weight
tiles loaded once per tile; the classifier a 1 x N-pixel GEMM), on the simulator's cycle model.
Prints per N: total cycles, images/s at the config's clock (100 MHz on the PYNQ), the ratio to
N = 1, the weight bytes the load module moved per image, and bit-exactness against the golden
model of the same compiled graph.

    .venv/bin/python benchmarks/vta_batch.py --tuning-log tuner/pretuned/resnet18_224_vta-sim.jsonl
    .venv/bin/python benchmarks/vta_batch.py --batches 1 4 --size 64      # quicker

Layers the log does not cover (the folded stem, the classifier, layers whose quantization
differs) use the analytic default config (``--search`` measures candidates instead).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from pyvta.compiler.backend.vta.graph_backend import accelerator_for
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import sample_inputs, save_model
from pyvta.driver import SimDevice
from pyvta.isa import DEFAULT_CONFIG, MemInsn, MemType, Opcode
from pyvta.runtime.accelerator import AcceleratorBackend
from pyvta.runtime.compiled_model import run_model

CLOCK_HZ = 100e6  # the PYNQ config's clock


def weight_bytes(vta: AcceleratorBackend) -> int:
    """Bytes of WGT loads in the kernels' instruction streams (one launch each)."""
    total = 0
    for op in vta._ops.values():
        for i in op.insns() if hasattr(op, "insns") else ():
            if isinstance(i, MemInsn) and i.opcode == Opcode.LOAD and i.memory_type is MemType.WGT:
                total += i.y_size * i.x_size * DEFAULT_CONFIG.wgt_elem_bytes
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--tuning-log", default=None)
    ap.add_argument("--search", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"seed {args.seed}; ResNet-18 {args.size}x{args.size}, whole network on VTA (sim)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18.onnx")
        save_model("resnet18", path, size=args.size)
        # one calibration set for every N: 8 images, regrouped into batches of N
        images = np.concatenate(sample_inputs(8, args.size, seed=args.seed + 1))
        for n in args.batches:
            cal = [{"input": images[i : i + n]} for i in range(0, 8 - n + 1, n)]
            t0 = time.perf_counter()
            shapes = {"input": (n, 3, args.size, args.size)}
            cm = compile_model(path, "vta", cal, lower=False, input_shapes=shapes)
            configs = None
            if args.tuning_log:
                from pyvta.tuner.network import network_configs, network_layers

                configs = network_configs(args.tuning_log, network_layers(cm))
            vta = accelerator_for(cm.graph, SimDevice(), configs, search=args.search)
            x = np.random.default_rng(args.seed).standard_normal((n, 3, args.size, args.size))
            x = x.astype(np.float32)
            (out,), _ = run_model(cm, x, backends={"vta": vta})
            (golden,), _ = run_model(cm, x)
            cycles = vta.total_cycles
            rows.append(
                (n, len(vta.runs), cycles, weight_bytes(vta), np.array_equal(out, golden),
                 time.perf_counter() - t0)
            )  # fmt: skip
            print(
                f"  N={n}: {cycles / 1e6:.2f} M cycles, {len(vta.runs)} launches ({rows[-1][-1]:.0f} s)"
            )
    base = rows[0][2] / rows[0][0]
    print(f"\n{'N':>3} {'launches':>8} {'M cycles':>9} {'img/s@100MHz':>13} {'vs N=1':>7}"
          f" {'wgt KB/img':>10} {'bit-exact':>9}")  # fmt: skip
    for n, launches, cycles, wbytes, same, _ in rows:
        ips = n / (cycles / CLOCK_HZ)
        print(
            f"{n:3d} {launches:8d} {cycles / 1e6:9.2f} {ips:13.1f} {base / (cycles / n):6.2f}x"
            f" {wbytes / n / 1024:10.0f} {'yes' if same else 'NO':>9}"
        )


if __name__ == "__main__":
    main()
