"""pyvta board: Vivado recipes for the boards pyvta deploys to (PYNQ-Z1/Z2, Ultra96-V2, ZCU104)."""

from __future__ import annotations

import argparse

HELP = "board bitstream recipes: Verilog, Vivado wrapper, build.tcl, manifest.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pyvta.commands.common import add_config_argument

    sub = p.add_subparsers(dest="board_command", metavar="BOARD_COMMAND", required=True)
    r = sub.add_parser("recipe", help="write a board's Vivado recipe into a folder")
    r.add_argument("--board", required=True, help="pynq-z1 | pynq-z2 | ultra96v2 | zcu104")
    add_config_argument(r)
    r.add_argument(
        "--memory-port",
        default="hp0",
        dest="memory_port",
        help="hp0 (default); acp (Zynq-7000) or hpc0 (UltraScale+): coherent with the CPU caches",
    )
    r.add_argument("-o", "--out", required=True, metavar="DIR")
    r.add_argument("--build", action="store_true", help="then run Vivado (must be on PATH)")
    sub.add_parser("list", help="the boards and their parts")


def run(args: argparse.Namespace) -> int:
    from pyvta.hw.boards import BOARDS

    if args.board_command == "list":
        for b in BOARDS.values():
            ports = ", ".join(b.ps.memory_ports)
            print(f"{b.name:10s} {b.part:22s} {b.ps.name:16s} memory ports: {ports}")
        return 0
    from pyvta.commands.common import config_from
    from pyvta.hw.recipe import build, write_recipe

    recipe, paths = write_recipe(args.board, config_from(args), args.out, args.memory_port)
    print(f"recipe for {recipe.board.name} ({recipe.board.part}), config {recipe.config.tag}:")
    for path in paths:
        print(f"  {path}")
    if args.build:
        info = build(args.out)
        print(
            f"built {info['files']['bit']} (Vivado {info['build']['vivado']}, WNS {info['build']['wns_ns']} ns)"
        )
    else:
        print(f"build it with: cd {args.out} && vivado -mode batch -source build.tcl")
    return 0
