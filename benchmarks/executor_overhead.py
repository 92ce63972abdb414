"""The graph executor's cost per node on the compiled float CPU path (issue 36: small networks
are not overhead), beside onnxruntime on the same model.

Run: .venv/bin/python benchmarks/executor_overhead.py [--rounds 200] [--threads 1] [--profile]
     [--target cpu|cpu-int8]

Each model is an ONNX file compiled with ``compile_model(path, "cpu")`` (``--target cpu-int8``:
the int8 graph, its int8 and (de)quantize kernels' bound calls counted as kernels; onnxruntime
runs the float model). Per inference, the
median over ``--rounds`` (interleaved, one inference at a time per round, in an order that
rotates: on more than one thread the first run after another runtime's pays for waking its
thread pool) of:

- ``run_model``: the public call, as ``pyvta run`` makes it;
- ``Executor.run``: one executor made once, run again and again;
- ``new x``: that executor given a new input array every inference (copies of the same
  input, as a caller's new images would be);
- ``kernels``: the compiled kernels alone, their bound calls (``Module.bind``, on the buffers
  the backend bound them to) called back to back; the numpy nodes (reshape, flatten, ...)
  count as overhead, not kernels;
- ``onnxruntime``: a session of the same ONNX file (spinning off).

Overhead per node = (Executor.run - kernels) / nodes of the compiled graph (likewise for
run_model, ``rm``, and a new input, ``new x``), from the medians and, in a second table, from
the minimums (the least disturbed rounds). ``--profile`` prints cProfile's top functions of ``Executor.run`` on the first
model. Outputs are checked against onnxruntime (max abs difference / max abs value < 1e-4).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import onnxruntime_session
from pyvta.compiler.targets import get_target
from pyvta.compiler.targets.cpu.kernels import CpuKernels
from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.executor import Executor
from pyvta.runtime.ir import HOST

MAX_REL_ERR = 1e-4


def tiny_chain(length: int = 12, channels: int = 16, size: int = 8) -> onnx.ModelProto:
    """A chain of tiny ops on a [1, C, H, W] tensor: 1x1 convs with relu and adds, then a
    flatten and a dense: every node's work is a few microseconds at most."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], {}, "input"
    for i in range(length):
        w = (rng.standard_normal((channels, channels, 1, 1)) / channels**0.5).astype(np.float32)
        inits[f"w{i}"] = w
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        nodes.append(helper.make_node("Add", [f"r{i}", x], [f"a{i}"]))
        x = f"a{i}"
    inits["fc"] = (rng.standard_normal((channels * size * size, 10)) / 32).astype(np.float32)
    nodes.append(helper.make_node("Flatten", [x], ["flat"], axis=1))
    nodes.append(helper.make_node("MatMul", ["flat", "fc"], ["output"]))
    return zoo.float_model(
        nodes, {"input": (1, channels, size, size)}, {"output": (1, 10)}, inits, name="chain"
    )


MODELS = {
    "mobilenet 28x28 w8": lambda: zoo.mobilenet(size=28, classes=10, width=8),
    "mobilenet 32x32 w16": lambda: zoo.mobilenet(size=32, classes=10, width=16),
    "tiny chain 16x8x8": tiny_chain,
}


CLOCK = [time.perf_counter]


def timed_ms(fn) -> float:
    clock = CLOCK[0]
    t0 = clock()
    fn()
    return 1e3 * (clock() - t0)


def kernel_calls(executor: Executor) -> list:
    """The bound kernel calls of the executor's CPU backend (after one run): a float graph's
    (``CpuKernels``), or an int8 graph's int8 and (de)quantize kernels and its float layers'."""
    backend = executor.backends["cpu"]
    calls = []
    if isinstance(backend, CpuInt8Kernels):
        calls = [c for k in backend.kernels.values() for c in getattr(k, "bound_calls", [])]
        calls += [k._call for k in getattr(backend, "scales", {}).values() if k._call]
        backend = backend.fallback
    return calls + [hit[1] for hit in backend._bound.values() if hit[1] is not None]


def run_all(calls) -> None:
    for c in calls:
        c()


