"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse

from pyvta.isa import HwConfig, PyvtaError


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="hardware config JSON (VTA's vta_config.json keys; a sample: pyvta isa --print-config)",
    )


def config_from(args: argparse.Namespace) -> HwConfig:
    return HwConfig.load(args.config) if getattr(args, "config", None) else HwConfig()


class CommandError(PyvtaError, ValueError):
    """A command-line request that cannot be carried out as asked."""
