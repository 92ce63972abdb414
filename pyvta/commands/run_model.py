"""pyvta run: run an ONNX model (or a compiled artifact) on a device or the CPU and print where
each layer ran, its cycles or milliseconds, and its share of the total. An artifact's kernels are
loaded onto the device (load time reported apart) and nothing is lowered."""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyvta.commands.common import add_config_argument
from pyvta.commands.network import (
    add_keep_float_argument,
    add_other_cpu_records_argument,
    add_partition_argument,
    compile_for,
    keep_float_of,
    open_accelerator,
    plan_lines,
    vta_summary,
)
from pyvta.commands.vocabulary import add_target_arguments
from pyvta.compiler.targets import NETWORK_DEFAULT

REAL_KINDS = "fiu"  # numpy dtype kinds an input may have: float, signed and unsigned integer

HELP = (
    "run MODEL.onnx (or a compiled .npz) for --target cpu|cpu-int8|gpu|vta on --device sim, rtl,"
    " pynq, tcp://HOST:PORT, cuda, cuda-emulated; per-layer report"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file, or an artifact written by pyvta compile")
    add_target_arguments(p)
    add_config_argument(p)
    p.add_argument(
        "--input",
        action="append",
        metavar="[NAME=]X.npy",
        help="an input array (repeat NAME=X.npy for a model with several inputs; default:"
        " seeded random)",
    )
    p.add_argument(
        "--input-shape",
        action="append",
        dest="input_shape",
        metavar="NAME=1,3,224,224",
        help="compiling an ONNX file with symbolic dimensions: the shape of input NAME",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=25, help="rows of the per-layer table (0: all)")
    p.add_argument(
        "--runs",
        type=int,
        default=1,
        help="inferences (the table shows the last: the first also starts threads and touches memory)",
    )
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
    add_partition_argument(p)
    add_keep_float_argument(p)
    add_other_cpu_records_argument(p)
    p.add_argument(
        "--bitstream", metavar="DIR", help="pynq: the bitstream folder (manifest, .bit, .hwh)"
    )
    p.add_argument("--key-file", dest="key_file", help="--device tcp://HOST:PORT: the server's key")


def run(args: argparse.Namespace) -> int:
    from pyvta.cache import atomic_output
    from pyvta.commands.common import CommandError, config_from, output_path

    if args.runs < 1:
        raise CommandError(f"--runs must be >= 1, got {args.runs}")
    input_files = _name_values(args.input or [], "--input")
    save = None
    if args.save_output:
        inputs = (args.model, *input_files.values())
        save = output_path(args.save_output, ".npy", inputs=inputs, flag="--save-output")
    from pyvta.commands.vocabulary import resolve

    spec, device = resolve(args.target, args.device)
    _check_device_options(args, device if spec.accelerator else None)
    if device is not None:
        spec.probe(device)  # no GPU: said before anything is compiled
    hw = config_from(args) if args.config else None
    cm = compile_for(
        args.model,
        spec,
        hw=hw,
        tuning_log=args.tuning_log,
        search=args.search,
        calibration=args.calibration,
        input_shapes=input_shapes(args.input_shape or []),
        partition=args.partition,
        batch=args.batch,
        keep_float=keep_float_of(args.keep_float),
        other_cpu_records=args.other_cpu_records,
    )
    feeds = model_inputs(cm, input_files, args.seed)
    vta = backends = None
    if spec.accelerator:
        kwargs = {"bitstream": args.bitstream} if args.bitstream else {}
        kwargs.update({"key_file": args.key_file} if args.key_file else {})
        vta = open_accelerator(cm, device, **kwargs)
        backends = {spec.placement: vta}
    elif device is not None:  # the GPU's kernels on cuda or cuda-emulated
        backends = {spec.placement: spec.open_backend(cm, device)}
    from pyvta.runtime.compiled_model import prepare

    executor = prepare(cm, backends=backends)  # loaded before the first inference is timed
    first, walls = None, []
    for i in range(args.runs):
        start = len(vta.runs) if vta is not None else 0
        t0 = time.perf_counter()
        outputs, table = executor.run(feeds)
        walls.append(time.perf_counter() - t0)
        first = first or (outputs, table)
        runs = vta.runs[start:] if vta is not None else None
        extra = f"; {vta_summary(vta, runs)}" if runs else ""
        print(f"inference {i + 1}: {_duration(walls[-1])} wall{extra}")
    if args.runs > 1:  # the first also starts what later ones find started (threads, memory)
        rest = float(np.median(walls[1:]))
        print(
            f"the table: inference {args.runs}; the first took {_duration(walls[0])}, the"
            f" others {_duration(rest)} (median)"
        )
    print(table.format(top=args.top or None))
    if spec.accelerator:
        print("\n".join(plan_lines(cm.graph)))
    out = first[0][0]
    if save is not None:
        with atomic_output(save) as tmp:
            np.save(tmp, out)
        print(f"first output written to {save}")
    print(f"output {list(out.shape)}")
    rows = out.reshape(out.shape[0], -1) if out.ndim > 1 else out.reshape(1, -1)
    for i, row in enumerate(rows):  # one line per sample of the batch
        top5 = np.argsort(row)[::-1][:5]
        print(f"  sample {i}: top-5 classes {top5.tolist()}")
    return 0


def _check_device_options(args: argparse.Namespace, device: str | None) -> None:
    """--bitstream is for a board (pynq), --key-file for a served device (tcp://...): the
    devices whose ``driver.open`` takes that option."""
    from pyvta.commands.common import CommandError
    from pyvta.driver import device_options

    takes = device_options(device) if device is not None else frozenset()
    for flag, given, option, where in (
        ("--bitstream", args.bitstream, "bitstream", "--device pynq"),
        ("--key-file", args.key_file, "key_file", "--device tcp://HOST:PORT"),
    ):
        if given and option not in takes:
            here = f"--target {args.target or NETWORK_DEFAULT}" + (
                f" --device {device}" if device else ""
            )
            raise CommandError(f"{flag} applies to {where}, not {here}")


def _name_values(items: list[str], flag: str) -> dict[str | None, str]:
    """``["x.npy"]`` -> {None: "x.npy"}; ``["a=x.npy", "b=y.npy"]`` -> {"a": ..., "b": ...}."""
    from pyvta.commands.common import CommandError

    out: dict[str | None, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        key = name if sep else None
        value = value if sep else item
        if key in out or (None in out and len(items) > 1):
            raise CommandError(f"{flag}: give each input once, as NAME=FILE when there are several")
        out[key] = value
    return out


def input_shapes(items: list[str]) -> dict[str, tuple[int, ...]] | None:
    """``--input-shape NAME=1,3,224,224`` (repeatable) -> {NAME: (1, 3, 224, 224)}."""
    from pyvta.commands.common import CommandError

    shapes = {}
    for name, text in _name_values(items, "--input-shape").items():
        try:
            dims = tuple(int(d) for d in text.split(","))
        except ValueError:
            dims = ()
        if name is None or not dims or min(dims) < 1:
            raise CommandError(
                f"--input-shape {text!r}: give NAME=D0,D1,... with positive dimensions"
            )
        shapes[name] = dims
    return shapes or None


def model_inputs(cm, files: dict, seed: int) -> dict[str, np.ndarray]:
    """Each graph input from its file (checked against the model's shape) or seeded random."""
    from pyvta.commands.common import CommandError

    names = cm.input_names
    if None in files:
        if len(names) != 1:
            raise CommandError(f"the model has inputs {names}: give each as --input NAME=X.npy")
        files = {names[0]: files[None]}
    unknown = sorted(set(files) - set(names))
    if unknown:
        raise CommandError(f"--input names {unknown} are not inputs of the model ({names})")
    feeds = {}
    for name in names:
        shape = cm.graph.values[name].shape
        if name in files:
            try:
                x = np.load(files[name], allow_pickle=False)
            except (ValueError, EOFError) as e:  # not a .npy (or an .npz archive)
                raise CommandError(
                    f"--input {name}={files[name]}: not a .npy array ({e})"
                ) from None
            if not isinstance(x, np.ndarray):  # an .npz archive
                raise CommandError(
                    f"--input {name}={files[name]}: an .npz archive; give one array as .npy"
                )
            if x.dtype.kind not in REAL_KINDS or tuple(x.shape) != tuple(shape):
                raise CommandError(
                    f"--input {name}={files[name]}: {x.dtype} {list(x.shape)}; the model takes"
                    f" float32 {list(shape)} (a float or integer array; complex, bool, object,"
                    " string and structured arrays are refused)"
                )
            feeds[name] = x.astype(np.float32)
        else:
            feeds[name] = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
            print(f"input {name}: seeded standard-normal {list(shape)} (seed {seed})")
    return feeds


def _duration(seconds: float) -> str:
    """``seconds`` as ms below a second (a CPU inference), else as s (a simulated one)."""
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"
