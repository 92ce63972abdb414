"""What the running network costs each conv layer: its time inside the network against the same
kernel run alone on hot buffers, side by side in one run.

    .venv/bin/python benchmarks/cpu_layers_alone.py [--models mobilenet,resnet18] [--rounds 30]
        [--threads 2] [--logs DIR] [--alone-runs 5]

Per model (``cpu_headroom``'s options and variants: the zoo's network, seed 0, default
schedules and with ``--logs`` the tuned ones), ``--rounds`` rounds on ``--threads`` threads;
each round runs the network twice (the second timed, node by node, by the executor: the caches
as the inference before left them, as ``cpu_network.py`` runs it), then each conv node's kernel
alone (the same built module on buffers of its own, filled once; one warming call, then the
median of ``--alone-runs`` calls in a row: how a layer is measured when it is tuned), and once
more right after 64 MiB streamed through the caches ("cold": its weights and input from memory,
as ``pyvta tune --target cpu`` measures a network's layers). The two
alternate because the host's speed drifts (on a shared 2-core host two runs of this script a
minute apart differed by 25% alone). Per conv workload: its launches, the median over the
rounds of its ms per inference in the network, alone and alone cold (all launches), and
network / alone.
A schedule tuned alone keeps in the network only what the network's context leaves of its gain
(inputs and weights that are not in the caches, an output written to memory another layer
used); the sum over the layers of network - alone is the most that fusing or reordering layers
could win back. The default and tuned variants run one after the other, not in turn: compare
each with itself (``cpu_network.py --control`` compares them).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections import Counter, defaultdict

import numpy as np
from cpu_headroom import add_model_arguments, compiled_convs, each_variant

from pyvta.compiler.graph import zoo
from pyvta.compiler.targets.cpu.kernels import CpuKernels
from pyvta.runtime.compiled_model import run_model
from pyvta.tuner.cpu_measure import DEFAULT_EVICT_BYTES, evict, evict_buffer


def bound_calls(module, rng: np.random.Generator):
    """A no-argument call of a built conv ``module`` on buffers of its own (filled once)."""
    arrays = [rng.standard_normal(p.shape).astype(p.dtype) for p in module.func.params]
    call = module.bind(*arrays)
    call.arrays = arrays  # kept alive with the call
    return call


def alone_ms(call, runs: int) -> float:
    """Median ms of ``runs`` calls in a row of ``call`` after one that warms its buffers."""
    call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def cold_ms(call, buf: np.ndarray) -> float:
    """ms of one call of ``call`` right after ``buf`` streamed through the caches (its inputs
    and weights then come from memory, as they may in a network whose weights outgrow them)."""
    evict(buf)
    t0 = time.perf_counter()
    call()
    return 1e3 * (time.perf_counter() - t0)


def compare(onnx: str, schedules, args) -> dict[str, float]:
    """Print the table of one network; return its conv layers' ms in the network and alone."""
    from pyvta.compiler.backend.llvm.runtime import caller_bound

    cm, work = compiled_convs(onnx, schedules)
    convs = list(work)
    kernels = CpuKernels(cm.graph, args.threads)
    rng = np.random.default_rng(0)
    calls = {name: bound_calls(kernels.modules[name], rng) for name in convs}
    x = zoo.sample_inputs(1, args.size, 0)[0]
    in_net: dict[str, list[float]] = defaultdict(list)
    alone: dict[str, list[float]] = defaultdict(list)
    cold: dict[str, list[float]] = defaultdict(list)
    buf = evict_buffer(DEFAULT_EVICT_BYTES)
    count = Counter(wl.key for wl in work.values())
    for _ in range(args.rounds):  # the two measured in turn: the host's speed drifts
        run_model(cm, x, backends={"cpu": kernels})  # the caches as the inference before left them
        per: dict[str, float] = defaultdict(float)
        for row in run_model(cm, x, backends={"cpu": kernels})[1].rows:
            if row.node in work:
                per[work[row.node].key] += row.ms
        solo: dict[str, float] = defaultdict(float)
        solo_cold: dict[str, float] = defaultdict(float)
        with caller_bound(args.threads) if args.threads > 1 else contextlib.nullcontext():
            for name in convs:
                solo[work[name].key] += alone_ms(calls[name], args.alone_runs)
                solo_cold[work[name].key] += cold_ms(calls[name], buf)
        for key in per:
            in_net[key].append(per[key])
            alone[key].append(solo[key])
            cold[key].append(solo_cold[key])
    print(f"  {'conv layer':64s}  n  network ms  alone ms  cold ms  network / alone")
    net_total = alone_total = cold_total = 0.0
    for key in sorted(in_net, key=lambda k: -statistics.median(in_net[k])):
        net, solo_ms = statistics.median(in_net[key]), statistics.median(alone[key])
        cold_key = statistics.median(cold[key])
        net_total, alone_total = net_total + net, alone_total + solo_ms
        cold_total += cold_key
        print(
            f"  {key:64s} {count[key]:2d} {net:10.3f} {solo_ms:9.3f} {cold_key:8.3f}"
            f" {net / solo_ms:8.2f}x"
        )
    print(
        f"  conv layers: {net_total:.2f} ms in the network, {alone_total:.2f} ms alone"
        f" ({net_total / alone_total:.2f}x; {net_total - alone_total:+.2f} ms), {cold_total:.2f}"
        " ms alone cold"
    )
    return {"network_ms": net_total, "alone_ms": alone_total, "cold_ms": cold_total}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(ap, rounds=30)
    ap.add_argument("--alone-runs", dest="alone_runs", type=int, default=5)
    args = ap.parse_args(argv)
    if args.alone_runs < 1:
        ap.error("--alone-runs must be >= 1")
    return each_variant(args, ap, compare, f"{args.rounds} rounds, {args.threads} threads")


if __name__ == "__main__":
    raise SystemExit(main())
