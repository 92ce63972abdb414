"""pyvta compile: compile an ONNX model for a target into an artifact pyvta run loads: the graph,
its constants and, for the accelerator, every layer's relocatable kernel (docs/artifact.md)."""

from __future__ import annotations

import argparse

from pyvta.commands.common import add_config_argument, config_from
from pyvta.commands.network import compile_for
from pyvta.commands.vocabulary import TARGET_HELP

HELP = "compile MODEL.onnx into an artifact (.npz: graph, constants, accelerator kernels)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file")
    p.add_argument("--target", default="vta", help=f"{TARGET_HELP} (default vta)")
    add_config_argument(p)
    p.add_argument(
        "--tuning-log",
        metavar="LOG.jsonl",
        dest="tuning_log",
        help="vta: each accelerator layer's best config; cpu: each conv layer's best schedule"
        " (a `pyvta tune MODEL [--target cpu] --log` log)",
    )
    p.add_argument(
        "--search",
        type=int,
        default=0,
        help="configs measured on the cycle model per untuned layer (0: analytic default)",
    )
    p.add_argument(
        "--calibration",
        metavar="DATA",
        help="int8 calibration samples: a folder of .npy files or an .npz (default: seeded random)",
    )
    p.add_argument(
        "--input-shape",
        action="append",
        dest="input_shape",
        metavar="NAME=1,3,224,224",
        help="the shape of an input with symbolic dimensions",
    )
    p.add_argument("-o", "--out", required=True, metavar="ARTIFACT.npz")


def run(args: argparse.Namespace) -> int:
    from pyvta.commands.common import CommandError, output_path
    from pyvta.commands.run_model import input_shapes

    out = output_path(args.out, ".npz", inputs=(args.model,), flag="-o")  # before the work
    if args.search < 0:
        raise CommandError(f"--search must be >= 0, got {args.search}")
    cm = compile_for(
        args.model,
        args.target,
        hw=config_from(args) if args.config else None,
        tuning_log=args.tuning_log,
        search=args.search,
        calibration=args.calibration,
        input_shapes=input_shapes(args.input_shape or []),
    )
    path = cm.save(out)  # written whole, then renamed
    from pyvta.compiler.targets import get_target

    n_vta = len(get_target("vta").placed(cm.graph))
    tag = f", HwConfig {cm.hw.tag}" if cm.hw else ""
    gpu = f", {len(cm.gpu_kernels)} GPU kernels" if cm.gpu_kernels else ""
    print(
        f"wrote {path}: {len(cm.graph.nodes)} nodes ({n_vta} on the accelerator,"
        f" {len(cm.kernels)} kernels{tag}{gpu})"
    )
    from pyvta.compiler.graph.ir import HOST

    if cm.spec.placement == HOST:  # every layer on the host CPU
        from pyvta.compiler.targets.cpu.kernels import numpy_nodes

        rest = numpy_nodes(cm.graph)
        print(f"{len(rest)} CPU nodes run numpy, the rest compiled kernels or views")
        for name, op, why in rest:
            print(f"  {name} ({op}): {why}")
    return 0
