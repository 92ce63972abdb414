"""Differential fuzzing at scale: N seeded random programs on the fast RTL device
(``driver.open("rtl")``, one device kept open), each final DRAM compared with ``sim.run``.

    .venv/bin/python benchmarks/rtl_fuzz.py [--count 10000] [--seed 0] [--faults] [--overlap]

tests/hw/test_rtl_device.py runs 200 of these per test run; this is the 10,000-program run.
Prints the seeds, the mismatches (none expected), cycles simulated and the time taken.
``--faults``: each program gets one random bad instruction (``sim.faults``); the RTL must stop
at the instruction ``sim.run`` refuses, with the simulator's kind of error. ``--overlap``: the
programs also carry the overlap bit where it is legal (``random_program(overlap=True)``).
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import Counter

import numpy as np

from pyvta import driver
from pyvta.sim.faults import random_faulting_program
from pyvta.sim.random_program import random_program
from pyvta.testing.compare import accelerator_mismatches, device_runs, fault_mismatches

BATCH = 500


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--faults", action="store_true", help="one random bad instruction each")
    ap.add_argument("--overlap", action="store_true", help="overlap bits where legal")
    args = ap.parse_args(argv)
    print(f"seeds {args.seed}..{args.seed + args.count - 1}")
    dev = driver.open("rtl", dram_bytes=1 << 22)
    bad, cycles, done, kinds = [], 0, 0, Counter()
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(args.seed, args.seed + args.count, BATCH):
        seeds = range(start, min(start + BATCH, args.seed + args.count))
        make = _faulting_program if args.faults else random_program
        if args.overlap and not args.faults:
            make = functools.partial(random_program, overlap=True)
        named = [(f"seed {s}", make(np.random.default_rng(s))) for s in seeds]
        runs = device_runs(dev, [p for _, p in named])
        bad += (fault_mismatches if args.faults else accelerator_mismatches)(named, runs)
        kinds.update(type(r.error).__name__ for r in runs if r.error)
        cycles += sum(_cycles(r) for r in runs)
        done += len(named)
        print(f"  {done} programs, {len(bad)} mismatches, {time.perf_counter() - t0:.0f} s")
    dev.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    for line in bad[:20]:
        print(line)
    what = "stopped where and as sim.run refuses them" if args.faults else "equal to sim.run"
    print(
        f"{done} random programs on the fast RTL device: {done - len(bad)} {what},"
        f" {len(bad)} differ; {cycles:,} RTL cycles; {wall:.0f} s wall, {cpu:.0f} CPU s"
        " (generation and sim.run included)"
    )
    if kinds:
        print("errors raised: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    return 1 if bad else 0


def _cycles(run) -> int:
    """CYCLES of a run: of the result, or of the fault's outcome (START to DONE-with-error)."""
    if run.error is not None:
        return run.error.outcome.counters["CYCLES"]
    return run.cycles or 0


def _faulting_program(rng: np.random.Generator):
    """A random program with one random bad instruction (redrawn until a mutation applies)."""
    while (bad := random_faulting_program(random_program(rng), rng)) is None:
        pass
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
