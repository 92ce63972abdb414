"""The thread pool's threads bound to CPUs, or left free, when other work runs between
inferences: each network in three processes, one per setting, their rounds interleaved.

Run: .venv/bin/python benchmarks/cpu_pool_pinning.py [--models mobilenet,resnet18]
     [--between nothing,threads,onnxruntime] [--rounds 15] [--threads 2] [--seed 0]

Per model (the zoo's, 224x224, one seeded input), three child processes each compile the
network with the default schedules (``compile_model(..., "cpu")``, run by ``run_model`` on
``--threads`` threads, as ``pyvta run --target cpu``), the pool's threads placed by
``compiler.backend.llvm.runtime.cpu_plan`` as follows:

- ``bound``: the runtime's default: the workers bind themselves to CPUs, the calling thread is
  bound to the CPU left to it while an inference runs;
- ``workers``: the workers bound, the caller free;
- ``free``: neither (as with ``PYVTA_PIN_THREADS=0``).

In each round, for each kind of work between inferences, each child in turn (in a seeded
random order) times one inference after that work:

- ``nothing``: inferences back to back;
- ``threads``: two Python threads summing a range (about 10 ms of work each), then joined;
- ``onnxruntime``: one inference of the same model by onnxruntime on the same thread count
  (spinning off), as ``benchmarks/cpu_network.py`` runs it beside ours.

Prints each setting's median and quartiles of the inference's wall time, and free against
each of the other two (above 1: binding is faster). Every setting's output must agree with
onnxruntime within 1e-4.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

BETWEEN = ("nothing", "threads", "onnxruntime")
SETTINGS = ("bound", "workers", "free")  # which of cpu_plan's threads are bound
MAX_REL_ERR = 1e-4
SUM_TO = 2_000_000  # each Python thread's range to sum (about 10 ms)


def _python_threads() -> None:
    ts = [threading.Thread(target=lambda: sum(range(SUM_TO))) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _child(conn, path: str, seed: int, size: int, threads: int, setting: str) -> None:
    """Serve ``(between, n)`` requests: ``n`` inferences, each after that work; replies ms."""
    import dataclasses

    from pyvta.compiler.backend.llvm.runtime import NO_PLAN, cpu_plan, set_cpu_plan

    plan = cpu_plan(os.sched_getaffinity(0))  # the runtime's default (whatever PIN_ENV says)
    plans = {"bound": plan, "workers": dataclasses.replace(plan, caller=None), "free": NO_PLAN}
    set_cpu_plan(plans[setting])  # before the pool starts its workers

    from pyvta.compiler.graph import zoo
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.reference import onnxruntime_session
    from pyvta.compiler.targets.cpu.kernels import CpuKernels
    from pyvta.runtime.compiled_model import run_model
    from pyvta.testing.side_by_side import rel_err

    x = zoo.sample_inputs(1, size, seed)[0]
    sess = onnxruntime_session(path, threads=threads, spin=False)
    cm = compile_model(path, "cpu")
    kernels = {"cpu": CpuKernels(cm.graph, threads)}
    err = rel_err(run_model(cm, x, backends=kernels)[0][0], sess.run(None, {"input": x})[0])
    conn.send(err)
    work = {
        "nothing": lambda: None,
        "threads": _python_threads,
        "onnxruntime": lambda: sess.run(None, {"input": x}),
    }
    while (req := conn.recv()) is not None:
        between, n = req
        times = []
        for _ in range(n):
            work[between]()
            t0 = time.perf_counter()
            run_model(cm, x, backends=kernels)
            times.append(1e3 * (time.perf_counter() - t0))
        conn.send(times)


def bench_model(name: str, between: list[str], rounds: int, threads: int, seed: int) -> None:
    from pyvta.compiler.graph import zoo
    from pyvta.tuner.in_network_confirm import round_order

    size = 224
    path = str(Path(tempfile.mkdtemp(prefix="pyvta-pin-")) / f"{name}.onnx")
    zoo.save_model(name, path, size=size, seed=seed)
    ctx = mp.get_context("spawn")
    conns, procs = {}, []
    for setting in SETTINGS:
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=_child, args=(theirs, path, seed, size, threads, setting))
        p.start()
        conns[setting], procs = mine, procs + [p]
    try:
        for setting, conn in conns.items():
            err = conn.recv()
            print(f"{name} {setting}: relative error {err:.2e} against onnxruntime")
            assert err < MAX_REL_ERR, f"{name} {setting}: wrong result ({err:.3g})"
        times = {(b, s): [] for b in between for s in conns}
        order = list(conns)
        for r in range(rounds):
            for b in between:
                for setting in round_order(order, r):
                    conns[setting].send((b, 1))
                    times[b, setting] += conns[setting].recv()
        for b in between:
            parts = []
            for setting in conns:
                q1, med, q3 = statistics.quantiles(times[b, setting], n=4)
                parts.append(f"{setting} {med:6.2f} ms ({q1:.2f}-{q3:.2f})")
            free = statistics.median(times[b, "free"])
            ratios = [f"{free / statistics.median(times[b, s]):.3f}x" for s in SETTINGS[:2]]
            print(f"{name}, {b:<11} between: {'; '.join(parts)}")
            print(f"  free / bound {ratios[0]}, free / workers {ratios[1]}")
    finally:
        for conn in conns.values():
            conn.send(None)
        for p in procs:
            p.join()


def main() -> None:
    from pyvta.tuner.cpu_measure import cpu_target_info

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet,resnet18")
    ap.add_argument("--between", default=",".join(BETWEEN))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    between = args.between.split(",")
    unknown = sorted(set(between) - set(BETWEEN))
    if unknown:
        ap.error(f"--between {','.join(unknown)} (allowed: {', '.join(BETWEEN)})")
    print(f"host: {cpu_target_info()}; {args.threads} threads, seed {args.seed}")
    cpus = len(os.sched_getaffinity(0))
    if args.threads < cpus:
        print(f"note: {args.threads} threads on {cpus} CPUs: the pool binds only launches that"
              " cover every CPU, so all three settings run unbound")  # fmt: skip
    t0 = time.perf_counter()
    for name in args.models.split(","):
        bench_model(name, between, args.rounds, args.threads, args.seed)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
