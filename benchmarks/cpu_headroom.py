"""How much a conv schedule could still gain: each conv layer's throughput inside the running
network against this CPU's FMA peak, measured in the same rounds, and the network's time if
every conv layer ran at that peak (the most any tuning of them could give).

    .venv/bin/python benchmarks/cpu_headroom.py [--models resnet18,mobilenet] [--size 224]
        [--rounds 20] [--threads 2] [--peak-seconds 0.2] [--logs DIR]

Per model (the zoo's, seed 0): the network compiled with the compiler's default schedules (and,
with ``--logs``, with the tuned ones of ``DIR/MODEL_SIZE_cpu.jsonl``: ``tuned_schedules``, the
in-network choices first) runs ``--rounds`` rounds on ``--threads`` threads, each node timed by
the executor in the second of two inferences (the first refills the caches the bandwidth's read
below flushed: timed right after that read, MobileNet's 112-wide depthwise layers took 2.3x
their time in back-to-back inferences, ``benchmarks/cpu_layers_alone.py``); after each round
the FMA peak (``benchmarks/cpu_peak.py``) is measured for
``--peak-seconds`` on the same threads, so a layer's share of the peak is taken against the
peak of its own round (the host's speed may move between rounds). Per conv workload: its
launches, ms per inference, GFLOP/s and median share of the peak (FLOPs of the direct conv: a
Winograd layer does fewer, and can pass 100%); then the conv layers' and the other nodes' ms,
and the bound: the network's ms with every conv layer below the peak brought up to it (the
others as measured), and the speed-up that would be. A depthwise layer's few FLOPs per byte
leave it far below the peak.

The memory floor: when the network's conv weights outgrow the last-level cache (ResNet-18's
42.6 MiB against a 32 MiB L3), every inference reads them from memory, and no schedule can run a
layer faster than its weights take to read (direct-conv weights: a Winograd layer reads more).
After each round the read bandwidth is measured on the same threads (a buffer of
``BANDWIDTH_BUFFER_LLC`` x the cache, at least ``BANDWIDTH_BUFFER_MIN_BYTES``, summed by numpy
on one Python thread per CPU: numpy releases the GIL), and a layer's floor is the larger of its
FLOPs at the peak and its weights at that bandwidth; the second bound brings every layer below
its floor up to it. numpy's sum may read slower than the hardware can, so the floor is an
estimate, not a proof.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from pyvta.compiler.backend.llvm.peak import peak_gflops, slowest_thread_s
from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.targets.cpu.kernels import CpuKernels, node_workload
from pyvta.runtime.compiled_model import run_model

BANDWIDTH_BUFFER_LLC = 4  # the bandwidth's buffer, in last-level caches
BANDWIDTH_BUFFER_MIN_BYTES = 256 << 20


def last_level_cache_bytes() -> int | None:
    """The largest cache CPU 0 reports (Linux ``sysfs``), None where it says nothing."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=None)


def read_bandwidth_gbs(buffer: np.ndarray, threads: int) -> float:
    """GB/s reading ``buffer`` (float32, larger than the caches) once, split over ``threads``
    Python threads: its bytes over the slowest thread's time."""
    parts = np.array_split(buffer, threads)
    return buffer.nbytes / slowest_thread_s(lambda k: parts[k].sum(), threads) / 1e9


def compiled_convs(onnx: str, schedules):
    """``(compiled model, conv node -> its workload)`` of the network ``onnx`` compiled for the
    CPU with ``schedules`` (None: the defaults)."""
    cm = compile_model(onnx, "cpu", cpu_schedules=schedules)
    g = cm.graph
    return cm, {
        n.name: node_workload(n, g.values[n.inputs[0]].shape)
        for n in g.nodes
        if n.op == "cpu_conv2d"
    }


