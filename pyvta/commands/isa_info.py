"""pyvta isa: the config's derived sizes and the bit layouts of every instruction format."""

from __future__ import annotations

import argparse

from pyvta.commands.common import add_config_argument, config_from
from pyvta.isa import alu_layout, gemm_layout, mem_layout, uop_layout

HELP = "print a hardware config's sizes and the instruction / micro-op bit layouts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_argument(p)
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the config as JSON instead (a sample FILE for --config: edit and load it)",
    )


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    if args.print_config:
        print(cfg.to_json(indent=2))
        return 0
    print(f"config {cfg.tag}")
    for mem in ("uop", "inp", "wgt", "acc", "out"):
        print(f"  {mem.upper():4s} {cfg.elem_bytes_of(mem):4d} B/row x {cfg.depth_of(mem):6d} rows")
    print(f"  GEMM {cfg.gemm_macs_per_cycle} MACs/cycle; AXI {cfg.bus_width_bits}-bit\n")
    for layout in (mem_layout(cfg), gemm_layout(cfg), alu_layout(cfg), uop_layout(cfg)):
        print(layout.describe())
        print()
    return 0
