"""int8 networks on the CPU, batch 1: pyvta's ``cpu-int8`` target (compiled int8 kernels) against
onnxruntime's int8 QDQ model of the same graph, and against ``cpu-int8`` with numpy kernels
(what the target ran before the compiled kernels), in one process.

Run: .venv/bin/python benchmarks/cpu_int8.py [--models resnet18] [--size 224] [--rounds 10]
     [--threads 2] [--cpu-time]

The zoo's model at ``--size``, one seeded input. pyvta compiles it with ``compile_model(...,
"cpu-int8")`` (its default calibration: 8 seeded standard-normal samples) and runs it through
``Executor`` with its default backend (compiled) and with a numpy backend (``run_cpu_op`` on
every node); the two must agree bit for bit. onnxruntime quantizes the same ONNX file with
``quantize_static`` (QDQ, int8 activations and weights, per tensor, MinMax calibration on the
same samples) and runs it on ``--threads`` threads (spinning off); pyvta's compiled kernels
are built for the same count. Runs are interleaved one inference at a time per round; each
reports its median over the rounds. ``--cpu-time`` (with ``--threads 1``) times each
inference by the CPU time of the whole process (``time.process_time``) instead of the wall
clock: on a machine shared with other work it leaves out the time spent waiting for a core.
All threads count (the float first conv runs compiled on the host's threads, and a pool
thread spinning before it sleeps counts too), so it does not flatter pyvta. Ratio = onnxruntime /
pyvta (above 1: pyvta is faster). Accuracy: cosine of each int8 output against onnxruntime's
float output. Last, the compiled run's time split between the compiled int8 kernels and the
nodes still on numpy (the float first conv, max pool and last dense, (de)quantize).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model, default_calibration
from pyvta.compiler.graph.reference import cosine, onnxruntime_session
from pyvta.runtime.cpu_ops import KERNELS, run_cpu_op
from pyvta.runtime.executor import Executor
from pyvta.testing.side_by_side import qdq_model, timed_ms


class NumpyNodes:
    """Every ``cpu`` node numpy has a kernel for (``runtime.cpu_ops.KERNELS``) through it, as
    ``cpu-int8`` ran before its compiled kernels; the others (the float stem conv, compiled as
    a ``cpu_conv2d`` since) through ``compiled``, the compiled backend."""

    def __init__(self, compiled):
        self.compiled = compiled

    def run(self, node, args):
        if node.op in KERNELS:
            return run_cpu_op(node.op, args, node.attrs)
        return self.compiled.run(node, args)


def bench_model(
    name: str, size: int, rounds: int, threads: int, seed: int, clock=time.perf_counter
) -> dict[str, float]:
    from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels

    folder = Path(tempfile.mkdtemp(prefix="pyvta-bench-"))
    path = str(folder / f"{name}.onnx")
    zoo.save_model(name, path, size=size, seed=seed)
    x = zoo.sample_inputs(1, size, seed)[0]
    t0 = time.perf_counter()
    cm = compile_model(path, "cpu-int8")
    print(f"{name}: compile_model cpu-int8 {time.perf_counter() - t0:.1f} s")
    samples = default_calibration(cm.graph)
    qdq = qdq_model(path, samples, str(folder / f"{name}_qdq.onnx"))
    ort_f = onnxruntime_session(path, threads=threads, spin=False)
    ort_q = onnxruntime_session(qdq, threads=threads, spin=False)
    feeds = {"input": x}
    kernels = CpuInt8Kernels(cm.graph, threads)  # built for the run's thread count
    compiled = Executor(cm.graph, backends={"cpu": kernels})
    numpy_ex = Executor(cm.graph, backends={"cpu": NumpyNodes(kernels)})
    ref = ort_f.run(None, feeds)[0]
    out_c = compiled.run(feeds)[0][0]
    out_n = numpy_ex.run(feeds)[0][0]
    if not np.array_equal(out_c, out_n):
        raise SystemExit(f"{name}: compiled cpu-int8 differs from its numpy kernels")
    out_q = ort_q.run(None, feeds)[0]
    print(
        f"{name}: cosine to onnxruntime float: pyvta cpu-int8 {cosine(out_c, ref):.5f}, "
        f"onnxruntime QDQ {cosine(out_q, ref):.5f}; compiled == numpy bit for bit"
    )
    runs = {
        "pyvta cpu-int8": lambda: compiled.run(feeds),
        "onnxruntime int8 QDQ": lambda: ort_q.run(None, feeds),
        "pyvta cpu-int8 numpy": lambda: numpy_ex.run(feeds),
        "onnxruntime float": lambda: ort_f.run(None, feeds),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for key, fn in runs.items():
            times[key].append(timed_ms(fn, clock))
    med = {k: float(np.median(v)) for k, v in times.items()}
    parts = ", ".join(f"{k} {ms:.2f} ms" for k, ms in med.items())
    what = "process CPU time" if clock is time.process_time else "wall"
    print(f"{name} {size}x{size}: {parts} ({what}, median of {rounds})")
    mine = med["pyvta cpu-int8"]
    print(
        f"{name}: onnxruntime int8 / pyvta cpu-int8 = {med['onnxruntime int8 QDQ'] / mine:.2f}x;"
        f" numpy cpu-int8 / compiled = {med['pyvta cpu-int8 numpy'] / mine:.2f}x"
    )
    split: dict[str, list[float]] = {"int8 kernels": [], "the rest (numpy)": []}
    for _ in range(rounds):  # where one inference's time goes (its own median)
        _, table = compiled.run(feeds)
        mine = sum(r.ms for r in table.rows if r.node in compiled.backends["cpu"].kernels)
        split["int8 kernels"].append(mine)
        split["the rest (numpy)"].append(table.total_ms - mine)
    parts = ", ".join(f"{k} {np.median(v):.2f} ms" for k, v in split.items())
    print(f"{name} cpu-int8 per inference: {parts}; the slowest nodes of the last run:")
    print(table.format(top=6))
    return med


def main() -> None:
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.int8 import dot_form, dot_isa

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cpu-time", dest="cpu_time", action="store_true",
        help="time by the process's CPU time (needs --threads 1)",
    )  # fmt: skip
    args = ap.parse_args()
    if args.cpu_time and args.threads != 1:
        ap.error("--cpu-time needs --threads 1 (CPU time adds up the threads' times)")
    clock = time.process_time if args.cpu_time else time.perf_counter
    target = CpuTarget.host(args.threads)  # PYVTA_CPU_FEATURES may limit it (e.g. avx2)
    isa = dot_isa(target.feature_dict)
    print(f"host: {target.description}, int8 dot products: {isa} ({dot_form(isa)} form, "
          f"{target.vector_lanes('int32')} int32 lanes); onnxruntime and pyvta on"
          f" {args.threads} threads")  # fmt: skip
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for m in args.models.split(","):
        bench_model(m, args.size, args.rounds, args.threads, args.seed, clock)


if __name__ == "__main__":
    main()