def measure(onnx: str, schedules, args, llc_bytes: int | None):
    """The network's rounds: ``(work, layer_ms, other_ms, peaks, bandwidths)``: each conv
    node's workload, per workload key its ms per round (all launches), the other nodes' ms,
    the FMA peak (GFLOP/s) and the read bandwidth (GB/s) after each round."""
    cm, work = compiled_convs(onnx, schedules)
    kernels = {"cpu": CpuKernels(cm.graph, args.threads)}
    x = zoo.sample_inputs(1, args.size, 0)[0]
    buffer_bytes = max(BANDWIDTH_BUFFER_MIN_BYTES, BANDWIDTH_BUFFER_LLC * (llc_bytes or 0))
    buffer = np.ones(buffer_bytes // 4, dtype=np.float32)
    run_model(cm, x, backends=kernels)  # warm-up
    layer_ms: dict[str, list[float]] = defaultdict(list)
    other_ms, peaks, bandwidths = [], [], []
    for _ in range(args.rounds):
        run_model(cm, x, backends=kernels)  # after the bandwidth's read: the caches refilled
        rows = run_model(cm, x, backends=kernels)[1].rows
        peaks.append(statistics.median(peak_gflops(args.threads, args.peak_seconds, 1)))
        bandwidths.append(read_bandwidth_gbs(buffer, args.threads))
        per: dict[str, float] = defaultdict(float)
        other = 0.0
        for row in rows:
            if row.node in work:
                per[work[row.node].key] += row.ms
            else:
                other += row.ms
        other_ms.append(other)
        for key, ms in per.items():
            layer_ms[key].append(ms)
    return work, layer_ms, other_ms, peaks, bandwidths


def headroom(onnx: str, schedules, args) -> dict[str, float]:
    """Per-layer throughput against the paired peak and the memory floor; prints the table,
    returns the sums and both bounds."""
    llc = last_level_cache_bytes()
    work, layer_ms, other_ms, peaks, bandwidths = measure(onnx, schedules, args, llc)
    flops: dict[str, int] = defaultdict(int)  # per inference, all launches
    weights: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    for w in work.values():
        flops[w.key] += w.flops
        weights[w.key] += w.weight_bytes
        count[w.key] += 1
    share = {
        key: [flops[key] / (ms * 1e6) / p for ms, p in zip(times, peaks, strict=True)]
        for key, times in layer_ms.items()
    }
    peak, bandwidth = statistics.median(peaks), statistics.median(bandwidths)
    from_memory = llc is not None and sum(weights.values()) > llc
    print(
        f"  FMA peak over the rounds: median {peak:.1f} GFLOP/s (min {min(peaks):.1f},"
        f" max {max(peaks):.1f}) on {args.threads} threads; read bandwidth median"
        f" {bandwidth:.1f} GB/s (min {min(bandwidths):.1f}, max {max(bandwidths):.1f})"
    )
    llc_text = f"{llc / 2**20:.0f} MiB" if llc else "unknown"
    print(
        f"  conv weights {sum(weights.values()) / 2**20:.1f} MiB, last-level cache {llc_text}:"
        f" {'read from memory every inference' if from_memory else 'no memory floor'}"
    )
    print(f"  {'conv layer (direct-conv FLOPs)':<64} {'n':>2} {'ms':>7} {'GFLOP/s':>8}"
          f" {'of peak':>8} {'MiB':>6} {'floor ms':>8}")  # fmt: skip

    def floor_ms(key: str) -> float:
        mem = weights[key] / (bandwidth * 1e6) if from_memory else 0.0
        return max(flops[key] / (peak * 1e6), mem)

    conv = 0.0
    for key in sorted(layer_ms, key=lambda k: -statistics.median(layer_ms[k])):
        ms = statistics.median(layer_ms[key])
        conv += ms
        print(f"  {key[:64]:<64} {count[key]:>2} {ms:7.3f} {flops[key] / (ms * 1e6):8.1f}"
              f" {100 * statistics.median(share[key]):7.1f}% {weights[key] / 2**20:6.2f}"
              f" {floor_ms(key):8.3f}")  # fmt: skip
    other = statistics.median(other_ms)
    # a layer below the peak (its floor) brought up to it; one above (a Winograd layer does
    # fewer FLOPs than the direct conv counted here) kept as measured
    at_peak = sum(min(statistics.median(t), flops[k] / (peak * 1e6)) for k, t in layer_ms.items())
    at_floor = sum(min(statistics.median(t), floor_ms(k)) for k, t in layer_ms.items())
    total = conv + other
    print(f"  conv layers {conv:.2f} ms ({sum(flops.values()) / (conv * 1e6):.1f} GFLOP/s,"
          f" {100 * sum(flops.values()) / (conv * 1e6) / peak:.1f}% of the peak), other nodes"
          f" {other:.2f} ms; every conv layer below the peak at the peak: {at_peak + other:.2f}"
          f" ms, at most {total / (at_peak + other):.2f}x the network; below its floor at"
          f" its floor: {at_floor + other:.2f} ms,"
          f" at most {total / (at_floor + other):.2f}x")  # fmt: skip
    return {
        "conv_ms": conv,
        "other_ms": other,
        "bound": total / (at_peak + other),
        "floor_bound": total / (at_floor + other),
    }


def add_model_arguments(ap: argparse.ArgumentParser, rounds: int) -> None:
    """The options of a benchmark of the zoo's networks on the CPU (:func:`model_variants`)."""
    ap.add_argument("--models", default="resnet18,mobilenet")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--logs", default="", help="folder of MODEL_SIZE_cpu.jsonl: also the tuned")
    ap.add_argument("--models-dir", dest="models_dir", default="out/headroom",
                    help="where the zoo's models are saved")  # fmt: skip


def model_variants(args, ap: argparse.ArgumentParser):
    """``(model, "default" | "tuned", onnx path, schedules)`` for each of ``--models`` (saved
    from the zoo, seed 0, into ``--models-dir``): the compiler's default schedules, and with
    ``--logs`` the tuned ones (``tuned_schedules``: the in-network choices first)."""
    from pyvta.tuner.cpu_network import tuned_schedules

    if args.rounds < 1 or args.threads < 1:
        ap.error("--rounds and --threads must be >= 1")
    folder = Path(args.models_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for model in args.models.split(","):
        onnx = folder / f"{model}_{args.size}.onnx"
        if not onnx.exists():
            zoo.save_model(model, str(onnx), size=args.size, seed=0)
        yield model, "default", str(onnx), None
        if args.logs:
            log = Path(args.logs) / f"{model}_{args.size}_cpu.jsonl"
            if not log.exists():
                ap.error(f"--logs: no {log}")
            yield model, "tuned", str(onnx), tuned_schedules(str(onnx), str(log))


def each_variant(args, ap: argparse.ArgumentParser, measure_fn, what: str) -> int:
    """``measure_fn(onnx, schedules, args)`` on each of :func:`model_variants`, under a line
    naming the model, its schedules and ``what``; then the seconds it all took."""
    t0 = time.perf_counter()
    for model, name, onnx, schedules in model_variants(args, ap):
        print(f"{model}, {name} schedules, {what}:")
        measure_fn(onnx, schedules, args)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(ap, rounds=20)
    ap.add_argument("--peak-seconds", dest="peak_seconds", type=float, default=0.2)
    args = ap.parse_args(argv)
    if args.peak_seconds <= 0:
        ap.error("--peak-seconds must be > 0")
    return each_variant(args, ap, headroom, f"{args.rounds} rounds")


if __name__ == "__main__":
    raise SystemExit(main())
