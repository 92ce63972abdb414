"""The pointwise (1x1) template's untuned tiles on the host: blocks per tile, passes, and what the
rule of 3 blocks changes in whole networks.

    .venv/bin/python benchmarks/cpu_pointwise_tiles.py [--rounds 60]
        [--models regnetx600mf,regnetx400mf,mobilenet] [--seeds 0-59]
        [--before tile_blocks=3:2,pixel_tiles=4]

Side by side in one process (2 threads, wall clock, each round in a seeded random order):

- layers: 1x1 convs alone (hot buffers), the untuned knobs beside tiles of 1, 2 and 3 output
  blocks (where they divide the layer's and fit the registers), each in passes of 8 input
  blocks and in one pass; ms, GFLOP/s and the untuned time over each (paired). The layers are
  RegNetX's (33 and 15 blocks, which 2 does not divide; 6 blocks), one whose passes do not
  divide its 30 input blocks, and two of MobileNet's;
- networks: the zoo's ``--models`` and the generated networks of ``--seeds`` with a pointwise
  layer the rules change, compiled by the rules of before (``--before``; by default
  ``pointwise.TILE_BLOCKS`` ``(2,)``: 2 blocks or one; no layer's pixels across threads,
  ``PIXEL_TASKS_BELOW_TILES`` 0) and as they are, beside onnxruntime; outputs compared, the
  paired speed-up.

Blocks of one vector only (AVX-512's 16 lanes, 32 registers): elsewhere the rule takes one
block per tile and there is nothing to compare.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time

import numpy as np
import onnx
from cpu_channel_blocks import interleaved

from pyvta import compiler
from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import onnxruntime_session
from pyvta.compiler.ops.cpu import pointwise
from pyvta.compiler.ops.cpu.nchwc import SPARE_REGISTERS
from pyvta.compiler.targets.cpu import kernels
from pyvta.runtime.arrays import aligned_copy
from pyvta.runtime.compiled_model import run_model
from pyvta.testing import netgen
from pyvta.tuner.in_network_confirm import paired_ratio, round_order

LAYERS = ((528, 528, 7), (240, 240, 14), (96, 96, 28), (480, 480, 7), (1024, 1024, 7),
          (256, 256, 28), (32, 16, 112), (48, 48, 56))  # fmt: skip
"""(C, K, H = W) of 1x1 stride-1 layers: RegNetX-600MF's 528 and 240 channels, RegNetX's 96,
480 (passes of 8 blocks do not divide 30), MobileNet's 1024 and 256, MobileNetV2's 32 -> 16
(one block: one tile), RegNetX's 48 (3 blocks)."""
THREADS = 2


def layer_variants(wl) -> dict[str, dict]:
    """The untuned knobs of 1x1 layer ``wl`` and tiles of 1, 2 and 3 blocks (the untuned pixel
    count for that many blocks, blocks across threads), in passes of ``K_BLOCKS`` (where they
    run) and in one pass, and in one pass with the pixel tiles across threads too."""
    target = kernels.host_target()
    room = target.vector_registers - SPARE_REGISTERS
    blocks = wl.o // wl.ob
    out = {"untuned": kernels.default_conv_schedule(wl)["knobs"]}
    for b in (1, 2, 3):
        if blocks % b or (b > 1 and b >= blocks):
            continue
        saved = pointwise.TILE_BLOCKS, pointwise.PIXEL_TASKS_BELOW_TILES
        pointwise.TILE_BLOCKS, pointwise.PIXEL_TASKS_BELOW_TILES = (b,), 0
        try:
            k = pointwise.PointwiseKnobs.for_target(target, wl.h * wl.w, wl.ob, blocks).to_dict()
        finally:
            pointwise.TILE_BLOCKS, pointwise.PIXEL_TASKS_BELOW_TILES = saved
        if k["p_block"] * b > room:
            continue
        for kb in (pointwise.K_BLOCKS, 0):
            knobs = {**k, "k_blocks": kb}
            passes = pointwise.in_passes(pointwise.PointwiseKnobs(**knobs), wl)
            name = f"{b} x {k['p_block']}, {f'passes of {kb}' if passes else 'one pass'}"
            out.setdefault(name, knobs)  # k_blocks 0 where K_BLOCKS runs one pass: the same
        pixels = {**k, "k_blocks": 0, "tile_order": "pixels", "parallel_loops": 2}
        out[f"{b} x {k['p_block']}, one pass, pixels across threads"] = pixels
    return out


