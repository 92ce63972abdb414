"""Generated networks (the kinds users bring) on the CPU, fp32 and int8: pyvta against
onnxruntime in one process, and how much of each network the accelerator target takes.

Run: .venv/bin/python benchmarks/cpu_generality.py [--count 30] [--first-seed 0] [--rounds 5]
     [--threads 2] [--narrow-groups]

Networks: ``pyvta.testing.netgen.random_network(seed)`` for ``--count`` seeds from
``--first-seed`` (odd channel counts, kernels 1-7, stride 2, asymmetric pads, dilation,
groups, depthwise, residuals, bottlenecks, concats, pools, batch 1 or 4, inputs 16-224), one
seeded input each; with ``--narrow-groups``, the networks the generator draws with groups of
2, 4 or 8 channels (``narrow_groups=True``), only the seeds whose network has such a conv.

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

Feature levels: ``PYVTA_CPU_FEATURES=avx2`` compiles pyvta's kernels as for an AVX2-only
host; onnxruntime then reads CPUID with the features past AVX2 hidden (``--ort-level``, default
the same level; ``pyvta.testing.cpuid_mask``), so it too runs the kernels it would run on such a
host, not its AVX-512 VNNI or AMX ones. ``--ort-level host`` compares with onnxruntime at the
host's own level.

Runs are interleaved one inference at a time per round (after one warm-up each), each round
in its own seeded random order (``tuner.in_network_confirm.round_order``); each reports its
median over the rounds (wall clock). A network runs at least ``--rounds`` rounds, and more (up
to 200) until its slowest run has had ``--min-ms`` of timed work: a sub-millisecond network
gets enough samples for its median to hold still. Ratio = onnxruntime / pyvta (above 1: pyvta is faster). The
worst three networks of each kind get a per-layer table: pyvta's per-node times beside
onnxruntime's own (its profiler), by ONNX node, an activation counted with the conv it follows
(both fuse it).
A network that fails to compile or run on a target is counted and listed with its error; the
run goes on.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import tempfile
import time
from pathlib import Path
from statistics import geometric_mean

import numpy as np
import onnx

from pyvta.compiler.graph.compile import compile_model, default_calibration
from pyvta.compiler.graph.reference import cosine, onnxruntime_session
from pyvta.compiler.targets.vta.partition_targets import CONV_OPS, conv_placement
from pyvta.host_cpu import FEATURES_ENV
from pyvta.runtime.compiled_model import run_model
from pyvta.runtime.ir import HOST
from pyvta.testing import netgen
from pyvta.testing.cpuid_mask import mask_cpuid
from pyvta.testing.side_by_side import (
    onnxruntime_node_ms,
    qdq_model,
    rel_err,
    timed_ms,
)
from pyvta.tuner.in_network_confirm import round_order

MAX_REL_ERR = 1e-4
MAX_ROUNDS = 200
TABLE_RUNS = 20  # runs behind each per-layer table's medians


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def vta_coverage(path: str) -> tuple[int, int, dict[str, int]]:
    """(convs on the accelerator, convs in all, why the rest stayed on the CPU: count by reason)."""
    return conv_placement(compile_model(path, "vta", lower=False).graph)


def bench_network(
    seed: int,
    folder: Path,
    rounds: int,
    min_ms: float,
    threads: int,
    failures: dict,
    narrow: bool = False,
) -> dict:
    """Times (median ms) by run name, the int8 cosines and the vta coverage of one network, and
    what its per-layer tables need (``info["layers"]``: by run name, the pyvta run, its graph and
    the ONNX file onnxruntime ran)."""
    from pyvta.compiler.targets.cpu.kernels import CpuKernels
    from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels

    model = netgen.random_network(seed, narrow_groups=narrow)
    name = f"net{seed}"
    path = str(folder / f"{name}.onnx")
    onnx.save(model, path)
    feeds = {"input": netgen.sample_input(model, seed + 100)}
    ort_f = onnxruntime_session(path, threads=threads, spin=False)
    ref = ort_f.run(None, feeds)[0]
    runs = {"ort fp32": lambda: ort_f.run(None, feeds)}
    info: dict = {"name": name, "describe": netgen.describe(model), "slowest": {}, "layers": {}}
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
        info["qdq"] = qdq

    def vta() -> None:
        info["vta"] = vta_coverage(path)

    attempt("cpu", fp32)
    attempt("cpu-int8", int8)
    attempt("onnxruntime int8 QDQ", ort_int8)
    times: dict[str, list[float]] = {k: [] for k in runs}
    warm_ms = max(timed_ms(fn) for fn in runs.values())  # each run's warm-up
    info["rounds"] = max(rounds, min(MAX_ROUNDS, math.ceil(min_ms / max(warm_ms, 1e-3))))
    names = list(runs)
    for r in range(info["rounds"]):
        for key in round_order(names, r):
            times[key].append(timed_ms(runs[key]))
    info["ms"] = {k: float(np.median(v)) for k, v in times.items()}
    # after the timing: the vta compile's multi-threaded BLAS work leaves OpenBLAS's threads
    # spinning for about 0.1 s, a core taken from what runs next (net823 right after it: pyvta
    # 1.10-1.16 ms a run against 0.67-0.69 with OPENBLAS_NUM_THREADS=1 or a while later)
    attempt("vta", vta)
    for key, graph in graphs.items():  # where pyvta's time goes: one more run's table
        info["slowest"][key] = slowest_nodes(graph, runs[key]()[1])
        onnx_file = info.get("qdq") if key == "pyvta int8" else path
        info["layers"][key] = (runs[key], graph, onnx_file, feeds, threads)
    return info


def owners(model: onnx.ModelProto) -> dict[str, str]:
    """Each ONNX node's row in a per-layer table: itself, or for an activation right after a conv
    or Gemm, that node (pyvta and onnxruntime both fuse it there)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    own: dict[str, str] = {}
    for n in model.graph.node:
        src = producer.get(n.input[0]) if n.input else None
        fused = (
            n.op_type in ("Relu", "Clip") and src is not None and src.op_type in ("Conv", "Gemm")
        )
        own[n.name] = own[src.name] if fused else n.name
    return own


