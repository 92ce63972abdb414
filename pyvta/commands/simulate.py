"""pyvta sim: run a program bundle on the functional simulator (and the cycle model), or on any
``driver.open`` device (``--device``)."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pyvta import sim
from pyvta.cache import atomic_output
from pyvta.commands.common import output_path
from pyvta.sim import Program

HELP = "run a program bundle (.npz) on the simulator (or --device NAME); write the final DRAM"


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
    p.add_argument(
        "--device",
        metavar="NAME",
        help="run the bundle on this driver.open device instead (rtl, rtl:cocotb, pynq,"
        " tcp://HOST:PORT, sim), relocated to the addresses it allocates; --out then holds the"
        " final DRAM and the device's stats",
    )
    p.add_argument("--key-file", dest="key_file", help="--device tcp://HOST:PORT: the server's key")
    p.add_argument("--bitstream", metavar="DIR", help="--device pynq: the bitstream folder")


def run(args: argparse.Namespace) -> int:
    if args.device:
        return run_on_device(args)
    from pyvta.commands.common import CommandError

    for flag, given in (("--key-file", args.key_file), ("--bitstream", args.bitstream)):
        if given:
            raise CommandError(f"{flag} applies to a --device (tcp://HOST:PORT, pynq)")
    out = args.out and output_path(args.out, ".npz", inputs=(args.bundle,))
    trace = args.trace and output_path(
        args.trace, ".json", inputs=(args.bundle, out), flag="--trace"
    )
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
        if trace:
            with atomic_output(trace) as tmp:
                sim.write_trace(report, tmp)
            print(f"trace written to {trace} (open in https://ui.perfetto.dev)")
    if out:
        final = Program(result.dram, program.insn_addr, program.insn_count, program.config)
        with atomic_output(out) as tmp:
            final.save(tmp, **extra)
        print(f"result written to {out}")
    return 0


def run_on_device(args: argparse.Namespace) -> int:
    """``pyvta sim BUNDLE --device NAME``: the bundle relocated onto a ``driver.open`` device
    (``driver.kernel.run_relocated``: a board or a served device hands out its own addresses);
    the simulator's own options do not apply there."""
    from pyvta import driver
    from pyvta.commands.common import CommandError

    sim_only = [
        flag
        for flag, given in (
            ("--cycles", args.cycles),
            ("--check-races", args.check_races),
            ("--engine", args.engine != "auto"),
            ("--trace", args.trace),
        )
        if given
    ]
    if sim_only:
        raise CommandError(
            f"{', '.join(sim_only)} apply to the simulator run (without --device), not to"
            f" --device {args.device}"
        )
    out = args.out and output_path(args.out, ".npz", inputs=(args.bundle,))
    program = Program.load(args.bundle)
    kwargs = {"key_file": args.key_file} if args.key_file else {}
    kwargs.update({"bitstream": args.bitstream} if args.bitstream else {})
    t0 = time.perf_counter()
    from pyvta.driver.kernel import run_relocated

    with driver.open(args.device, config=program.config, **kwargs) as dev:
        final, result = run_relocated(dev, program)  # at the addresses the device hands out
    wall_s = time.perf_counter() - t0
    print(f"{args.bundle}: {program.insn_count} instructions, config {program.config.tag}")
    cycles = "" if result.cycles is None else f"{result.cycles} cycles, "
    print(f"{args.device}: {cycles}{wall_s * 1e3:.1f} ms wall")
    if out:
        extra = {"stats": np.array(json.dumps(result.stats.to_dict()))}
        done = Program(final, program.insn_addr, program.insn_count, program.config)
        with atomic_output(out) as tmp:
            done.save(tmp, **extra)
        print(f"result written to {out}")
    return 0
