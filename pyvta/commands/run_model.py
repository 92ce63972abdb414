"""pyvta run: run an ONNX model (or a compiled artifact) on the simulated accelerator or the CPU
and print where each layer ran, its cycles or milliseconds, and its share of the total."""

from __future__ import annotations

import argparse

import numpy as np

from pyvta.commands.network import (
    TARGETS,
    accelerator,
    compile_for,
    run_on,
    tuned_configs,
    vta_summary,
)

HELP = "run MODEL.onnx (or a compiled .npz) on vta-sim or cpu; per-layer report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file, or an artifact written by pyvta compile")
    p.add_argument("--target", choices=list(TARGETS), default="vta-sim")
    p.add_argument("--input", metavar="X.npy", help="input array (default: seeded random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=25, help="rows of the per-layer table (0: all)")
    p.add_argument(
        "--search",
        type=int,
        default=0,
        help="vta-sim: configs measured on the cycle model per layer (0: analytic)",
    )
    p.add_argument(
        "--tuning-log",
        metavar="LOG.jsonl",
        dest="tuning_log",
        help="vta-sim: use each layer's best config from a `pyvta tune MODEL --log` log",
    )


def run(args: argparse.Namespace) -> int:
    cm = compile_for(args.model, args.target)
    shape = cm.graph.values[cm.input_names[0]].shape
    if args.input:
        x = np.load(args.input).astype(np.float32)
    else:
        x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
        print(f"input: seeded standard-normal {list(shape)} (seed {args.seed})")
    vta = None
    if args.target == "vta-sim":
        configs = tuned_configs(cm, args.tuning_log) if args.tuning_log else None
        vta = accelerator(search=args.search, configs=configs)
    outputs, table, vta = run_on(cm, args.target, x, vta)
    print(table.format(top=args.top or None))
    if vta is not None:
        print(vta_summary(vta))
    out = outputs[0]
    top5 = np.argsort(out.reshape(-1))[::-1][:5]
    print(f"output {list(out.shape)}; top-5 classes {top5.tolist()}")
    return 0