def row_of(name: str, own: dict[str, str]) -> str:
    """The table row of a pyvta or onnxruntime node name: its ONNX node's owner, also for names
    made from an ONNX node's (``relu2_quantize``, ``conv1.weight``), else ``(other)``."""
    for cand in (name, name.split(".")[0], name.rsplit("_", 1)[0]):
        if cand in own:
            return own[cand]
    return "(other)"


def layer_table(info: dict, key: str, onnx_model: onnx.ModelProto) -> list[str]:
    """Lines of a per-layer table of one run of a network: by ONNX node (in graph order), pyvta's
    median ms over ``TABLE_RUNS`` runs beside onnxruntime's own profiled median, and the ratio."""
    run, graph, onnx_file, feeds, threads = info["layers"][key]
    own = owners(onnx_model)
    ours: dict[str, list[float]] = {}
    for _ in range(TABLE_RUNS):
        per: dict[str, float] = {}
        for r in run()[1].rows:
            per[row_of(r.node, own)] = per.get(row_of(r.node, own), 0.0) + r.ms
        for k, v in per.items():
            ours.setdefault(k, []).append(v)
    theirs: dict[str, float] = {}
    for name, ms in onnxruntime_node_ms(onnx_file, feeds, threads, TABLE_RUNS).items():
        theirs[row_of(name, own)] = theirs.get(row_of(name, own), 0.0) + ms
    nodes = {n.name: n for n in onnx_model.graph.node}
    order = [n.name for n in onnx_model.graph.node if own[n.name] == n.name] + ["(other)"]
    lines = [f"    {'node':<22} {'op':<18} {'pyvta ms':>9} {'ort ms':>8} {'ratio':>6}"]
    for row in order:
        if row not in ours and row not in theirs:
            continue
        mine, other = float(np.median(ours.get(row, [0.0]))), theirs.get(row, 0.0)
        ratio = f"{other / mine:6.2f}" if mine > 0 and other > 0 else f"{'-':>6}"
        op = describe_node(nodes[row], onnx_model) if row in nodes else "layout, (de)quantize"
        lines.append(f"    {row:<22} {op:<18} {mine:9.3f} {other:8.3f} {ratio}")
    return lines


