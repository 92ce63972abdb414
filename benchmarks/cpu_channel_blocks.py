"""Channel blocks of 8 against 16 on an AVX-512 host: what half a vector costs here, per channel.

    .venv/bin/python benchmarks/cpu_channel_blocks.py [--rounds 150] [--seeds 900-939]

The layout plan (``compiler.targets.cpu.alter_cpu_layout.channel_block``) gives a value of C
channels blocks of 16 (one AVX-512 vector) or 8 (half of one, run as 256-bit ops), weighing the
padding against ``HALF_VECTOR_COST``: what a channel in half a vector costs over one in a whole
vector, by LLVM CPU name. It differs by CPU (a Zen 4 issues 256-bit ops at twice the rate of its
double-pumped 512-bit ones; a Zen 5's 512-bit datapath does not), so this measures it on the
host, side by side in one process (2 threads by default, wall clock, each round in a seeded
random order):

- layers: two convs in a row (C -> K, then K -> K, "same" padding) compiled with blocks of 16
  forced, of 8 forced, and by the rule; their medians, 16's paired speed-up over 8, and the
  per-channel cost of half a vector that speed-up implies (the speed-up times the output
  channels padded to 16 over those padded to 8);
- with ``--seeds A-B``: the generated networks (``pyvta.testing.netgen``) whose blocks the host's
  entry changes, compiled with it and with ``HALF_VECTOR_COST_DEFAULT`` for every CPU, their
  outputs compared, and the paired speed-up of the host's rule.

A host without an entry runs the default both ways (no network changes); the layers' implied
cost is then what an entry for it would hold.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
import onnx
from onnx import helper

from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import float_model
from pyvta.compiler.targets.cpu import alter_cpu_layout as acl
from pyvta.compiler.targets.cpu.kernels import host_target
from pyvta.runtime.compiled_model import run_model
from pyvta.testing import netgen
from pyvta.tuner.in_network_confirm import paired_ratio, round_order

LAYERS = ((40, 40, 25, 3), (24, 24, 56, 3), (40, 40, 28, 5), (72, 72, 14, 3), (56, 72, 24, 5))
"""(C, K, H = W, kernel): channel counts whose blocks the rule decides by the padding."""


def two_convs(c: int, k: int, hw: int, ks: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    pads = [ks // 2] * 4
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], kernel_shape=[ks] * 2, pads=pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["out"], kernel_shape=[ks] * 2, pads=pads),
    ]
    inits = {
        "w1": (rng.standard_normal((k, c, ks, ks)) * 0.1).astype(np.float32),
        "b1": np.zeros(k, np.float32),
        "w2": (rng.standard_normal((k, k, ks, ks)) * 0.1).astype(np.float32),
        "b2": np.zeros(k, np.float32),
    }
    return float_model(nodes, {"input": (1, c, hw, hw)}, {"out": (1, k, hw, hw)}, inits)


def compiled(path: str, blocks=None, half_costs=None):
    """The cpu artifact of ``path`` with ``CHANNEL_BLOCKS`` / ``HALF_VECTOR_COST`` replaced
    for the compile (None: as they are)."""
    saved = acl.CHANNEL_BLOCKS, dict(acl.HALF_VECTOR_COST)
    try:
        if blocks is not None:
            acl.CHANNEL_BLOCKS = blocks
        if half_costs is not None:
            acl.HALF_VECTOR_COST.clear()
            acl.HALF_VECTOR_COST.update(half_costs)
        return compile_model(path, "cpu")
    finally:
        acl.CHANNEL_BLOCKS = saved[0]
        acl.HALF_VECTOR_COST.clear()
        acl.HALF_VECTOR_COST.update(saved[1])


def blocks_of(cm) -> list[int]:
    """The channel block of each blocked value the artifact's nodes produce."""
    shapes = [cm.graph.values[o].shape for n in cm.graph.nodes for o in n.outputs]
    return sorted(s[-1] for s in shapes if len(s) == 5)


def interleaved(built: dict, x: dict, rounds: int, min_s: float = 0.0) -> dict:
    """ms per inference of each artifact, ``rounds`` rounds (more, up to 300, until ``min_s``
    seconds passed), each round in its own seeded random order."""
    ms = {n: [] for n in built}
    for n in built:
        for _ in range(5):
            run_model(built[n], x)
    end, r = time.perf_counter() + min_s, 0
    while r < rounds or (time.perf_counter() < end and r < 300):
        for n in round_order(list(built), r):
            t0 = time.perf_counter()
            run_model(built[n], x)
            ms[n].append((time.perf_counter() - t0) * 1e3)
        r += 1
    return ms