def bench_layers(rounds: int) -> None:
    """Each of ``LAYERS`` built and run on ``THREADS`` threads (a kernel is built for the pool
    it runs in)."""
    with kernels.pool_scope(THREADS):
        _bench_layers(rounds)


def _bench_layers(rounds: int) -> None:
    rng = np.random.default_rng(0)
    for c, o, hw in LAYERS:
        wl = kernels.ConvWorkload(c, hw, hw, o, (1, 1), (1, 1), (0, 0, 0, 0), 16, 16)
        x = aligned_copy(rng.standard_normal((1, c // 16, hw * hw, 16)).astype(np.float32))
        w = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        calls, outs = {}, {}
        for name, knobs in layer_variants(wl).items():
            schedule = {"template": "pointwise", "knobs": knobs}
            s, args = kernels.conv_schedule(wl, schedule)
            f = compiler.build(s, args)
            wt = aligned_copy(kernels.conv_weights(schedule, w, 16, 16).reshape(args[1].shape))
            out = np.zeros(args[-1].shape, np.float32)
            calls[name] = lambda f=f, x=x, wt=wt, b=b, out=out: f(x, wt, b, out)
            calls[name]()
            outs[name] = out
        ref = outs["untuned"]
        for name, out in outs.items():
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            assert err < 1e-4, f"{wl.key} {name}: wrong result ({err:.2g})"
        ms = {n: [] for n in calls}
        for r in range(rounds):
            for n in round_order(list(calls), r):
                t0 = time.perf_counter()
                calls[n]()
                ms[n].append((time.perf_counter() - t0) * 1e3)
        k = layer_variants(wl)["untuned"]
        order = ", pixels across threads" if k["tile_order"] == "pixels" else ""
        print(
            f"{c} -> {o} 1x1 at {hw} x {hw} ({o // 16} blocks; untuned {k['oc_blocks']} x"
            f" {k['p_block']}, k_blocks {k['k_blocks']}, "
            f"{'passes' if pointwise.in_passes(pointwise.PointwiseKnobs(**k), wl) else 'one pass'}"
            f"{order}):"
        )
        for n, v in ms.items():
            med = statistics.median(v)
            print(
                f"  {n:24s} {med:.4f} ms {wl.flops / med / 1e6:6.1f} GFLOP/s"
                f"  untuned / this {paired_ratio(ms['untuned'], v):.3f}x (paired)"
            )


BEFORE = {"TILE_BLOCKS": (2,), "PIXEL_TASKS_BELOW_TILES": 0}
"""The rules a network is compiled by "before" (``--before``): ``pointwise``'s constants."""


def compiled(path: str, before: bool = False):
    """The cpu artifact of ``path``; ``before``: by the rules of ``BEFORE``."""
    saved = {k: getattr(pointwise, k) for k in BEFORE}
    try:
        if before:
            for k, v in BEFORE.items():
                setattr(pointwise, k, v)
        return compile_model(path, "cpu")
    finally:
        for k, v in saved.items():
            setattr(pointwise, k, v)


def pointwise_knobs(cm) -> list[str]:
    return [
        str(n.attrs["schedule"]["knobs"])
        for n in cm.graph.nodes
        if n.op == "cpu_conv2d" and n.attrs["schedule"]["template"] == "pointwise"
    ]


def bench_network(name: str, path: str, x: dict, rounds: int) -> float | None:
    built = {"before": compiled(path, before=True), "now": compiled(path)}
    before, now = (pointwise_knobs(built[k]) for k in ("before", "now"))
    changed = sum(a != b for a, b in zip(before, now, strict=True))
    if not changed:
        return None
    sess = onnxruntime_session(path, threads=THREADS, spin=False)
    ref = sess.run(None, x)[0]
    for k, cm in built.items():
        err = float(np.abs(run_model(cm, x)[0][0] - ref).max() / np.abs(ref).max())
        assert err < 1e-4, f"{name} {k}: wrong result ({err:.2g})"
    ms = interleaved(built, x, rounds, min_s=3.0)
    ort = []
    for _ in range(len(ms["now"])):
        t0 = time.perf_counter()
        sess.run(None, x)
        ort.append((time.perf_counter() - t0) * 1e3)
    up = paired_ratio(ms["before"], ms["now"])
    b, n, o = (statistics.median(v) for v in (ms["before"], ms["now"], ort))
    print(
        f"{name}: {changed} of {len(now)} pointwise layers changed; before {b:.3f} ms, now"
        f" {n:.3f} ms: {up:.3f}x (paired, {len(ms['now'])} rounds); onnxruntime after them"
        f" {o:.3f} ms ({o / b:.2f}x -> {o / n:.2f}x)",
        flush=True,
    )
    return up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--models", default="regnetx600mf,regnetx400mf,mobilenet_v2,mobilenet")
    ap.add_argument("--seeds", default=None, metavar="A-B", help="generated networks A..B too")
    ap.add_argument("--no-layers", action="store_true", help="the networks only")
    ap.add_argument(
        "--before",
        default="tile_blocks=2,pixel_tiles=0",
        help="the rules of before: tile_blocks=B[:B...] (TILE_BLOCKS), pixel_tiles=N"
        " (PIXEL_TASKS_BELOW_TILES)",
    )
    args = ap.parse_args()
    names = {"tile_blocks": "TILE_BLOCKS", "pixel_tiles": "PIXEL_TASKS_BELOW_TILES"}
    for item in args.before.split(","):
        key, _, value = item.partition("=")
        if key not in names:
            ap.error(f"--before {item!r}: allowed keys {', '.join(names)}")
        parts = tuple(int(v) for v in value.split(":"))
        BEFORE[names[key]] = parts if key == "tile_blocks" else parts[0]
    host = kernels.host_target()
    print(
        f"host: {host.cpu}, {host.vector_lanes('float32')} float32 lanes,"
        f" {host.vector_registers} vector registers; {THREADS} threads; TILE_BLOCKS"
        f" {pointwise.TILE_BLOCKS}, before {BEFORE['TILE_BLOCKS']}; PIXEL_TASKS_BELOW_TILES"
        f" {pointwise.PIXEL_TASKS_BELOW_TILES}, before {BEFORE['PIXEL_TASKS_BELOW_TILES']}"
    )
    if host.vector_lanes("float32") < 16:
        raise SystemExit(
            "blocks of 16 channels are two vectors here: one block a tile (AVX-512 only)"
        )
    if not args.no_layers:
        bench_layers(args.rounds)
    folder = tempfile.mkdtemp(prefix="pyvta-pointwise-")
    ups = []
    for name in filter(None, args.models.split(",")):
        path = zoo.save_model(name, f"{folder}/{name}.onnx")
        x = {"input": zoo.sample_inputs(1, 224, 0)[0]}
        ups.append(bench_network(name, path, x, args.rounds))
    if args.seeds:
        a, _, b = args.seeds.partition("-")
        for seed in range(int(a), int(b or a) + 1):
            model = netgen.random_network(seed)
            path = f"{folder}/net{seed}.onnx"
            onnx.save(model, path)
            x = {"input": netgen.sample_input(model, seed + 100)}
            ups.append(bench_network(f"net{seed}", path, x, args.rounds))
    ups = [u for u in ups if u is not None]
    if ups:
        g = math.exp(sum(map(math.log, ups)) / len(ups))
        print(
            f"{len(ups)} networks changed: now {g:.3f}x before (geomean; {min(ups):.3f}-"
            f"{max(ups):.3f}x)"
        )


if __name__ == "__main__":
    main()