def describe_node(node, model: onnx.ModelProto) -> str:
    """A node's op, and for a conv its kernel, stride, group and dilation when not 1."""
    if node.op_type != "Conv":
        return node.op_type
    a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
    text = f"Conv k{a.get('kernel_shape', ['?'])[0]}"
    for key, label in (("strides", "s"), ("dilations", "d")):
        if any(v != 1 for v in a.get(key, [1])):
            text += f" {label}{a[key][0]}"
    if a.get("group", 1) > 1:
        text += f" g{a['group']}"
    return text


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


def summary(kind: str, results: list[dict], mine: str, theirs: str, models: dict) -> None:
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
            f"{kind} geomean {geometric_mean([q for _, q in rows]):.2f}x, worst {worst[0][1]:.2f}x"
            f" ({worst[0][0]['name']}); worst three: "
            + ", ".join(f"{r['name']} {q:.2f}x" for r, q in worst)
        )
        for r, _ in worst:
            print(f"  {r['name']} slowest pyvta nodes: {r['slowest'].get(mine, '-')}")
        for r, q in worst:
            print(f"  {r['name']} per layer ({kind}, {q:.2f}x; medians of {TABLE_RUNS} runs each,"
                  " onnxruntime's from its profiler):")  # fmt: skip
            print("\n".join(layer_table(r, mine, models[r["name"]])))


def main() -> None:
    from pyvta.tuner.cpu_measure import cpu_target_info

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--first-seed", dest="first_seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--min-ms",
        dest="min_ms",
        type=float,
        default=300.0,
        help="more rounds (up to 200) until each network's slowest run has this much timed work",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--narrow-groups",
        dest="narrow",
        action="store_true",
        help="networks drawn with groups of 2, 4 or 8 channels; only the seeds that have one",
    )
    ap.add_argument(
        "--ort-level",
        dest="ort_level",
        default=os.environ.get(FEATURES_ENV) or "host",
        help="x86 feature level onnxruntime sees (CPUID masked: pyvta.testing.cpuid_mask);"
        f" 'host': the host's own; default: ${FEATURES_ENV}, else host",
    )
    args = ap.parse_args()
    if args.ort_level != "host":
        mask_cpuid(args.ort_level)  # before onnxruntime loads: it reads CPUID once
        print(f"onnxruntime (and this process) read CPUID limited to {args.ort_level}")
    else:
        print("onnxruntime reads the host's own CPUID")
    print(f"host: {cpu_target_info()}; pyvta and onnxruntime on {args.threads} threads")
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    folder = Path(tempfile.mkdtemp(prefix="pyvta-generality-"))
    failures: dict[str, list[tuple[str, str]]] = {}
    results = []
    t0 = time.perf_counter()
    models = {
        f"net{s}": netgen.random_network(s, narrow_groups=args.narrow)
        for s in range(args.first_seed, args.first_seed + args.count)
    }
    if args.narrow:
        models = {k: m for k, m in models.items() if netgen.narrow_group_convs(m)}
        print(f"{len(models)} of {args.count} networks have narrow groups: {', '.join(models)}")
    for name in models:
        seed = int(name[3:])
        r = bench_network(
            seed, folder, args.rounds, args.min_ms, args.threads, failures, args.narrow
        )
        times = ", ".join(f"{k} {v:.2f} ms" for k, v in r["ms"].items())
        print(f"{r['describe']}: {times} ({r['rounds']} rounds)")
        results.append(r)
    print(
        f"\n{len(results)} networks in {time.perf_counter() - t0:.0f} s, medians of"
        f" {args.rounds}-{max((r['rounds'] for r in results), default=0)} rounds"
        f" (at least {args.min_ms:.0f} ms of each network's slowest run)"
    )
    summary("fp32", results, "pyvta fp32", "ort fp32", models)
    summary("int8", results, "pyvta int8", "ort int8", models)
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