def bench_layers(rounds: int, folder: str) -> None:
    implied = []
    for c, k, hw, ks in LAYERS:
        path = f"{folder}/convs_{c}_{k}_{hw}_{ks}.onnx"
        onnx.save(two_convs(c, k, hw, ks), path)
        x = {"input": np.random.default_rng(1).standard_normal((1, c, hw, hw)).astype(np.float32)}
        built = {"16": compiled(path, (16,)), "8": compiled(path, (8,)), "rule": compiled(path)}
        ms = interleaved(built, x, rounds)
        up = paired_ratio(ms["8"], ms["16"])
        pad = (-(-k // 16) * 16) / (-(-k // 8) * 8)  # 16's padded channels over 8's
        implied.append(up * pad)
        med = ", ".join(f"{n} {statistics.median(v):.3f}" for n, v in ms.items())
        print(
            f"{c} -> {k} {ks}x{ks} at {hw} x {hw}: ms {med} (rule: blocks"
            f" {sorted(set(blocks_of(built['rule'])))}); blocks of 16 {up:.3f}x blocks of 8"
            f" (paired), half a vector {up * pad:.2f}x a vector per channel",
            flush=True,
        )
    print(
        f"half a vector per channel: {min(implied):.2f}-{max(implied):.2f}x a whole vector's"
        f" (median {statistics.median(implied):.2f})"
    )


def bench_networks(first: int, last: int, rounds: int, folder: str, cpu: str) -> None:
    default = dict.fromkeys(acl.HALF_VECTOR_COST, acl.HALF_VECTOR_COST_DEFAULT)
    ups = []
    for seed in range(first, last + 1):
        model = netgen.random_network(seed)
        path = f"{folder}/net{seed}.onnx"
        onnx.save(model, path)
        built = {"default": compiled(path, half_costs=default), "host": compiled(path)}
        if blocks_of(built["default"]) == blocks_of(built["host"]):
            continue
        x = {"input": netgen.sample_input(model, seed + 100)}
        ref, out = (run_model(built[n], x)[0][0] for n in ("default", "host"))
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        ms = interleaved(built, x, 30, min_s=3.0)
        ups.append(paired_ratio(ms["default"], ms["host"]))
        print(
            f"net{seed}: the default cost {statistics.median(ms['default']):.3f} ms, {cpu}'s"
            f" {statistics.median(ms['host']):.3f} ms: {ups[-1]:.3f}x (paired, {len(ms['host'])}"
            f" rounds; outputs differ by {err:.1e})",
            flush=True,
        )
    if ups:
        g = math.exp(sum(map(math.log, ups)) / len(ups))
        print(
            f"{len(ups)} of {last - first + 1} networks' blocks changed: {cpu}'s cost"
            f" {g:.3f}x the default's (geomean; {min(ups):.3f}-{max(ups):.3f}x)"
        )
    else:
        print(f"no network's blocks changed ({cpu} has no entry, or none of these hit one)")


def main() -> None:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--seeds", default=None, metavar="A-B", help="generated networks A..B too")
    args = ap.parse_args()
    host = host_target()
    cost = acl.HALF_VECTOR_COST.get(host.cpu, acl.HALF_VECTOR_COST_DEFAULT)
    print(
        f"host: {host.cpu}, {host.vector_lanes('float32')} float32 lanes; half a vector costs"
        f" {cost:g}x a vector per channel in the layout plan"
        + ("" if host.cpu in acl.HALF_VECTOR_COST else " (the default: no entry for this CPU)")
    )
    if host.vector_lanes("float32") < 16:
        raise SystemExit("blocks of 8 are whole vectors here: nothing to measure (AVX-512 only)")
    folder = tempfile.mkdtemp(prefix="pyvta-blocks-")
    bench_layers(args.rounds, folder)
    if args.seeds:
        a, _, b = args.seeds.partition("-")
        bench_networks(int(a), int(b or a), args.rounds, folder, host.cpu)


if __name__ == "__main__":
    main()
