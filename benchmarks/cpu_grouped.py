"""Grouped convs on the CPU (ResNeXt's and RegNet's kinds): pyvta's untuned schedule beside the
tile the dense rule gives the same layer (on AVX-512, two output blocks a tile: what grouped
convs ran before their tile took one block) and onnxruntime, side by side in one run, as
one-conv networks and as a zoo network.

Run: .venv/bin/python benchmarks/cpu_grouped.py [--rounds 40] [--threads 2]
     [--network resnext50] [--size 224] [--cases all]

Each one-conv network is a 3x3 grouped conv with bias and relu on a seeded input (``CASES``:
ResNeXt-50 32x4d's four stages and RegNet-like groups of 16-24 channels); the network is the
zoo's (``--network none``: none). Three runs each, interleaved one inference at a time per
round, the first of each round the next one: onnxruntime (spinning off), pyvta's untuned
network (``compile_model(..., "cpu")``), and pyvta with each grouped direct layer on the dense
rule's tile (``default_direct_knobs`` of the layer without its groups; the same when that is
already one block, as with AVX2's blocks of two vectors: then the row says so and runs two).
Medians over the rounds, untuned / dense rule as a ratio of medians and paired per round;
outputs must agree with onnxruntime within 1e-4. Ratio = onnxruntime / pyvta.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import onnxruntime_session
from pyvta.compiler.targets.cpu.kernels import (
    CpuKernels,
    default_conv_schedule,
    default_direct_knobs,
)
from pyvta.runtime.compiled_model import run_model
from pyvta.testing.side_by_side import rel_err, rotated, timed_ms
from pyvta.tuner.cpu_measure import cpu_target_info
from pyvta.tuner.cpu_network import cpu_network_layers
from pyvta.tuner.in_network_confirm import paired_ratio

MAX_REL_ERR = 1e-4
# name -> (channels in and out, height and width, groups): a 3x3 stride-1 grouped conv
CASES = {
    "resnext50 stage 1": (128, 56, 32),
    "resnext50 stage 2": (256, 28, 32),
    "resnext50 stage 3": (512, 14, 32),
    "resnext50 stage 4": (1024, 7, 32),
    "group width 16 at 56": (64, 56, 4),
    "group width 24 at 28": (96, 28, 4),
    "group width 16 at 28": (128, 28, 8),
    "group width 24 at 14": (240, 14, 10),
}


def grouped_conv_model(channels: int, size: int, groups: int, seed: int = 0) -> onnx.ModelProto:
    """A one-conv network: 3x3, stride 1, pad 1, ``groups`` groups, bias, relu."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((channels, channels // groups, 3, 3)) * np.sqrt(
        2 / (channels // groups * 9)
    )
    b = 0.1 * rng.standard_normal(channels)
    nodes = [
        helper.make_node("Conv", ["input", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3],
                         pads=[1] * 4, group=groups),
        helper.make_node("Relu", ["y"], ["out"], name="relu"),
    ]  # fmt: skip
    shape = (1, channels, size, size)
    inits = {"w": w.astype(np.float32), "b": b.astype(np.float32)}
    return zoo.float_model(nodes, {"input": shape}, {"out": shape}, inits, name="grouped")


def dense_rule_schedules(path: str) -> dict:
    """``{workload key: schedule}`` of the grouped direct layers of ``path`` whose tile under the
    dense rule (the layer's untuned knobs as if it had no groups) is not their untuned one."""
    out = {}
    for layer in cpu_network_layers(path):
        wl = layer.workload
        untuned = default_conv_schedule(wl)
        if wl.groups is None or untuned["template"] != "direct":
            continue
        knobs = {
            **default_direct_knobs(replace(wl, groups=None)),
            "parallel": untuned["knobs"]["parallel"],
        }
        if knobs != untuned["knobs"]:
            out[wl.key] = {"template": "direct", "knobs": knobs}
    return out


def side_by_side(path: str, feeds: dict, rounds: int, threads: int) -> dict:
    """Medians (ms) of onnxruntime, pyvta untuned and (where it differs) pyvta with the dense
    rule's tiles, interleaved; ``paired``: untuned against the dense rule per round."""
    sess = onnxruntime_session(path, threads=threads, spin=False)
    ref = sess.run(None, feeds)[0]
    runs = {"onnxruntime": lambda: sess.run(None, feeds)}
    variants = {"untuned": None}
    dense = dense_rule_schedules(path)
    if dense:
        variants["dense rule"] = dense
    for name, schedules in variants.items():
        cm = compile_model(path, "cpu", cpu_schedules=schedules)
        backends = {"cpu": CpuKernels(cm.graph, threads)}
        err = rel_err(run_model(cm, feeds, backends=backends)[0][0], ref)
        if not err < MAX_REL_ERR:
            raise AssertionError(f"{path} {name}: relative error {err:.3g} >= {MAX_REL_ERR}")
        runs[name] = lambda cm=cm, b=backends: run_model(cm, feeds, backends=b)
    for fn in runs.values():
        fn()  # a warm-up each
    names = list(runs)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in rotated(names, r):
            times[k].append(timed_ms(runs[k]))
    out = {k: float(np.median(v)) for k, v in times.items()}
    out["layers"] = len(dense)
    if dense:
        out["paired"] = paired_ratio(times["dense rule"], times["untuned"])
    return out


def row(name: str, ms: dict) -> str:
    ort = ms["onnxruntime"]
    text = f"  {name:24s} onnxruntime {ort:7.3f}  untuned {ms['untuned']:7.3f} ({ort / ms['untuned']:.2f}x)"
    if "dense rule" in ms:
        d = ms["dense rule"]
        text += (
            f"  dense rule {d:7.3f} ({ort / d:.2f}x)  untuned / dense rule"
            f" {d / ms['untuned']:.3f}x (paired {ms['paired']:.3f}x)"
        )
    else:
        text += "  (the dense rule's tile is the untuned one here)"
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cases", default="all", help=f"comma-separated of: {', '.join(CASES)}; or none"
    )
    ap.add_argument("--network", default="resnext50", help="a zoo network, or none")
    ap.add_argument("--size", type=int, default=224, help="the network's input size")
    a = ap.parse_args(argv)
    names = list(CASES) if a.cases == "all" else [] if a.cases == "none" else a.cases.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown} (allowed: {', '.join(CASES)})")
    print(f"host: {cpu_target_info()}; {a.threads} threads, {a.rounds} rounds, medians in ms")
    folder = Path(tempfile.mkdtemp(prefix="pyvta-grouped-"))
    rng = np.random.default_rng(0)
    print("seed 0 (weights and inputs)")
    for name in names:
        c, size, groups = CASES[name]
        path = str(folder / f"g{c}_{size}_{groups}.onnx")
        onnx.save(grouped_conv_model(c, size, groups), path)
        feeds = {"input": rng.standard_normal((1, c, size, size)).astype(np.float32)}
        label = f"{name} ({c} ch, {groups} groups, {size}x{size})"
        print(row(label, side_by_side(path, feeds, a.rounds, a.threads)), flush=True)
    if a.network != "none":
        path = zoo.save_model(a.network, str(folder / f"{a.network}.onnx"), size=a.size, seed=0)
        feeds = {"input": zoo.sample_inputs(1, a.size, 0)[0]}
        ms = side_by_side(path, feeds, a.rounds, a.threads)
        print(
            row(
                f"{a.network} {a.size}x{a.size} ({ms['layers']} layers on the dense rule's tile)",
                ms,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
