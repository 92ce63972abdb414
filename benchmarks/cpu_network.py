"""Whole networks on the CPU, float32 batch 1: pyvta's compiled CPU target (default schedules,
and tuned ones from a tuning log) against onnxruntime on the same thread count.

Run: .venv/bin/python benchmarks/cpu_network.py [--models resnet18,resnet34,mobilenet]
     [--rounds 10] [--threads 2] [--tuning-log LOG.jsonl]

The zoo's models (``pyvta.compiler.graph.zoo``) at 224x224, one seeded input. pyvta runs
``compile_model(..., "cpu")``'s artifact through ``run_model`` (the path ``pyvta run --target
cpu`` takes: NCHW16c kernels, fused epilogues, one arena), with the default schedules and,
when a log has records for the model's layers (``pyvta tune MODEL --target cpu``; default: the
shipped log ``tuner/pretuned/resnet18_224_cpu.jsonl`` for every model), the tuned ones.
onnxruntime runs the same ONNX file (``onnxruntime_session``, spinning off, so its idle pool
does not slow what runs beside it). Runs are interleaved one inference at a time per round on
this shared machine; each reports its median over the rounds. Outputs must agree with
onnxruntime within 1e-4 (max abs difference / max abs value). Ratio = onnxruntime / pyvta.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compiled_model import compile_model, run_model
from pyvta.compiler.graph.reference import onnxruntime_session

MAX_REL_ERR = 1e-4


def timed_ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(a - ref).max() / np.abs(ref).max())


def bench_model(name: str, size: int, rounds: int, threads: int, log: str | None, seed: int):
    from pyvta.tuner.cpu_network import tuned_schedules

    path = str(Path(tempfile.mkdtemp(prefix="pyvta-bench-")) / f"{name}.onnx")
    zoo.save_model(name, path, size=size, seed=seed)
    x = zoo.sample_inputs(1, size, seed)[0]
    sess = onnxruntime_session(path, threads=threads, spin=False)
    ref = sess.run(None, {"input": x})[0]
    runs = {"onnxruntime": lambda: sess.run(None, {"input": x})}
    models = {"default": compile_model(path, "cpu")}
    if log is not None:
        schedules = tuned_schedules(path, log)
        if schedules:
            models["tuned"] = compile_model(path, "cpu", cpu_schedules=schedules)
            print(f"{name}: {len(schedules)} tuned layer schedules from {log}")
    for key, cm in models.items():
        out = run_model(cm, x)[0][0]
        err = rel_err(out, ref)
        print(f"{name} {key}: relative error {err:.2e} against onnxruntime")
        assert err < MAX_REL_ERR, f"{name} {key}: wrong result ({err:.3g} >= {MAX_REL_ERR})"
        runs[key] = lambda cm=cm: run_model(cm, x)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for key, fn in runs.items():
            times[key].append(timed_ms(fn))
    med = {k: float(np.median(v)) for k, v in times.items()}
    parts = ", ".join(f"{k} {ms:.2f} ms" for k, ms in med.items())
    ratios = {k: med["onnxruntime"] / med[k] for k in models}
    rtxt = ", ".join(f"{k} {r:.2f}x" for k, r in ratios.items())
    print(f"{name} {size}x{size}: {parts} (median of {rounds}); vs onnxruntime: {rtxt}")
    return ratios


def main() -> None:
    from pyvta.tuner.cpu import cpu_target_info
    from pyvta.tuner.cpu_network import pretuned_cpu_log

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet34,mobilenet")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tuning-log", dest="tuning_log", help="default: the shipped ResNet-18 log")
    args = ap.parse_args()
    log = args.tuning_log or pretuned_cpu_log("resnet18_224")
    print(f"host: {cpu_target_info()}; onnxruntime on {args.threads} threads")
    if args.threads != (os.cpu_count() or 1):
        print(f"note: pyvta's kernels use all {os.cpu_count()} cores (threads are fixed at build)")
    summary = {m: bench_model(m, args.size, args.rounds, args.threads, log and str(log),
                              args.seed) for m in args.models.split(",")}  # fmt: skip
    for key, target in (("tuned", 1.0), ("default", 0.8)):
        got = {m: r[key] for m, r in summary.items() if key in r}
        if got:
            line = ", ".join(f"{m} {r:.2f}x" for m, r in got.items())
            print(f"{key} vs onnxruntime: {line} (target >= {target}x on each)")


if __name__ == "__main__":
    main()
