"""pyvta compile: compile an ONNX model for a target into an artifact pyvta run loads: the graph,
its constants and, for the accelerator, every layer's relocatable kernel (docs/artifact.md)."""

from __future__ import annotations

import argparse

from pyvta.commands.common import add_config_argument, config_from
from pyvta.commands.network import (
    add_keep_float_argument,
    add_other_cpu_records_argument,
    add_partition_argument,
    compile_for,
    keep_float_of,
    plan_lines,
)
from pyvta.commands.vocabulary import TARGET_HELP
from pyvta.compiler.targets import NETWORK_DEFAULT

HELP = "compile MODEL.onnx into an artifact (.npz: graph, constants, accelerator kernels)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file")
    p.add_argument(
        "--target", default=NETWORK_DEFAULT, help=f"{TARGET_HELP} (default {NETWORK_DEFAULT})"
    )
    add_config_argument(p)
    p.add_argument(
        "--tuning-log",
        metavar="LOG.jsonl",
        dest="tuning_log",
        help="vta: each accelerator layer's best config; cpu: each conv layer's best schedule"
        " (a `pyvta tune MODEL [--target cpu] --log` log)",
    )
    add_other_cpu_records_argument(p)
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
    cross = p.add_mutually_exclusive_group()
    cross.add_argument(
        "--board",
        metavar="BOARD",
        help="cpu targets: also cross-compile the CPU kernels for this board's CPU into the"
        " artifact (a shared object the board loads with ctypes): pynq-z1, pynq-z2 (Cortex-A9),"
        " ultra96v2, zcu104 (Cortex-A53)",
    )
    cross.add_argument(
        "--cpu-target",
        metavar="TRIPLE",
        dest="cpu_target",
        help="as --board, for a CPU by LLVM triple or name (armv7a-linux-gnueabihf,"
        " aarch64-linux-gnu, cortex-a9, cortex-a53), or host: this machine's CPU (limited by"
        " $PYVTA_CPU_FEATURES), so that running the artifact here loads no compiler",
    )
    add_partition_argument(p)
    p.add_argument(
        "--weight-scales",
        dest="weight_scales",
        metavar="KIND",
        help="int8 weight scales (compiler.graph.WeightScales): tensor (one per layer, the"
        " default), channel (one per output channel), auto (per channel where it brings a layer"
        " closer to float on the calibration samples)",
    )
    add_keep_float_argument(p)
    p.add_argument("-o", "--out", required=True, metavar="ARTIFACT.npz")


def run(args: argparse.Namespace) -> int:
    from pyvta.commands.common import CommandError, output_path
    from pyvta.commands.run_model import input_shapes

    out = output_path(args.out, ".npz", inputs=(args.model,), flag="-o")  # before the work
    cross = cross_target(args)
    if args.search < 0:
        raise CommandError(f"--search must be >= 0, got {args.search}")
    scales = None
    if args.weight_scales is not None:
        from pyvta.compiler.graph import WeightScales

        allowed = [w.value for w in WeightScales]
        if args.weight_scales not in allowed:
            raise CommandError(
                f"--weight-scales {args.weight_scales!r} (allowed: {', '.join(allowed)})"
            )
        scales = WeightScales(args.weight_scales)
    cm = compile_for(
        args.model,
        args.target,
        hw=config_from(args) if args.config else None,
        tuning_log=args.tuning_log,
        search=args.search,
        calibration=args.calibration,
        input_shapes=input_shapes(args.input_shape or []),
        partition=args.partition,
        batch=args.batch,
        weight_scales=scales,
        keep_float=keep_float_of(args.keep_float),
        other_cpu_records=args.other_cpu_records,
    )
    if cross is not None:
        from pyvta.compiler.graph.cpu_cross import cross_compile_cpu

        cm.cpu_code = cross_compile_cpu(cm.graph, cross)
        if cm.cpu_code is None:
            raise CommandError(
                f"--board/--cpu-target: the {args.target} model has no compiled CPU kernels to"
                " cross-compile"
            )
    path = cm.save(out)  # written whole, then renamed
    from pyvta.compiler.targets import get_target

    n_vta = len(get_target("vta").placed(cm.graph))
    tag = f", HwConfig {cm.hw.tag}" if cm.hw else ""
    gpu = f", {len(cm.gpu_kernels)} GPU kernels" if cm.gpu_kernels else ""
    code = cm.cpu_code
    n_so = len(code.kernels) + len(code.gemms) if code else 0  # node kernels, float products
    so = f", {n_so} CPU kernels for {code.description}" if code else ""
    print(
        f"wrote {path}: {len(cm.graph.nodes)} nodes ({n_vta} on the accelerator,"
        f" {len(cm.kernels)} kernels{tag}{gpu}{so})"
    )
    if get_target(cm.target).accelerator:
        print("\n".join(plan_lines(cm.graph)))
    from pyvta.runtime.ir import HOST

    if get_target(cm.target).placement == HOST:  # every layer on the host CPU
        from pyvta.compiler.targets.cpu.kernels import numpy_nodes

        rest = numpy_nodes(cm.graph)
        print(f"{len(rest)} CPU nodes run numpy, the rest compiled kernels or views")
        for name, op, why in rest:
            print(f"  {name} ({op}): {why}")
    return 0


def cross_target(args: argparse.Namespace):
    """The ``CpuTarget`` of ``--board`` (its processing system's CPU) or ``--cpu-target``, or
    None when neither is given."""
    from pyvta.commands.common import CommandError

    if args.board is None and args.cpu_target is None:
        return None
    from pyvta.compiler.backend.llvm.target import CpuTarget
    from pyvta.host_cpu import CpuFeatureError

    name = args.cpu_target
    if args.board is not None:
        from pyvta.hw.boards import BoardError, board

        try:
            name = board(args.board).ps.cpu
        except BoardError as e:
            raise CommandError(f"--board: {e}") from None
    if name == "host":  # this machine's CPU, limited by $PYVTA_CPU_FEATURES
        return CpuTarget.host(1)
    try:
        return CpuTarget.cross(name)
    except CpuFeatureError as e:
        raise CommandError(f"--cpu-target: {e}") from None
