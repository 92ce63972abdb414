"""pyvta tune: search an operator's schedule space (XGBoost rank model + simulated annealing by
default) on the CPU or on the simulated accelerator, with a live progress bar, a crash-safe log
and a tuning-curve plot."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "auto-tune an operator (gemm:M,N,K, conv2d:..., C1..C12 on the CPU; vta:C2..C12 on VTA)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pyvta.tuner.cli_support import add_tune_arguments

    add_tune_arguments(p)


def run(args: argparse.Namespace) -> int:
    from pyvta.commands.common import output_path
    from pyvta.tuner.cli_support import tune_command

    if Path(args.workload).suffix == ".npz":  # a compiled model: readable, and not a bundle
        from pyvta.runtime.compiled_model import CompiledModel

        CompiledModel.load(Path(args.workload))
    # appended to (and read back by --resume), so checked, not written atomically
    inputs = (args.workload, args.transfer_log)
    if args.log:
        Path(args.log).expanduser().parent.mkdir(parents=True, exist_ok=True)  # as TuningLog does
        args.log = str(output_path(args.log, inputs=inputs, flag="--log"))
    if args.plot:
        args.plot = str(output_path(args.plot, ".png", inputs=(*inputs, args.log), flag="--plot"))

    return tune_command(args)
