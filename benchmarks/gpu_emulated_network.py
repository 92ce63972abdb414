"""Zoo networks through the ``gpu`` target without a GPU: every node's PTX compiled and
assembled by ptxas (sm_80 and sm_90: kernel counts, registers, spills), then one inference
through ``cuda-emulated`` against the float CPU backend and onnxruntime (accuracy; times in the
same run). The emulation's times say how long CI takes, nothing about a GPU's speed.

    .venv/bin/python benchmarks/gpu_emulated_network.py --model resnet18 --size 32
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.compiler.backend.cuda import LIMITS
from pyvta.compiler.backend.cuda.ptxas import assemble
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine, onnxruntime_session
from pyvta.compiler.graph.zoo import sample_inputs, save_model
from pyvta.compiler.targets.gpu.kernels import compile_gpu_kernels
from pyvta.runtime.compiled_model import run_model

SEED = 7


def _ptxas_report(graph, kernels_by_arch) -> None:
    for arch, kernels in kernels_by_arch.items():
        unique = {k.ptx for k in kernels.values()}
        res = [r for ptx in unique for r in assemble(ptx, arch).values()]
        print(
            f"  ptxas {arch}: {len(kernels)} kernel nodes, {len(unique)} distinct modules,"
            f" {len(res)} kernels assembled; max {max(r.registers for r in res)} registers"
            f" (limit {LIMITS[arch].max_registers_per_thread}), max"
            f" {max(r.shared_bytes for r in res)} B shared, {sum(r.spill_bytes for r in res)} B"
            " spilled"
        )


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, 1e3 * (time.perf_counter() - t0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18", choices=["resnet18", "resnet34", "mobilenet"])
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--race-check", action="store_true", help="also run reverse thread order")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = save_model(args.model, str(Path(d) / "m.onnx"), size=args.size, classes=args.classes)
        cm, compile_ms = _timed(lambda: compile_model(path, "gpu"))
        print(
            f"{args.model} {args.size}x{args.size}: compile --target gpu (PTX sm_90) {compile_ms / 1e3:.1f} s"
        )
        sm80 = compile_gpu_kernels(cm.graph, "sm_80")
        _ptxas_report(cm.graph, {"sm_80": sm80, "sm_90": cm.gpu_kernels})
        x = sample_inputs(1, args.size, SEED)[0]
        _, build_ms = _timed(lambda: cm.gpu_backend("cuda-emulated", args.race_check))
        backends = {"gpu": cm.gpu_backend("cuda-emulated", args.race_check)}
        run_model(cm, x, backends=backends)  # warm
        ((out,), _), emu_ms = _timed(lambda: run_model(cm, x, backends=backends))
        cpu = compile_model(path, "cpu")
        run_model(cpu, x)
        ((ref_cpu,), _), cpu_ms = _timed(lambda: run_model(cpu, x))
        sess = onnxruntime_session(path)
        sess.run(None, {"input": x})
        (ref,), ort_ms = _timed(lambda: sess.run(None, {"input": x}))
    for what, r in (("onnxruntime", ref), ("cpu backend", ref_cpu)):
        err = float(np.abs(out - r).max() / np.abs(r).max())
        same = int(np.argmax(out)) == int(np.argmax(r))
        print(
            f"  emulated vs {what}: max |err| / max |ref| {err:.2e}, cosine"
            f" {cosine(out, r):.9f}, top-1 {'equal' if same else 'DIFFERENT'}"
        )
    print(
        f"  emulated build {build_ms / 1e3:.1f} s; one inference: emulated {emu_ms:.1f} ms,"
        f" cpu backend {cpu_ms:.1f} ms, onnxruntime (1 thread) {ort_ms:.1f} ms;"
        f" emulated / onnxruntime {emu_ms / ort_ms:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
