"""pyvta demo: the main demo. Today: an int8 matrix multiply on the simulated accelerator,
checked against numpy, with its cycle report. (ResNet-18 end to end once the graph level lands.)"""

from __future__ import annotations

import argparse
import time

import numpy as np

import sim
from sim.programs import matmul_program

HELP = "run the main demo on the simulated accelerator"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--m", type=int, default=256, help="rows of A (default 256)")
    p.add_argument("--k", type=int, default=256, help="columns of A, multiple of 16 (default 256)")
    p.add_argument("--n", type=int, default=256, help="columns of B, multiple of 16 (default 256)")
    p.add_argument("--seed", type=int, default=0, help="random seed for the matrices")
    p.add_argument("--trace", metavar="T.json", help="write a Perfetto trace of the cycle model")
    p.add_argument("--save", metavar="BUNDLE.npz", help="save the program bundle")


def run(args: argparse.Namespace) -> int:
    rng = np.random.default_rng(args.seed)
    print(
        f"pyvta demo: C = A @ B, int8 x int8 -> int32, A {args.m}x{args.k}, B {args.k}x{args.n},"
        f" seed {args.seed}"
    )
    a = rng.integers(-128, 128, (args.m, args.k), dtype=np.int8)
    b = rng.integers(-128, 128, (args.k, args.n), dtype=np.int8)
    ex = matmul_program(a, b)
    program = ex.program
    print(
        f"program: {program.insn_count} instructions, DRAM image {program.dram.size} bytes,"
        f" config {program.config.tag}"
    )
    if args.save:
        program.save(args.save)
        print(f"bundle saved to {args.save}")
    t0 = time.perf_counter()
    result = sim.run(program)
    wall_s = time.perf_counter() - t0
    got = ex.readback(result.dram)
    reference = a.astype(np.int32) @ b.astype(np.int32)
    ok = np.array_equal(got, reference)
    print(
        f"functional simulation: {wall_s * 1e3:.1f} ms wall,"
        f" {result.counters.macs / wall_s / 1e9:.2f} G simulated MACs/s"
    )
    print(f"  {result.counters.summary()}")
    print(
        f"check against numpy int32 product: {'EXACT MATCH' if ok else 'MISMATCH'}"
        f" ({got.size} values)"
    )
    report = sim.run_cycles(program, trace=bool(args.trace))
    print("cycle model:")
    print("  " + report.table().replace("\n", "\n  "))
    if args.trace:
        sim.write_trace(report, args.trace)
        print(f"trace written to {args.trace} (open in https://ui.perfetto.dev)")
    return 0 if ok else 1
