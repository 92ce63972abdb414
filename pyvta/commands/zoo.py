"""pyvta zoo: write a model of the built-in zoo as an ONNX file (what ``pyvta compile`` and
``pyvta run`` take, as they take any ONNX model of one's own)."""

from __future__ import annotations

import argparse

HELP = "write a zoo model (resnet18, resnet34, mobilenet) as an ONNX file for compile/run/tune"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="model name; without it, list the zoo")
    p.add_argument("-o", "--out", metavar="MODEL.onnx", help="ONNX file (default: MODEL.onnx)")
    p.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    p.add_argument("--classes", type=int, default=1000, help="classifier outputs (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    p.add_argument(
        "--width", type=int, help="first layer's channels (default: the model's; smaller is faster)"
    )


def run(args: argparse.Namespace) -> int:
    from pyvta.cache import atomic_output
    from pyvta.commands.common import CommandError, output_path
    from pyvta.compiler.graph import zoo

    if args.model is None:
        for name, model in sorted(zoo.ZOO.items()):
            print(f"{name:10s} {model.summary}")
        return 0
    if args.size < 32:
        raise CommandError(
            f"--size {args.size} is too small: the networks downsample by 32 (allowed: 32 or more)"
        )
    if args.classes < 1:
        raise CommandError(f"--classes {args.classes}: a classifier needs at least 1 output")
    if args.width is not None and args.width < 1:
        raise CommandError(f"--width {args.width}: a layer needs at least 1 channel")
    if args.model not in zoo.ZOO:
        raise CommandError(
            f"no model {args.model!r} in the zoo (allowed: {', '.join(sorted(zoo.ZOO))})"
        )
    out = output_path(args.out or f"{args.model}.onnx", ".onnx", flag="-o")
    kwargs = {"size": args.size, "classes": args.classes, "seed": args.seed}
    if args.width is not None:
        kwargs["width"] = args.width
    with atomic_output(out) as tmp:
        zoo.save_model(args.model, tmp, **kwargs)
    print(
        f"wrote {out}: {args.model}, input float32[1, 3, {args.size}, {args.size}],"
        f" {args.classes} classes, seed {args.seed}"
    )
    return 0
