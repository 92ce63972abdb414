"""Differential fuzzing at scale: N seeded random programs on the fast RTL device
(``driver.open("rtl")``, one device kept open), each final DRAM compared with ``sim.run``.

    .venv/bin/python benchmarks/rtl_fuzz.py [--count 10000] [--seed 0]

tests/hw/test_rtl_device.py runs 200 of these per test run; this is the 10,000-program run.
Prints the seeds, the mismatches (none expected), cycles simulated and the time taken.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyvta import driver
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatches, device_runs

BATCH = 500


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    args = ap.parse_args(argv)
    print(f"seeds {args.seed}..{args.seed + args.count - 1}")
    dev = driver.open("rtl", dram_bytes=1 << 22)
    bad, cycles, done = [], 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(args.seed, args.seed + args.count, BATCH):
        seeds = range(start, min(start + BATCH, args.seed + args.count))
        named = [(f"seed {s}", random_program(np.random.default_rng(s))) for s in seeds]
        runs = device_runs(dev, [p for _, p in named])
        bad += accelerator_mismatches(named, runs)
        cycles += sum(r.cycles or 0 for r in runs)
        done += len(named)
        print(f"  {done} programs, {len(bad)} mismatches, {time.perf_counter() - t0:.0f} s")
    dev.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    for line in bad[:20]:
        print(line)
    print(
        f"{done} random programs on the fast RTL device: {done - len(bad)} equal to sim.run,"
        f" {len(bad)} differ; {cycles:,} RTL cycles; {wall:.0f} s wall, {cpu:.0f} CPU s"
        " (generation and sim.run included)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
