"""pyvta sim: run a program bundle on the functional simulator (and the cycle model)."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pyvta import sim
from pyvta.sim import Program

HELP = "run a program bundle (.npz) on the simulator and write the final DRAM image"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", help="program bundle: .npz with dram, insn_addr, insn_count, config")
    p.add_argument("--out", metavar="RESULT.npz", help="write the final DRAM image and counters")
    p.add_argument("--cycles", action="store_true", help="also run the cycle model and report it")
    p.add_argument(
        "--check-races",
        action="store_true",
        help="fail on accesses of two modules that no dependency token orders",
    )
    p.add_argument(
        "--engine",
        choices=sim.ENGINES,
        default="auto",
        help="functional engine: native (llvmlite kernels), numpy (the reference), auto (default:"
        " native where llvmlite is installed)",
    )
    p.add_argument(
        "--trace", metavar="T.json", help="write a Perfetto/Chrome trace (implies --cycles)"
    )


def run(args: argparse.Namespace) -> int:
    program = Program.load(args.bundle)
    # the cycle model reads the stream before the run may store over the image
    report = sim.run_cycles(program, trace=bool(args.trace)) if args.cycles or args.trace else None
    t0 = time.perf_counter()
    # the bundle was read for this run only: simulate on its image, no copy
    result = sim.run(program, check_races=args.check_races, engine=args.engine, in_place=True)
    wall_s = time.perf_counter() - t0
    print(f"{args.bundle}: {program.insn_count} instructions, config {program.config.tag}")
    print(f"functional: {result.counters.summary()}  ({wall_s * 1e3:.1f} ms wall)")
    if result.leftover_tokens:
        print(f"warning: tokens left in queues at the end: {result.leftover_tokens}")
    extra = {"counters": np.array(json.dumps(result.counters.to_dict()))}
    if report:
        print(report.table())
        extra["cycles"] = np.array(json.dumps(report.to_dict()))
        if args.trace:
            sim.write_trace(report, args.trace)
            print(f"trace written to {args.trace} (open in https://ui.perfetto.dev)")
    if args.out:
        Program(result.dram, program.insn_addr, program.insn_count, program.config).save(
            args.out, **extra
        )
        print(f"result written to {args.out}")
    return 0
