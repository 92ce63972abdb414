"""pyvta dse: design-space exploration over hardware configs (resources per board, timing
estimate, ResNet-18 cycles and latency), a table and a Pareto plot; resumable (cached)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "explore hardware configs: resources, board fit, timing, ResNet-18 latency, Pareto plot"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--configs",
        required=True,
        metavar="A.json,B.json",
        help="comma-separated hardware config files (e.g. bitstreams/configs/*.json)",
    )
    p.add_argument("--size", type=int, default=224, help="ResNet-18 input size (default 224)")
    p.add_argument("--no-synth", action="store_true", help="skip synthesis (cycles only)")
    p.add_argument(
        "--synth-timeout", type=float, default=3600, help="seconds per synthesis (default 3600)"
    )
    p.add_argument(
        "--reuse-timing",
        action="store_true",
        help="take each config's newest cached synthesis even if hw/ changed since (noted)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="write the Pareto plot")
    p.add_argument("--board", default="xczu7ev", help="board part of the plot's shares")
    p.add_argument("--json", metavar="FILE.json", help="write the points as JSON")
    p.add_argument("--cache-dir", metavar="DIR", help="default: the cache root's dse folder")


def run(args: argparse.Namespace) -> int:
    from pyvta import dse, isa
    from pyvta.commands.common import CommandError
    from pyvta.hw.runner import default_cache_dir
    from pyvta.hw.synth import BOARD_DEVICES

    boards = [d.name for d in BOARD_DEVICES]
    if args.board not in boards:
        raise CommandError(f"--board {args.board!r} is not known (allowed: {', '.join(boards)})")
    files = [Path(f) for f in args.configs.split(",") if f]
    if not files:
        raise CommandError("--configs needs at least one config file")
    configs = {f.stem: isa.HwConfig.load(f) for f in files}
    explorer = dse.Explorer(
        Path(args.cache_dir) if args.cache_dir else default_cache_dir() / "dse",
        size=args.size,
        synth=not args.no_synth,
        synth_timeout_s=args.synth_timeout,
        reuse_timing=args.reuse_timing,
    )
    points = explorer.explore(configs)
    print(dse.table(points))
    if args.plot:
        print(f"plot written to {dse.plot(points, args.plot, args.board)}")
    if args.json:
        Path(args.json).write_text(dse.to_json(points))
    return 0
