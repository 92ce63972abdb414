"""Grouped convs on the CPU (ResNeXt's and RegNet's kinds): pyvta's untuned schedule beside the
schedules grouped layers ran before, and onnxruntime, side by side in one run, as one-conv
networks and as a zoo network.

Run: .venv/bin/python benchmarks/cpu_grouped.py [--rounds 40] [--threads 2]
     [--network resnext50] [--size 224] [--cases all]

Each one-conv network is a 3x3 grouped conv with bias and relu on a seeded input (``CASES``:
ResNeXt-50 32x4d's four stages and RegNet-like groups of 16-24 channels); the network is the
zoo's (``--network none``: none). Up to four runs each, interleaved one inference at a time per
round, each round in its own seeded random order: onnxruntime (spinning off), pyvta's untuned
network (``compile_model(..., "cpu")``), and where they differ from it: pyvta with each layer
of groups narrower than the channel block (now on the depthwise template) on the direct
template ("direct": its untuned grouped tile, as before), and with each grouped direct layer
on the dense rule's tile ("dense rule": ``default_direct_knobs`` of the layer without its
groups, two output blocks a tile on AVX-512, as before grouped tiles took one), and with each
layer whose groups straddle the blocks (now read exactly: ``GroupSpan.exact_tile``) on the
span of its groups' input blocks ("span": its untuned tile before, zeros past each channel's
group). Medians over
the rounds, untuned / variant as a ratio of medians and paired per round; outputs must agree
with onnxruntime within 1e-4. Ratio = onnxruntime / pyvta.
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
from pyvta.testing.side_by_side import rel_err, timed_ms
from pyvta.tuner.cpu_measure import cpu_target_info
from pyvta.tuner.cpu_network import cpu_network_layers
from pyvta.tuner.in_network_confirm import paired_ratio, round_order

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
    "group width 24 at 7": (528, 7, 22),
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


def _grouped_layers(path: str):
    """``(workload, untuned schedule)`` of each grouped layer of ``path``."""
    for layer in cpu_network_layers(path):
        if layer.workload.groups is not None:
            yield layer.workload, default_conv_schedule(layer.workload)


def direct_schedules(path: str) -> dict:
    """``{workload key: schedule}``: the layers of ``path`` whose groups are narrower than the
    channel block (untuned: the depthwise template) on the direct template, its untuned knobs."""
    return {
        wl.key: {
            "template": "direct",
            "knobs": {**default_direct_knobs(wl), "parallel": untuned["knobs"]["parallel"]},
        }
        for wl, untuned in _grouped_layers(path)
        if untuned["template"] == "depthwise"
    }


def _direct_rule_schedules(path: str, rule) -> dict:
    """``{workload key: schedule}`` of the grouped direct layers of ``path`` whose knobs by
    ``rule`` (workload -> direct knobs) are not their untuned ones (threads as untuned)."""
    out = {}
    for wl, untuned in _grouped_layers(path):
        if untuned["template"] != "direct":
            continue
        knobs = {**rule(wl), "parallel": untuned["knobs"]["parallel"]}
        if knobs != untuned["knobs"]:
            out[wl.key] = {"template": "direct", "knobs": knobs}
    return out


def dense_rule_schedules(path: str) -> dict:
    """The grouped direct layers of ``path`` whose tile under the dense rule (the layer's
    untuned knobs as if it had no groups) is not their untuned one."""
    return _direct_rule_schedules(path, lambda wl: default_direct_knobs(replace(wl, groups=None)))


def span_schedules(path: str) -> dict:
    """The grouped direct layers of ``path`` whose untuned tile reads exactly their groups'
    channels (``GroupSpan.exact_tile``), on the tile they had before: their groups' span of
    input blocks, zeros past each channel's group."""
    return _direct_rule_schedules(path, lambda wl: default_direct_knobs(wl, exact_groups=False))


VARIANTS = {"direct": direct_schedules, "dense rule": dense_rule_schedules, "span": span_schedules}


def side_by_side(path: str, feeds: dict, rounds: int, threads: int) -> dict:
    """Medians (ms) of onnxruntime, pyvta untuned and each of ``VARIANTS`` that differs from
    it, interleaved; ``paired``: untuned against each variant per round; ``layers``: the
    layers each variant changes."""
    sess = onnxruntime_session(path, threads=threads, spin=False)
    ref = sess.run(None, feeds)[0]
    runs = {"onnxruntime": lambda: sess.run(None, feeds)}
    variants = {"untuned": None}
    layers = {}
    for name, fn in VARIANTS.items():
        schedules = fn(path)
        if schedules:
            variants[name], layers[name] = schedules, len(schedules)
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
        for k in round_order(names, r):
            times[k].append(timed_ms(runs[k]))
    out = {k: float(np.median(v)) for k, v in times.items()}
    out["layers"] = layers
    out["paired"] = {k: paired_ratio(times[k], times["untuned"]) for k in layers}
    return out


def row(name: str, ms: dict) -> str:
    ort = ms["onnxruntime"]
    text = f"  {name:24s} onnxruntime {ort:7.3f}  untuned {ms['untuned']:7.3f} ({ort / ms['untuned']:.2f}x)"
    for k, paired in ms["paired"].items():
        v = ms[k]
        text += (
            f"  {k} {v:7.3f} ({ort / v:.2f}x)  untuned / {k} {v / ms['untuned']:.3f}x"
            f" (paired {paired:.3f}x)"
        )
    if not ms["paired"]:
        text += "  (every grouped layer's schedule is the one it ran before)"
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
        changed = ", ".join(f"{n} {k}" for k, n in ms["layers"].items()) or "none"
        print(row(f"{a.network} {a.size}x{a.size} (layers changed: {changed})", ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
