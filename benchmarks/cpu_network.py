"""Whole networks on the CPU, float32 batch 1: pyvta's compiled CPU target (default schedules,
and tuned ones from a tuning log) against onnxruntime on the same thread count.

Run: .venv/bin/python benchmarks/cpu_network.py [--models resnet18,resnet34,mobilenet]
     [--rounds 10] [--threads 2] [--tuning-log LOG.jsonl] [--per-layer] [--cpu-time]
     [--control] [--also-log LOG2]

The zoo's models (``pyvta.compiler.graph.zoo``) at 224x224, one seeded input. pyvta runs
``compile_model(..., "cpu")``'s artifact through ``run_model`` (the path ``pyvta run --target
cpu`` takes: NCHW16c kernels, fused epilogues, one arena), with the default schedules and,
when a log has records for the model's layers (``pyvta tune MODEL --target cpu``; default: the
model's shipped log ``tuner/pretuned/MODEL_224_cpu.jsonl``, else ResNet-18's), the tuned ones.
onnxruntime runs the same ONNX file (``onnxruntime_session``, spinning off, so its idle pool
does not slow what runs beside it). Runs are interleaved one inference at a time per round on
this shared machine, each round in its own seeded random order
(``tuner.in_network_confirm.round_order``: a run always after the same other was favoured, by
up to 2% on Zen 5); each reports its median over the rounds, and tuned against default also
the median of the per-round ratios (paired). ``--control`` adds the default network compiled a
second time (the same code): what the comparison reports for no change, in the same run; each
tuned network is also set beside it. ``--also-log LOG`` (again for more) adds the choices of
another tuning log in the same rounds ("tuned 2", ...): two sets of choices compared side by
side. Outputs must agree with onnxruntime within 1e-4 (max abs difference / max abs value).
Ratio = onnxruntime / pyvta. Both run on ``--threads`` threads (pyvta's kernels are built for
that many). Each model's line is followed by what else had the host's CPUs over its rounds
(``tuner.host_load``: the hypervisor's steal, other processes): a slow spell shows its cause.

``--cpu-time`` (with ``--threads 1``) times each inference by the CPU time of the thread that
runs it (``time.thread_time``), not the wall clock: on a machine shared with other work it
leaves out the time the thread waited for a core, so kernel speed can be compared when the
wall clock cannot (both runtimes then compute on the calling thread only).

``--per-layer`` adds, per model, where the time goes: a second onnxruntime session with its
profiler on (``SessionOptions.enable_profiling``, same threads) runs in the same rounds, and
each pyvta node's median time (the executor's timing table; CPU time with ``--cpu-time``,
while onnxruntime's profile stays wall time) is set beside onnxruntime's
median kernel time of the node of the same kind and rank (the k-th conv beside the k-th
Conv: both run the ONNX graph's order, their node names differ), kinds totalled at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import onnxruntime_session
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.executor import Executor
from pyvta.testing.side_by_side import rel_err, timed_ms
from pyvta.tuner.host_load import LoadMeter
from pyvta.tuner.in_network_confirm import paired_ratio, round_order

MAX_REL_ERR = 1e-4
# pyvta op -> the onnxruntime op kinds (its profile's op_name) doing the same work
ORT_KINDS = {
    "cpu_conv2d": ("Conv", "FusedConv"),
    "cpu_max_pool": ("MaxPool",),
    "cpu_global_avg_pool": ("GlobalAveragePool",),
    "cpu_dense": ("Gemm", "FusedGemm"),
    "cpu_softmax": ("Softmax",),
    "cpu_elementwise": ("Add", "Relu", "Clip", "Sum"),
    "layout_transform": ("ReorderInput", "ReorderOutput"),
}


def ort_node_ms(profile_json: str, skip_runs: int = 1) -> list[tuple[str, str, float]]:
    """``(node, op kind, median ms)`` per node of an onnxruntime profile, in execution order;
    the first ``skip_runs`` runs (warm-up) are left out."""
    events = [e for e in json.loads(Path(profile_json).read_text()) if e.get("cat") == "Node"]
    per_node: dict[tuple[str, str], list[float]] = {}
    seen: dict[str, int] = {}
    for e in events:
        if not e["name"].endswith("_kernel_time"):
            continue
        node = e["name"][: -len("_kernel_time")]
        seen[node] = seen.get(node, 0) + 1
        if seen[node] > skip_runs:
            per_node.setdefault((node, e["args"].get("op_name", "?")), []).append(e["dur"] / 1e3)
    return [(n, op, float(np.median(v))) for (n, op), v in per_node.items()]


def per_layer_table(tables, ort_rows) -> str:
    """pyvta's nodes (median ms over the ``tables``' runs) beside onnxruntime's of the same
    kind and rank, then per-kind totals."""
    ms: dict[tuple[str, str], list[float]] = {}
    for t in tables:
        for r in t.rows:
            ms.setdefault((r.node, r.op), []).append(r.ms)
    by_kind: dict[str, list[tuple[str, float]]] = {}
    for node, op, m in ort_rows:
        by_kind.setdefault(op, []).append((node, m))
    rank: dict[tuple[str, ...], int] = {}
    lines = [
        f"  {'pyvta node':<24} {'op':<20} {'ms':>7}   {'onnxruntime node':<24} {'ms':>7} ratio"
    ]
    totals: dict[str, list[float]] = {}
    for (node, op), v in ms.items():
        mine = float(np.median(v))
        kinds = ORT_KINDS.get(op, ())
        pool = [row for k in kinds for row in by_kind.get(k, [])]
        pool.sort(key=lambda row: [n for n, _, _ in ort_rows].index(row[0]))
        i = rank[kinds] = rank.get(kinds, -1) + 1
        theirs = pool[i] if kinds and i < len(pool) else ("-", float("nan"))
        tot = totals.setdefault(op, [0.0, 0.0])
        tot[0] += mine
        tot[1] += theirs[1] if theirs[0] != "-" else 0.0
        ratio = f"{theirs[1] / mine:5.2f}" if theirs[0] != "-" and mine > 0 else "    -"
        lines.append(
            f"  {node[:24]:<24} {op:<20} {mine:7.3f}   {theirs[0][:24]:<24} {theirs[1]:7.3f} {ratio}"
        )
    for op, (mine, theirs) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  total {op:<20} pyvta {mine:8.3f} ms  onnxruntime {theirs:8.3f} ms")
    matched = {n for op in totals for k in ORT_KINDS.get(op, ()) for n, _ in by_kind.get(k, [])}
    rest = sum(m for n, _, m in ort_rows if n not in matched)
    lines.append(f"  onnxruntime nodes of other kinds: {rest:.3f} ms")
    return "\n".join(lines)


def bench_model(
    name: str, size: int, rounds: int, threads: int, log: str | None, seed: int,
    per_layer: bool = False, clock=time.perf_counter, control: bool = False, also=(),
):  # fmt: skip
    import onnxruntime as ort

    from pyvta.compiler.targets.cpu.kernels import CpuKernels
    from pyvta.tuner.cpu_network import tuned_schedules
    from pyvta.tuner.in_network import stale_choices

    path = str(Path(tempfile.mkdtemp(prefix="pyvta-bench-")) / f"{name}.onnx")
    zoo.save_model(name, path, size=size, seed=seed)
    x = zoo.sample_inputs(1, size, seed)[0]
    sess = onnxruntime_session(path, threads=threads, spin=False)
    ref = sess.run(None, {"input": x})[0]
    runs = {"onnxruntime": lambda: sess.run(None, {"input": x})}
    models = {"default": compile_model(path, "cpu")}
    if control:  # compiled again: the same code, its own weights and arena
        models["default again"] = compile_model(path, "cpu")
    # the log's choices ("tuned"), then each --also-log's ("tuned 2", ...) in the same rounds
    tuned_logs = {"tuned": log} if log is not None else {}
    tuned_logs.update({f"tuned {i}": other for i, other in enumerate(also, 2)})
    for key, tlog in tuned_logs.items():
        foreign: dict[str, str] = {}  # as pyvta compile: other CPUs' records left out
        schedules = tuned_schedules(path, tlog, foreign)
        if foreign:
            print(f"{name}: {len(foreign)} layers with records only of other CPUs"
                  f" ({', '.join(sorted(set(foreign.values())))}) left untuned")  # fmt: skip
        if schedules:
            models[key] = compile_model(path, "cpu", cpu_schedules=schedules)
            print(f"{name} {key}: {len(schedules)} tuned layer schedules from {tlog}")
        stale = stale_choices(tlog, path)
        if stale:
            print(f"{name}: {stale}")
    tables: dict[str, list] = {k: [] for k in models}
    for key, cm in models.items():
        kernels = {"cpu": CpuKernels(cm.graph, threads)}  # built for the run's thread count

        def run(cm=cm, key=key, kernels=kernels):
            if per_layer:  # nodes timed by the run's clock (CPU time with --cpu-time)
                outs, table = Executor(cm.graph, None, kernels, clock).run({"input": x})
            else:
                outs, table = run_model(cm, x, backends=kernels)
            if per_layer:  # the timed runs keep their tables
                tables[key].append(table)
            return outs

        err = rel_err(run()[0], ref)
        tables[key].clear()
        print(f"{name} {key}: relative error {err:.2e} against onnxruntime")
        assert err < MAX_REL_ERR, f"{name} {key}: wrong result ({err:.3g} >= {MAX_REL_ERR})"
        runs[key] = run
    if per_layer:  # a profiled session runs beside them
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(path).with_suffix("")) + "_ort"
        profiled = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        profiled.run(None, {"input": x})  # warm-up (left out of the medians)
    times: dict[str, list[float]] = {k: [] for k in runs}
    order = list(runs)
    with LoadMeter() as meter:
        for r in range(rounds):
            for key in round_order(order, r):
                times[key].append(timed_ms(runs[key], clock))
            if per_layer:
                profiled.run(None, {"input": x})
    med = {k: float(np.median(v)) for k, v in times.items()}
    parts = ", ".join(f"{k} {ms:.2f} ms" for k, ms in med.items())
    ratios = {k: med["onnxruntime"] / med[k] for k in models}
    rtxt = ", ".join(f"{k} {r:.2f}x" for k, r in ratios.items())
    what = "CPU time" if clock is time.thread_time else "wall"
    print(f"{name} {size}x{size}: {parts} ({what}, median of {rounds}); vs onnxruntime: {rtxt}")
    if meter.load is not None:
        print(f"{name}: over the rounds, {meter.load} of the host's {meter.load.cpus} CPUs")
    # the tuned network against each build of the default (the second: the stricter where
    # the control strays above 1)
    tuned = [k for k in times if k.startswith("tuned")]
    pairs = [(k, "default") for k in tuned] + [("default again", "default")]
    for key, base in pairs + [(k, "default again") for k in tuned]:
        if key in times and base in times:
            paired = paired_ratio(times[base], times[key])
            print(f"{name} {key} vs {base}: {med[base] / med[key]:.3f}x (medians),"
                  f" {paired:.3f}x (paired per round)")  # fmt: skip
    if per_layer:
        ort_rows = ort_node_ms(profiled.end_profiling())
        for key in models:
            print(f"{name} per layer, pyvta {key} against onnxruntime (median ms of {rounds}):")
            print(per_layer_table(tables[key], ort_rows))
    return ratios


def main() -> None:
    from pyvta.tuner.cpu_measure import cpu_target_info
    from pyvta.tuner.cpu_network import pretuned_cpu_log

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet34,mobilenet")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--tuning-log", dest="tuning_log",
        help="default: each model's shipped log, else the shipped ResNet-18 one",
    )  # fmt: skip
    ap.add_argument(
        "--also-log", dest="also_logs", action="append", default=[], metavar="LOG",
        help="another tuning log whose choices run in the same rounds (tuned 2, 3, ...)",
    )  # fmt: skip
    ap.add_argument(
        "--per-layer", dest="per_layer", action="store_true",
        help="per-node times of pyvta beside onnxruntime's profile",
    )  # fmt: skip
    ap.add_argument(
        "--control", action="store_true",
        help="also the default network compiled again: the ratio of no change, in the same run",
    )  # fmt: skip
    ap.add_argument(
        "--cpu-time", dest="cpu_time", action="store_true",
        help="time by the calling thread's CPU time (needs --threads 1)",
    )  # fmt: skip
    args = ap.parse_args()

    def log_of(model: str) -> str | None:
        log = (
            args.tuning_log
            or pretuned_cpu_log(f"{model}_{args.size}")
            or pretuned_cpu_log("resnet18_224")
        )
        return log and str(log)

    if args.cpu_time and args.threads != 1:
        ap.error("--cpu-time needs --threads 1 (it times the calling thread only)")
    clock = time.thread_time if args.cpu_time else time.perf_counter
    print(f"host: {cpu_target_info()}; pyvta and onnxruntime on {args.threads} threads")
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    summary = {m: bench_model(m, args.size, args.rounds, args.threads, log_of(m),
                              args.seed, args.per_layer, clock, args.control,
                              args.also_logs)
               for m in args.models.split(",")}  # fmt: skip
    for key, target in (("tuned", 1.0), ("default", 0.8)):
        got = {m: r[key] for m, r in summary.items() if key in r}
        if got:
            line = ", ".join(f"{m} {r:.2f}x" for m, r in got.items())
            print(f"{key} vs onnxruntime: {line} (target >= {target}x on each)")


if __name__ == "__main__":
    main()
