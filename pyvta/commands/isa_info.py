"""pyvta isa: the config's derived sizes and the bit layouts of every instruction format."""

from __future__ import annotations

import argparse

from isa import alu_layout, gemm_layout, mem_layout, uop_layout
from pyvta.commands.common import add_config_argument, config_from

HELP = "print a hardware config's sizes and the instruction / micro-op bit layouts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_argument(p)


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    print(f"config {cfg.tag}")
    for mem in ("uop", "inp", "wgt", "acc", "out"):
        print(f"  {mem.upper():4s} {cfg.elem_bytes_of(mem):4d} B/row x {cfg.depth_of(mem):6d} rows")
    print(f"  GEMM {cfg.gemm_macs_per_cycle} MACs/cycle; AXI {cfg.bus_width_bits}-bit\n")
    for layout in (mem_layout(cfg), gemm_layout(cfg), alu_layout(cfg), uop_layout(cfg)):
        print(layout.describe())
        print()
    return 0
