"""pyvta demo: the main demo. ResNet-18 (generated, seeded weights) compiled for the accelerator,
run on the simulated VTA with a per-layer report, and checked bit for bit against the same
quantized graph on the CPU. ``pyvta demo gemm``: a hand-built int8 GEMM program instead."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta import cache, sim
from pyvta.cache import atomic_output
from pyvta.commands.common import CommandError, output_path
from pyvta.sim.programs import matmul_program

HELP = "run the main demo: ResNet-18 on the simulated accelerator (or: demo gemm)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", nargs="?", choices=("resnet18", "gemm"), default="resnet18")
    p.add_argument("--seed", type=int, default=0, help="random seed (input / matrices)")
    p.add_argument("--size", type=int, default=224, help="ResNet-18 input size (default 224)")
    p.add_argument(
        "--search",
        type=int,
        default=6,
        help="configs measured on the cycle model per layer (0: analytic default)",
    )
    p.add_argument(
        "--untuned",
        action="store_true",
        help="ignore the shipped per-layer tuned configs (use --search per layer instead)",
    )
    p.add_argument("--m", type=int, default=256, help="gemm: rows of A")
    p.add_argument("--k", type=int, default=256, help="gemm: columns of A (multiple of 16)")
    p.add_argument("--n", type=int, default=256, help="gemm: columns of B (multiple of 16)")
    p.add_argument("--trace", metavar="T.json", help="gemm: write a Perfetto trace")
    p.add_argument("--save", metavar="BUNDLE.npz", help="gemm: save the program bundle")


def run(args: argparse.Namespace) -> int:
    if args.search < 0:
        raise CommandError(f"--search {args.search}: must be >= 0 (0: the analytic default)")
    return _resnet18(args) if args.what == "resnet18" else _gemm(args)


def _model_path(size: int) -> Path:
    from pyvta.compiler.graph.zoo import save_model

    root = cache.folder("models")
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"resnet18_{size}.onnx"
    if not path.exists():
        print(
            f"generating ResNet-18 ({size}x{size}, seeded weights, batch-norm statistics from"
            f" sample inputs) -> {path}"
        )
        tmp = Path(tempfile.mkstemp(suffix=".onnx", dir=root)[1])
        save_model("resnet18", str(tmp), size=size)
        tmp.replace(path)
    return path


def _resnet18(args) -> int:
    from pyvta.commands.network import compile_for, open_accelerator, vta_summary
    from pyvta.runtime.compiled_model import run_model
    from pyvta.tuner.network import pretuned_log

    path = _model_path(args.size)
    log = None if args.untuned else pretuned_log(f"resnet18_{args.size}")
    t0 = time.perf_counter()
    cm = compile_for(path, "vta", tuning_log=log, search=args.search)
    how = "shipped tuned configs" if log else f"config search {args.search}"
    print(f"compiled with its accelerator kernels ({how}) in {time.perf_counter() - t0:.1f} s")
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
    print(f"input: seeded standard-normal {list(shape)} (seed {args.seed})")
    vta = open_accelerator(cm, "sim")
    t0 = time.perf_counter()
    (out_vta,), table = run_model(cm, x, backends={"vta": vta})
    print(
        f"\nfirst inference on the simulated accelerator ({time.perf_counter() - t0:.1f} s wall):"
    )
    print(table.format(top=20))
    print(vta_summary(vta))
    t0 = time.perf_counter()
    (out_cpu,), _ = run_model(cm, x)  # the same quantized graph, accelerator nodes on the CPU
    same = out_vta.shape == out_cpu.shape and np.array_equal(out_vta, out_cpu)
    print(
        f"\ncheck against the same quantized graph on the CPU ({time.perf_counter() - t0:.1f} s):"
        f" {'BIT-EXACT MATCH' if same else 'MISMATCH'}"
    )
    try:
        from pyvta.compiler.graph.reference import cosine, onnxruntime_session

        sess = onnxruntime_session(path, threads=0)  # every core, as onnxruntime chooses
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0].reshape(-1)
        got = out_vta.reshape(-1).astype(np.float64)
        cos = cosine(ref, got)
        print(
            f"against the float model (onnxruntime): cosine {cos:.4f}, top-1"
            f" {int(np.argmax(got))} vs {int(np.argmax(ref))}"
        )
    except ImportError:
        pass
    return 0 if same else 1


def _gemm(args) -> int:
    for flag, value in (("--m", args.m), ("--k", args.k), ("--n", args.n)):
        if value < 1:
            raise CommandError(f"{flag} {value}: a matrix dimension must be >= 1")
    save = args.save and output_path(args.save, ".npz", flag="--save")
    trace = args.trace and output_path(args.trace, ".json", inputs=(save,), flag="--trace")
    rng = np.random.default_rng(args.seed)
    print(
        f"pyvta demo gemm: C = A @ B, int8 x int8 -> int32, A {args.m}x{args.k},"
        f" B {args.k}x{args.n}, seed {args.seed}"
    )
    a = rng.integers(-128, 128, (args.m, args.k), dtype=np.int8)
    b = rng.integers(-128, 128, (args.k, args.n), dtype=np.int8)
    ex = matmul_program(a, b)
    program = ex.program
    print(
        f"program: {program.insn_count} instructions, DRAM image {program.dram.size} bytes,"
        f" config {program.config.tag}"
    )
    if save:
        with atomic_output(save) as tmp:
            program.save(tmp)
        print(f"bundle saved to {save}")
    t0 = time.perf_counter()
    result = sim.run(program)
    wall_s = time.perf_counter() - t0
    got = ex.readback(result.dram)
    ok = np.array_equal(got, a.astype(np.int32) @ b.astype(np.int32))
    print(
        f"functional simulation: {wall_s * 1e3:.1f} ms wall,"
        f" {result.counters.macs / wall_s / 1e9:.2f} G simulated MACs/s"
    )
    print(f"  {result.counters.summary()}")
    print(
        f"check against numpy int32 product: {'EXACT MATCH' if ok else 'MISMATCH'}"
        f" ({got.size} values)"
    )
    report = sim.run_cycles(program, trace=bool(args.trace))
    print("cycle model:")
    print("  " + report.table().replace("\n", "\n  "))
    if trace:
        with atomic_output(trace) as tmp:
            sim.write_trace(report, tmp)
        print(f"trace written to {trace} (open in https://ui.perfetto.dev)")
    return 0 if ok else 1
