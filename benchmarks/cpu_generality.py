"""Generated networks (the kinds users bring) on the CPU, fp32 and int8: pyvta against
onnxruntime in one process, and how much of each network the accelerator target takes.

Run: .venv/bin/python benchmarks/cpu_generality.py [--count 30] [--first-seed 0] [--rounds 5]
     [--threads 2]

Networks: ``pyvta.testing.netgen.random_network(seed)`` for ``--count`` seeds from
``--first-seed`` (odd channel counts, kernels 1-7, stride 2, asymmetric pads, dilation,
groups, depthwise, residuals, bottlenecks, concats, pools, batch 1 or 4, inputs 16-224), one
seeded input each.

- fp32: ``compile_model(..., "cpu")`` run through ``run_model`` with kernels built for
  ``--threads`` threads, against onnxruntime on the same ONNX file (spinning off); its output
  must agree with onnxruntime within 1e-4 (max abs difference / max abs value), else the
  network is listed as wrong.
- int8: ``compile_model(..., "cpu-int8")`` (default calibration: 8 seeded standard-normal
  samples) against onnxruntime's static int8 QDQ model of the same file calibrated on the same
  samples (``quantize_static`` as in benchmarks/cpu_int8.py); the cosine of each int8 output
  to the float one is printed beside the times.
- vta: ``compile_model(..., "vta")``: how many convs became accelerator nodes, and why the rest
  stayed on the CPU (float first conv, group, dilation, as ``partition_targets`` decides).

Runs are interleaved one inference at a time per round (after one warm-up each); each reports
its median over the rounds (wall clock). Ratio = onnxruntime / pyvta (above 1: pyvta is faster).
A network that fails to compile or run on a target is counted and listed with its error; the
run goes on.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from pyvta.compiler.graph.compile import compile_model, default_calibration
from pyvta.compiler.graph.reference import cosine, onnxruntime_session
from pyvta.compiler.targets.vta.partition_targets import CONV_OPS, conv_placement
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.ir import HOST
from pyvta.testing import netgen
from pyvta.testing.side_by_side import qdq_model, rel_err, timed_ms

MAX_REL_ERR = 1e-4


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def vta_coverage(path: str) -> tuple[int, int, dict[str, int]]:
    """(convs on the accelerator, convs in all, why the rest stayed on the CPU: count by reason)."""
    return conv_placement(compile_model(path, "vta", lower=False).graph)


def bench_network(seed: int, folder: Path, rounds: int, threads: int, failures: dict) -> dict:
    """Times (median ms) by run name, the int8 cosines and the vta coverage of one network."""
    from pyvta.compiler.targets.cpu.kernels import CpuKernels
    from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels

    model = netgen.random_network(seed)
    name = f"net{seed}"
    path = str(folder / f"{name}.onnx")
    onnx.save(model, path)
    feeds = {"input": netgen.sample_input(model, seed + 100)}
    ort_f = onnxruntime_session(path, threads=threads, spin=False)
    ref = ort_f.run(None, feeds)[0]
    runs = {"ort fp32": lambda: ort_f.run(None, feeds)}
    info: dict = {"name": name, "describe": netgen.describe(model), "slowest": {}}
    graphs = {}

    def attempt(target: str, fn) -> None:
        try:
            fn()
        except Exception as e:  # a failing network is counted, never ends the run
            failures.setdefault(target, []).append((name, _error(e)))

    def fp32() -> None:
        cm = compile_model(path, "cpu")
        kernels = {"cpu": CpuKernels(cm.graph, threads)}
        err = rel_err(run_model(cm, feeds, backends=kernels)[0][0], ref)
        if err >= MAX_REL_ERR:
            raise AssertionError(f"wrong result: relative error {err:.3g} >= {MAX_REL_ERR}")
        runs["pyvta fp32"] = lambda: run_model(cm, feeds, backends=kernels)
        graphs["pyvta fp32"] = cm.graph
        info["compiled fp32"] = compiled_convs(cm.graph, kernels["cpu"].modules)

    def int8() -> None:
        cm = compile_model(path, "cpu-int8")
        kernels = {"cpu": CpuInt8Kernels(cm.graph, threads)}
        out = run_model(cm, feeds, backends=kernels)[0][0]
        info["cos pyvta"] = cosine(out, ref)
        runs["pyvta int8"] = lambda: run_model(cm, feeds, backends=kernels)
        graphs["pyvta int8"] = cm.graph
        int8_kernels = kernels["cpu"]  # its int8 kernels, and the float layers' on its fallback
        compiled = {**int8_kernels.kernels, **getattr(int8_kernels.fallback, "modules", {})}
        info["compiled int8"] = compiled_convs(cm.graph, compiled)

    def ort_int8() -> None:
        logging.disable(logging.WARNING)  # quantize_static's advice to pre-process, per model
        try:
            qdq = qdq_model(path, default_calibration_of(path), str(folder / f"{name}_qdq.onnx"))
        finally:
            logging.disable(logging.NOTSET)
        ort_q = onnxruntime_session(qdq, threads=threads, spin=False)
        info["cos ort"] = cosine(ort_q.run(None, feeds)[0], ref)
        runs["ort int8"] = lambda: ort_q.run(None, feeds)

    def vta() -> None:
        info["vta"] = vta_coverage(path)

    attempt("cpu", fp32)
    attempt("cpu-int8", int8)
    attempt("onnxruntime int8 QDQ", ort_int8)
    attempt("vta", vta)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(rounds):
        for key, fn in runs.items():
            times[key].append(timed_ms(fn))
    info["ms"] = {k: float(np.median(v)) for k, v in times.items()}
    for key, graph in graphs.items():  # where pyvta's time goes: one more run's table
        info["slowest"][key] = slowest_nodes(graph, runs[key]()[1])
    return info


def compiled_convs(graph, compiled) -> tuple[int, int]:
    """(convs with a compiled kernel, convs in all); the rest run numpy's ``run_cpu_op``."""
    convs = [n.name for n in graph.nodes if n.op in CONV_OPS and n.target == HOST]
    return sum(1 for n in convs if n in compiled), len(convs)