def measure(
    name: str,
    model: onnx.ModelProto,
    rounds: int,
    threads: int,
    tmp: Path,
    profile: bool,
    target: str = "cpu",
) -> dict:
    path = tmp / f"{name.replace(' ', '_')}.onnx"
    onnx.save(model, str(path))
    cm = compile_model(path, target)
    shape = cm.graph.values[cm.input_names[0]].shape
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feeds = {cm.input_names[0]: x}
    quantized = get_target(target).quantized
    kind = CpuInt8Kernels if quantized else CpuKernels
    cpu = {HOST: kind(cm.graph, threads)}
    ex = Executor(cm.graph, backends=cpu)
    outs, _ = ex.run(feeds)
    sess = onnxruntime_session(path, threads=threads, spin=False)
    ref = sess.run(None, feeds)[0]
    if quantized:  # int8 differs from float (the kernels' bits: test_cpu_int8_kernels)
        cos = float((outs[0] * ref).sum() / (np.linalg.norm(outs[0]) * np.linalg.norm(ref)))
        print(f"{name}: int8 output's cosine to onnxruntime's float {cos:.4f}")
    else:
        err = float(np.abs(outs[0] - ref).max() / max(np.abs(ref).max(), 1e-30))
        if err > MAX_REL_ERR:
            raise SystemExit(
                f"{name}: pyvta differs from onnxruntime by {err:.2e} (> {MAX_REL_ERR})"
            )
    calls = kernel_calls(ex)
    keys = ("run_model", "executor", "new_input", "kernels", "ort")
    times: dict[str, list[float]] = {k: [] for k in keys}
    copies = [x.copy() for _ in range(8)]  # a caller's new input array per inference
    count = iter(range(1 << 62))
    for _ in range(10):  # warm up
        run_model(cm, feeds, backends=cpu), ex.run(feeds), run_all(calls), sess.run(None, feeds)
    runs = [
        ("run_model", lambda: run_model(cm, feeds, backends=cpu)),
        ("executor", lambda: ex.run(feeds)),
        ("new_input", lambda: ex.run({cm.input_names[0]: copies[next(count) % 8]})),
        ("kernels", lambda: run_all(calls)),
        ("ort", lambda: sess.run(None, feeds)),
    ]
    for i in range(rounds):  # the order rotates: whichever follows onnxruntime wakes a pool
        for key, fn in runs[i % 5 :] + runs[: i % 5]:
            times[key].append(timed_ms(fn))
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            ex.run(feeds)
        prof.disable()
        print(f"\ncProfile of 200 x Executor.run, {name}:")
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    nodes = len(cm.graph.nodes)
    out = {}
    for stat, f in (("median", statistics.median), ("min", min)):
        t = {k: f(v) for k, v in times.items()}
        out[stat] = {
            "name": name,
            "nodes": nodes,
            "compiled": len(calls),
            **t,
            "us_node_ex": 1e3 * (t["executor"] - t["kernels"]) / nodes,
            "us_node_rm": 1e3 * (t["run_model"] - t["kernels"]) / nodes,
            "us_node_new": 1e3 * (t["new_input"] - t["kernels"]) / nodes,
        }
    return out


def print_table(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    head = (
        f"{'model':<20} {'nodes':>5} {'kern':>4} {'run_model':>9} {'Executor':>9} {'new x':>7}"
        f" {'kernels':>8} {'onnxrt':>8} {'us/node ex':>10} {'rm':>5} {'new x':>5} {'ort/ex':>6}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['name']:<20} {r['nodes']:>5} {r['compiled']:>4} {r['run_model']:>9.3f}"
            f" {r['executor']:>9.3f} {r['new_input']:>7.3f} {r['kernels']:>8.3f} {r['ort']:>8.3f}"
            f" {r['us_node_ex']:>10.2f} {r['us_node_rm']:>5.2f} {r['us_node_new']:>5.2f}"
            f" {r['ort'] / r['executor']:>6.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile the first model's runs")
    ap.add_argument(
        "--target",
        default="cpu",
        choices=("cpu", "cpu-int8"),
        help="compile target (cpu-int8: the int8 graph's executor; onnxruntime runs float)",
    )
    args = ap.parse_args()
    CLOCK[0] = time.thread_time if args.threads == 1 else time.perf_counter
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for i, (name, build) in enumerate(MODELS.items()):
            rows.append(
                measure(
                    name,
                    build(),
                    args.rounds,
                    args.threads,
                    Path(d),
                    args.profile and i == 0,
                    args.target,
                )
            )
    how = (
        f"{args.target}, {args.rounds} rounds, {args.threads} threads, {CLOCK[0].__name__};"
        " ms per inference"
    )
    for stat in ("median", "min"):
        print_table([r[stat] for r in rows], f"{stat} of {how}")


if __name__ == "__main__":
    main()
