"""pyvta tune: search an operator's schedule space (XGBoost rank model + simulated annealing by
default) on the CPU or on the simulated accelerator, with a live progress bar, a crash-safe log
and a tuning-curve plot."""

from __future__ import annotations

import argparse

HELP = "auto-tune an operator (gemm:M,N,K, conv2d:..., C1..C12 on the CPU; vta:C2..C12 on VTA)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pyvta.tuner.cli_support import add_tune_arguments

    add_tune_arguments(p)


def run(args: argparse.Namespace) -> int:
    from pyvta.tuner.cli_support import tune_command

    return tune_command(args)