def slowest_nodes(graph, table, top: int = 3) -> str:
    """The ``top`` slowest nodes of a run: name, op, group/dilation when not 1, ms."""
    nodes = {n.name: n for n in graph.nodes}
    parts = []
    for r in sorted(table.rows, key=lambda r: -r.ms)[:top]:
        attrs = nodes[r.node].attrs if r.node in nodes else {}
        extra = [f"group {attrs['group']}"] if attrs.get("group", 1) > 1 else []
        if any(d != 1 for d in attrs.get("dilations", [1])):
            extra.append(f"dilation {attrs['dilations'][0]}")
        extra_txt = f", {', '.join(extra)}" if extra else ""
        parts.append(f"{r.node} ({r.op}{extra_txt}) {r.ms:.2f} ms")
    return "; ".join(parts)


def default_calibration_of(path: str) -> list[dict]:
    """The samples ``compile_model`` calibrates on by default (seeded, by input name)."""
    from pyvta.compiler.graph.onnx_import import import_onnx

    return default_calibration(import_onnx(path))


def geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def summary(kind: str, results: list[dict], mine: str, theirs: str) -> None:
    rows = [(r, r["ms"][theirs] / r["ms"][mine]) for r in results if mine in r["ms"]]
    rows = [(r, q) for r, q in rows if theirs in r["ms"]]
    print(f"\n{kind}: {len(rows)} networks; ratio = {theirs} / {mine} (above 1: pyvta faster)")
    print(f"  {'network':<8} {'pyvta ms':>9} {'ort ms':>9} {'ratio':>6}  description")
    for r, q in rows:
        extra = ""
        if kind == "int8" and "cos pyvta" in r:
            extra = f" [cos pyvta {r['cos pyvta']:.4f}, ort {r.get('cos ort', float('nan')):.4f}]"
        print(
            f"  {r['name']:<8} {r['ms'][mine]:9.2f} {r['ms'][theirs]:9.2f} {q:6.2f}"
            f"  {r['describe'].split(': ', 1)[1]}{extra}"
        )
    got = [r[f"compiled {kind}"] for r, _ in rows]
    print(
        f"{kind}: {sum(c for c, _ in got)} of {sum(t for _, t in got)} convs ran compiled kernels,"
        " the rest numpy (run_cpu_op)"
    )
    if rows:
        worst = sorted(rows, key=lambda rq: rq[1])[:3]
        print(
            f"{kind} geomean {geomean([q for _, q in rows]):.2f}x, worst {worst[0][1]:.2f}x"
            f" ({worst[0][0]['name']}); worst three: "
            + ", ".join(f"{r['name']} {q:.2f}x" for r, q in worst)
        )
        for r, _ in worst:
            print(f"  {r['name']} slowest pyvta nodes: {r['slowest'].get(mine, '-')}")


def main() -> None:
    from pyvta.tuner.cpu_measure import cpu_target_info

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--first-seed", dest="first_seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print(f"host: {cpu_target_info()}; pyvta and onnxruntime on {args.threads} threads")
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    folder = Path(tempfile.mkdtemp(prefix="pyvta-generality-"))
    failures: dict[str, list[tuple[str, str]]] = {}
    results = []
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.count):
        r = bench_network(seed, folder, args.rounds, args.threads, failures)
        print(f"{r['describe']}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in r["ms"].items()))
        results.append(r)
    print(f"\n{len(results)} networks in {time.perf_counter() - t0:.0f} s, median of {args.rounds}")
    summary("fp32", results, "pyvta fp32", "ort fp32")
    summary("int8", results, "pyvta int8", "ort int8")
    covered = [r for r in results if "vta" in r]
    on, total = sum(r["vta"][0] for r in covered), sum(r["vta"][1] for r in covered)
    reasons: dict[str, int] = {}
    for r in covered:
        for why, n in r["vta"][2].items():
            reasons[why] = reasons.get(why, 0) + n
    why = ", ".join(f"{k} {n}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    print(f"\nvta: {len(covered)} networks compiled; {on} of {total} convs on the accelerator;"
          f" on the CPU: {why or 'none'}")  # fmt: skip
    print(f"\nfailures ({sum(len(v) for v in failures.values())}):")
    for target, rows in failures.items():
        print(f"  {target}: {len(rows)} of {len(results)} networks")
        for name, err in rows:
            print(f"    {name}: {err}")


if __name__ == "__main__":
    main()
