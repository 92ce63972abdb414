"""pyvta run: run an ONNX model (or a compiled artifact) on a device or the CPU and print where
each layer ran, its cycles or milliseconds, and its share of the total. An artifact's kernels are
loaded onto the device (load time reported apart) and nothing is lowered."""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyvta.commands.common import add_config_argument
from pyvta.commands.network import (
    TARGET_HELP,
    compile_for,
    open_accelerator,
    parse_target,
    vta_summary,
)

HELP = "run MODEL.onnx (or a compiled .npz) on vta-sim, vta-rtl, ... or cpu; per-layer report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file, or an artifact written by pyvta compile")
    p.add_argument("--target", default="vta-sim", help=f"{TARGET_HELP} (default vta-sim)")
    add_config_argument(p)
    p.add_argument("--input", metavar="X.npy", help="input array (default: seeded random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=25, help="rows of the per-layer table (0: all)")
    p.add_argument("--runs", type=int, default=1, help="inferences (the table shows the first)")
    p.add_argument(
        "--save-output", metavar="OUT.npy", dest="save_output", help="write the first output"
    )
    p.add_argument(
        "--search",
        type=int,
        default=0,
        help="compiling an ONNX file: configs measured on the cycle model per layer",
    )
    p.add_argument(
        "--tuning-log",
        metavar="LOG.jsonl",
        dest="tuning_log",
        help="compiling an ONNX file: each layer's best config from a `pyvta tune MODEL --log` log",
    )
    p.add_argument("--calibration", metavar="DATA", help="compiling: .npy folder or .npz samples")
    p.add_argument(
        "--bitstream", metavar="DIR", help="pynq: the bitstream folder (manifest, .bit, .hwh)"
    )
    p.add_argument("--key-file", dest="key_file", help="vta-tcp://HOST:PORT: the server's key")


def run(args: argparse.Namespace) -> int:
    from pyvta.commands.common import CommandError, atomic_output, config_from, output_path

    if args.runs < 1:
        raise CommandError(f"--runs must be >= 1, got {args.runs}")
    save = None
    if args.save_output:
        inputs = (args.model,) + ((args.input,) if args.input else ())
        save = output_path(args.save_output, ".npy", inputs=inputs, flag="--save-output")
    kind, device = parse_target(args.target)
    hw = config_from(args) if args.config else None
    cm = compile_for(
        args.model,
        args.target,
        hw=hw,
        tuning_log=args.tuning_log,
        search=args.search,
        calibration=args.calibration,
    )
    name = cm.input_names[0]
    shape = cm.graph.values[name].shape
    if args.input:
        x = np.load(args.input).astype(np.float32)
    else:
        x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
        print(f"input: seeded standard-normal {list(shape)} (seed {args.seed})")
    vta = None
    if kind == "vta":
        kwargs = {"bitstream": args.bitstream} if args.bitstream else {}
        kwargs.update({"key_file": args.key_file} if args.key_file else {})
        vta = open_accelerator(cm, device or "sim", **kwargs)
    from pyvta.compiler.graph.compiled_model import run_model

    backends = {"vta": vta} if vta is not None else None
    first = None
    for i in range(args.runs):
        start = len(vta.runs) if vta is not None else 0
        t0 = time.perf_counter()
        outputs, table = run_model(cm, {name: x}, backends=backends)
        wall = time.perf_counter() - t0
        if first is None:
            first = (outputs, table)
            print(table.format(top=args.top or None))
        runs = vta.runs[start:] if vta is not None else None
        extra = f"; {vta_summary(vta, runs)}" if runs else ""
        print(f"inference {i + 1}: {wall:.2f} s wall{extra}")
    out = first[0][0]
    if save is not None:
        with atomic_output(save) as tmp:
            np.save(tmp, out)
        print(f"first output written to {save}")
    top5 = np.argsort(out.reshape(-1))[::-1][:5]
    print(f"output {list(out.shape)}; top-5 classes {top5.tolist()}")
    return 0
