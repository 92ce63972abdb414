"""Simulated MACs per second of wall time: functional simulator and cycle model, GEMM-heavy program.

Target (issue 2): >= 2e9 simulated MACs/s for the functional simulator on a 2-core machine.
Anchor: the original C++ simulator ran a ResNet-18 inference (~1.8e9 MACs) in ~1 s.

    .venv/bin/python benchmarks/sim_throughput.py [--m 2048] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyvta import sim
from pyvta.sim.programs import matmul_program

TARGET_MACS_PER_S = 2e9
CPP_SIM_MACS_PER_S = 1.8e9  # ResNet-18, ~1.8e9 MACs in ~1 s


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=2048, help="rows of A (default 2048)")
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"seed {args.seed}")
    rng = np.random.default_rng(args.seed)
    a = rng.integers(-128, 128, (args.m, args.k), dtype=np.int8)
    b = rng.integers(-128, 128, (args.k, args.n), dtype=np.int8)
    ex = matmul_program(a, b)
    result = sim.run(ex.program)
    assert np.array_equal(ex.readback(result.dram), ex.expected), "simulator result is wrong"
    macs = result.counters.macs
    t_func = best_time(lambda: sim.run(ex.program), args.repeats)
    t_cyc = best_time(lambda: sim.run_cycles(ex.program), args.repeats)
    report = sim.run_cycles(ex.program)
    t_np = best_time(lambda: a.astype(np.int32) @ b.astype(np.int32), args.repeats)
    print(
        f"program: {args.m}x{args.k} @ {args.k}x{args.n} int8 GEMM, {ex.program.insn_count}"
        f" instructions, {macs:.3g} MACs, {report.total_cycles} simulated cycles"
    )
    rows = [
        ("functional simulator", t_func, macs / t_func),
        ("cycle model", t_cyc, macs / t_cyc),
        ("numpy int32 matmul (baseline)", t_np, macs / t_np),
    ]
    print(f"{'':32s} {'wall ms':>9s} {'sim MACs/s':>12s}")
    for name, t, rate in rows:
        print(f"{name:32s} {t * 1e3:9.2f} {rate:12.3g}")
    print(
        f"functional / target ({TARGET_MACS_PER_S:.0e} MACs/s): {macs / t_func / TARGET_MACS_PER_S:.2f}x"
    )
    print(
        f"functional / original C++ simulator (~{CPP_SIM_MACS_PER_S:.1e} MACs/s):"
        f" {macs / t_func / CPP_SIM_MACS_PER_S:.2f}x"
    )
    print(f"functional / numpy int32 matmul of the same product: {t_np / t_func:.2f}x")
    print(f"cycle model: {report.total_cycles / t_cyc:.3g} simulated cycles/s")


if __name__ == "__main__":
    main()
