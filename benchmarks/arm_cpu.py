"""The CPU-only ResNet-18 (float32 and int8) built for the boards' ARM CPUs and run on the
emulated ARM userlands, against the same models on this x86 host: the "CPU only on the board"
baseline, ready to be timed on a real board. No time is claimed: qemu's seconds say nothing
about a Cortex-A9 or A53 (they are printed only to show what ran).

Run: .venv/bin/python benchmarks/arm_cpu.py [--size 224] [--classes 1000] [--arches armhf,arm64]

For each arch (``scripts/arm_userland.sh``: armhf = Cortex-A9 of PYNQ-Z1/Z2, arm64 = Cortex-A53
of Ultra96/ZCU104), ``compile_model(..., "cpu" | "cpu-int8")`` with its CPU kernels
cross-compiled for that CPU (``pyvta compile --board``), run once there from the shared
object. Float: max |ARM - x86| / max |x86| (the JIT's kernels on x86; the same loop IR, other
rounding: the A9 has no fused multiply-add); int8 likewise (its float first conv, pools and
classifier are blocked compiled kernels too, so the artifact has no numpy version to compare
with on the ARM: the board tests check the int8 kernels against the host instead). Last
column: the ARM's output against the same artifact on x86 with its kernels from a shared object
for x86 without FMA (the ``sse`` level: 128-bit vectors, no fused multiply-add, as the A9), which
tells whether a difference from x86 is the rounding of a CPU without FMA.

Rows ``cpu-int8/none``: the int8 model with every conv and dense int8 (``pyvta compile --target
cpu-int8 --keep-float none``): no float value feeds a quantize, so the ARM's output should be the
same bits as x86's JIT (this host's level), as x86's shared objects for ``avx2`` and ``sse``
(columns ``vs x86 avx2``, ``vs x86 without FMA (sse)``); the default int8 rows (float first conv
and classifier) show what it avoids.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.compiler.backend.llvm.target import CpuTarget
from pyvta.compiler.graph import KeepFloat
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.cpu_cross import cross_compile_cpu
from pyvta.compiler.graph.zoo import save_model
from pyvta.runtime.compiled_model import CompiledModel, run_model
from pyvta.testing.arm import agreement, arm_python, pyvta_site, run_on_arm
from pyvta.testing.board import ARM_CPUS

SEED = 0
VARIANTS = {"cpu": ("cpu", None), "cpu-int8": ("cpu-int8", None)}
VARIANTS["cpu-int8/none"] = ("cpu-int8", KeepFloat.NONE)  # every conv/dense int8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--arches", default="armhf,arm64")
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"rows to run, of {', '.join(VARIANTS)} (TARGET/KEEP: --keep-float KEEP)",
    )
    args = ap.parse_args()
    print(f"seed {SEED}; ResNet-18 {args.size}x{args.size}, {args.classes} classes")
    with tempfile.TemporaryDirectory(prefix="pyvta-arm-") as tmp:
        tmp = Path(tmp)
        onnx = tmp / "r18.onnx"
        save_model("resnet18", str(onnx), size=args.size, classes=args.classes, seed=SEED)
        site = pyvta_site(tmp)
        rows = []
        for label in args.variants.split(","):
            if label not in VARIANTS:
                ap.error(f"--variants: {label!r} (allowed: {', '.join(VARIANTS)})")
            target, keep = VARIANTS[label]
            cm = compile_model(onnx, target, keep_float=keep)
            shape = cm.graph.values[cm.input_names[0]].shape
            x = np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)
            (host,), _ = run_model(cm, x)
            # the same artifact on x86 with its kernels from a shared object for x86 at the avx2
            # level, and at the sse level: 128-bit vectors and no fused multiply-add, as on the
            # Cortex-A9
            x86 = {}
            for level in ("avx2", "sse"):
                cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.of_cpu("x86-64", level))
                other = CompiledModel.load(cm.save(tmp / f"{target}-{level}.npz"))
                cm.cpu_code = None
                (x86[level],), _ = run_model(other, x)
            line = (
                f"{label:<13} x86 JIT (this host's level) vs x86 avx2: {agreement(x86['avx2'], host)};"
                f" vs x86 sse: {agreement(x86['sse'], host)}"
            )
            print(line, flush=True)
            rows.append(line)
            stem = label.replace("/", "-")
            for arch in args.arches.split(","):
                t0 = time.perf_counter()
                cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.cross(ARM_CPUS[arch]))
                build_s = time.perf_counter() - t0
                path = cm.save(tmp / f"{stem}-{arch}.npz")
                cm.cpu_code = None
                python = arm_python(arch)
                y, rep = run_on_arm(python, site, path, x, tmp / f"y-{stem}-{arch}.npy")
                rel = float(np.abs(y - host).max() / np.abs(host).max())
                line = (
                    f"{label:<13} {arch:<5} {rep['machine']:<7} py {rep['python']} numpy"
                    f" {rep['numpy']}: {rep['shared_kernels']} kernels from {rep['cpu_code']}"
                    f" ({len(path.read_bytes()) >> 10} KiB artifact, cross-compiled in"
                    f" {build_s:.0f} s; emulated run {rep['seconds']} s); max|ARM-x86|/max|x86|"
                    f" {rel:.2e}, top-1 {'same' if y.argmax() == host.argmax() else 'DIFFERS'};"
                    f" vs x86 avx2: {agreement(y, x86['avx2'])}; vs x86 without FMA (sse):"
                    f" {agreement(y, x86['sse'])}"
                )
                print(line, flush=True)
                rows.append(line)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
