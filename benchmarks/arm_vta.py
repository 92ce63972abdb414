"""A ResNet-18 compiled for VTA on a PYNQ-Z2 (``pyvta compile --target vta --board pynq-z2``),
its CPU part as Cortex-A9 code in the artifact, run on the emulated armhf userland with the
accelerator's layers on the simulator device, against the same artifact's numpy fallback there
and against this x86 host. Bit for bit is the claim checked; no time is claimed (qemu's
seconds say nothing about a Cortex-A9).

Run: .venv/bin/python -P benchmarks/arm_vta.py [--size 224] [--classes 1000] [--arches armhf]
     [--partition legacy]

``--partition legacy`` (the default here) keeps the float stem conv, the pools and the
classifier on the board's CPU: the layers whose products the shared object computes
(``cpu_llvm.gemm``); ``whole`` puts the network on the accelerator (only quantize, the stem's
fold, unpack and dequantize stay on the CPU: no compiled CPU kernel). On x86 the artifact runs
three times: with the host's JIT kernels for those products, with numpy's, and with a shared
object for x86 without FMA (the ``sse`` level, as the A9: no fused multiply-add).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta import driver
from pyvta.compiler.backend.llvm.target import CpuTarget
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.cpu_cross import cross_compile_cpu
from pyvta.compiler.graph.zoo import save_model
from pyvta.hw.boards import BOARDS
from pyvta.runtime import cpu_llvm
from pyvta.runtime.compiled_model import CompiledModel, run_model
from pyvta.testing.arm import agreement, arm_python, pyvta_site, run_on_arm
from pyvta.testing.board import ARM_CPUS

SEED = 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--arches", default="armhf")
    ap.add_argument("--partition", default="legacy", choices=["legacy", "whole"])
    args = ap.parse_args()
    board = BOARDS["pynq-z2"]
    print(
        f"seed {SEED}; ResNet-18 {args.size}x{args.size}, {args.classes} classes; vta"
        f" ({args.partition} partition) for {board.name} (CPU {board.ps.cpu})"
    )
    with tempfile.TemporaryDirectory(prefix="pyvta-arm-vta-") as tmp:
        tmp = Path(tmp)
        onnx = tmp / "r18.onnx"
        save_model("resnet18", str(onnx), size=args.size, classes=args.classes, seed=SEED)
        t0 = time.perf_counter()
        cm = compile_model(onnx, "vta", vta_partition=args.partition)
        print(f"compiled in {time.perf_counter() - t0:.0f} s")
        shape = cm.graph.values[cm.input_names[0]].shape
        x = np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)
        (x86_jit,), _ = run_model(cm, x, device=driver.open("sim", config=cm.hw))
        with cpu_llvm.numpy_only():
            (x86_numpy,), _ = run_model(cm, x, device=driver.open("sim", config=cm.hw))
        # the same artifact with its CPU products from a shared object for x86 without FMA (the
        # sse level: 128-bit vectors, no fused multiply-add, as the Cortex-A9)
        cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.of_cpu("x86-64", "sse"))
        no_fma = CompiledModel.load(cm.save(tmp / "vta-sse.npz"))
        cm.cpu_code = None
        (x86_sse,), _ = run_model(no_fma, x, device=driver.open("sim", config=cm.hw))
        print(
            f"x86: JIT kernels vs numpy for the CPU layers' products: {agreement(x86_jit, x86_numpy)}"
        )
        site = pyvta_site(tmp)
        for arch in args.arches.split(","):
            cpu = ARM_CPUS[arch]
            code = cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.cross(cpu))
            path = cm.save(tmp / f"vta-{arch}.npz")
            cm.cpu_code = None
            what = f"{len(code.gemms)} GEMM kernels" if code else "no CPU kernel"
            python = arm_python(arch)
            y, rep = run_on_arm(python, site, path, x, tmp / f"y-{arch}.npy", device="sim")
            y_np, rep_np = run_on_arm(
                python, site, path, x, tmp / f"y-{arch}-np.npy", numpy=True, device="sim"
            )
            print(
                f"{arch} {rep['machine']} py {rep['python']} numpy {rep['numpy']}:"
                f" {rep['cpu_code']}, {what}"
                f" ({len(path.read_bytes()) >> 10} KiB artifact; emulated runs {rep['seconds']} s"
                f" / {rep_np['seconds']} s); vs its numpy fallback there: {agreement(y, y_np)};"
                f" vs x86 JIT: {agreement(y, x86_jit)}; vs x86 numpy: {agreement(y, x86_numpy)};"
                f" vs x86 without FMA (sse): {agreement(y, x86_sse)};"
                f" top-1 {'same' if y.argmax() == x86_jit.argmax() else 'DIFFERS'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
