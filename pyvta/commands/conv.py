"""pyvta conv: compile one conv2d layer for the accelerator, show its instruction stream, run it
on a device (``--device``: the simulator by default) against a numpy reference, and write a
Perfetto trace (simulator)."""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyvta.cache import atomic_output
from pyvta.commands.common import (
    CommandError,
    add_config_argument,
    config_from,
    count_or_all,
    output_path,
)
from pyvta.compiler.backend.vta import (
    ConvConfig,
    ConvWorkload,
    Epilogue,
    VtaConv2d,
    pack_bias,
    pack_data,
    pack_weights,
    unpack_data,
)
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.compiler.backend.vta.workload import resnet18_workload
from pyvta.compiler.workloads import VTA_LAYERS
from pyvta.isa import disassemble

HELP = "compile a conv2d layer for VTA, print its instructions, simulate it, write a trace"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layer", choices=VTA_LAYERS, help="a ResNet-18 layer (default C9)")
    p.add_argument("--shape", metavar="H,W,CI,CO,K,STRIDE,PAD", help="any conv2d shape instead")
    p.add_argument("--vthreads", type=int, choices=(1, 2, 3, 4), help="virtual threads")
    p.add_argument("--tile", metavar="TH,TW,TCI,TCO", help="tile sizes (pixels, channel blocks)")
    p.add_argument("--shift", type=int, default=8, help="requantization shift (default 8)")
    p.add_argument("--no-relu", action="store_true")
    p.add_argument(
        "--disasm",
        metavar="N",
        type=count_or_all,
        default=40,
        help="print the first N instructions (default 40; -1: all)",
    )
    p.add_argument(
        "--device",
        default="sim",
        metavar="NAME",
        help="where the layer runs: a driver.open name (sim, the default; rtl, rtl:cocotb, pynq,"
        " tcp://HOST:PORT)",
    )
    p.add_argument("--key-file", dest="key_file", help="--device tcp://HOST:PORT: the server's key")
    p.add_argument("--bitstream", metavar="DIR", help="--device pynq: the bitstream folder")
    p.add_argument(
        "--trace", metavar="T.json", help="write a Perfetto trace of the cycle model (--device sim)"
    )
    p.add_argument(
        "--save", metavar="BUNDLE.npz", help="save the program bundle (for pyvta sim / hw run)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--search",
        type=int,
        default=6,
        help="configs measured on the cycle model for the default (0: analytic only)",
    )
    add_config_argument(p)


def _workload(args) -> ConvWorkload:
    if args.shape:
        try:
            h, w, ci, co, k, s, pad = (int(v) for v in args.shape.split(","))
        except ValueError:
            raise CommandError(
                f"--shape wants 7 integers H,W,CI,CO,K,STRIDE,PAD, got {args.shape!r}"
            ) from None
        return ConvWorkload(h, w, ci, co, k, k, s, pad)
    return resnet18_workload(args.layer or "C9")


def _config(args, wl, ep, hw) -> ConvConfig | None:
    from pyvta.compiler.backend.vta import default_config

    if not args.tile and not args.vthreads:
        return None
    base = default_config(wl, ep, hw, vthreads=args.vthreads)
    if args.tile:
        try:
            th, tw, tci, tco = (int(v) for v in args.tile.split(","))
        except ValueError:
            raise CommandError(
                f"--tile wants 4 integers TH,TW,TCI,TCO, got {args.tile!r}"
            ) from None
        base = ConvConfig(
            th, tw, tci, tco, base.vthreads if not args.vthreads else args.vthreads, base.gemm_loops
        )
    return base


def _open_device(args, hw):
    """The ``--device`` for ``hw``: the simulator keeps its cycle model (and ``--trace``)."""
    from pyvta import driver

    kwargs = {"key_file": args.key_file} if args.key_file else {}
    kwargs.update({"bitstream": args.bitstream} if args.bitstream else {})
    if "trace" in driver.device_options(args.device):
        kwargs["trace"] = bool(args.trace)
    elif args.trace:
        raise CommandError(
            f"--trace is the simulator's cycle model; not with --device {args.device}"
        )
    return driver.open(args.device, config=hw, **kwargs)


def run(args: argparse.Namespace) -> int:
    if args.search < 0:
        raise CommandError(f"--search {args.search}: must be >= 0 (0: analytic only)")
    save = args.save and output_path(args.save, ".npz", flag="--save")
    trace = args.trace and output_path(args.trace, ".json", inputs=(save,), flag="--trace")
    hw = config_from(args)
    wl = _workload(args)
    ep = Epilogue.requant(shift=args.shift, relu=not args.no_relu)
    rng = np.random.default_rng(args.seed)
    print(f"{wl} (seed {args.seed}); epilogue: bias, >> {ep.shift}, clip [{ep.lo}, {ep.hi}]")
    x = rng.integers(-128, 128, (1, wl.in_channels, wl.height, wl.width), dtype=np.int8)
    w = rng.integers(
        -128, 128, (wl.out_channels, wl.in_channels, wl.kernel_h, wl.kernel_w), dtype=np.int8
    )
    b = rng.integers(-(1 << 14), 1 << 14, wl.out_channels).astype(np.int32)
    dev = _open_device(args, hw)
    t0 = time.perf_counter()
    op = VtaConv2d(
        wl, ep, pack_weights(w), pack_bias(b), dev, _config(args, wl, ep, hw), search=args.search
    )
    print(f"compiled in {time.perf_counter() - t0:.2f} s: config {op.config.to_dict()}")
    print(f"{op.insn_count} instructions, {op.kernel.info['uops']} micro-ops")
    insns = op.insns()
    shown = insns if args.disasm < 0 else insns[: args.disasm]
    print(disassemble(shown))
    if len(shown) < len(insns):
        print(f"   ... {len(insns) - len(shown)} more (--disasm -1 shows all)")
    if save:
        if not hasattr(dev, "snapshot"):
            raise CommandError(
                f"--save writes the simulator's bundle; not with --device {args.device}"
            )
        dev.write(op.in_addr, pack_data(x))
        with atomic_output(save) as tmp:
            dev.snapshot(op.insn_addr, op.insn_count).save(tmp)
        print(f"bundle saved to {save}")
    result = op(pack_data(x))
    got = unpack_data(result.output, wl.out_channels)
    ok = np.array_equal(got, reference_conv(x, w, b, ep, wl))
    print(
        f"functional simulation {result.wall_s * 1e3:.1f} ms; check against numpy:"
        f" {'EXACT MATCH' if ok else 'MISMATCH'}"
    )
    if result.report is not None:
        print(result.report.table())
    elif result.cycles is not None:
        print(f"{args.device}: {result.cycles} cycles")
    if trace:
        from pyvta import sim

        with atomic_output(trace) as tmp:
            sim.write_trace(result.report, tmp)
        print(f"trace written to {trace} (open in https://ui.perfetto.dev)")
    return 0 if ok else 1
