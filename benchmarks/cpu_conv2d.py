"""ResNet-18 conv2d layers (NCHW, batch 1, "same" padding) on the host CPU: our best schedule
vs onnxruntime, both on 2 threads.

Run: .venv/bin/python benchmarks/cpu_conv2d.py [--layers C2,C6,C9,C12] [--rounds 7]

Two of our schedules run per layer: "direct" (blocked weights, register-tiled direct
convolution, ``compiler.ops.cpu.conv2d``) and "winograd" (F(2x2, 3x3), ``compiler.ops.cpu.
winograd``: 2.25x fewer multiplications). Both take NCHW data and return NCHW output, padding
and input/output transforms included in the time; the weights are packed / transformed once
ahead of time (they are constants, as onnxruntime's are initializers). onnxruntime runs a
one-node ONNX graph built with ``onnx.helper`` (its default direct convolution). Runs are
interleaved round by round on this shared machine and each reports its best round.
Ratio = onnxruntime time / our best schedule's time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyvta import compiler
from pyvta.compiler.ops.cpu import Conv2dKnobs, conv2d_nchw_blocked
from pyvta.compiler.ops.cpu.conv2d import pack_weights
from pyvta.compiler.ops.cpu.winograd import WinogradKnobs, conv2d_winograd, transform_weights
from pyvta.runtime.arrays import aligned_copy, aligned_empty

THREADS = 2

# name: (H=W, C, O, kernel, stride) from shared/reference/anchors.md
LAYERS = {
    "C2": (56, 64, 64, 3, 1),
    "C6": (28, 128, 128, 3, 1),
    "C9": (14, 256, 256, 3, 1),
    "C12": (7, 512, 512, 3, 1),
}

# best knobs found on this machine (the tuner's starting points)
KNOBS = {
    "C2": Conv2dKnobs(ic=16, oc=32, ow_block=14),
    "C6": Conv2dKnobs(ic=16, oc=32, ow_block=14),
    "C9": Conv2dKnobs(ic=16, oc=32, ow_block=14),
    "C12": Conv2dKnobs(ic=16, oc=32, ow_block=7),
}


WINOGRAD_KNOBS = {
    "C2": WinogradKnobs(p_block=14, k_block=32),
    "C6": WinogradKnobs(p_block=14, k_block=32),
    "C9": WinogradKnobs(p_block=7, k_block=64),
    "C12": WinogradKnobs(p_block=8, k_block=32),
}


def mean_ms(fn, number: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number * 1e3


def ort_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int):
    from onnx import helper

    from pyvta.compiler.graph.reference import onnxruntime_session
    from pyvta.compiler.graph.zoo import float_model

    n, _, h, wd = x.shape
    o, _, k, _ = w.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    node = helper.make_node("Conv", ["X", "W"], ["Y"], pads=[pad] * 4, strides=[stride] * 2)
    model = float_model([node], {"X": x.shape}, {"Y": (n, o, oh, ow)}, {"W": w}, opset=13)
    sess = onnxruntime_session(model, threads=THREADS, spin=False)
    return lambda: sess.run(None, {"X": x})[0]


def bench_layer(name: str, rounds: int, number: int, seed: int) -> float:
    hw, c, o, k, stride = LAYERS[name]
    pad = k // 2
    rng = np.random.default_rng(seed)
    x = aligned_copy(rng.standard_normal((1, c, hw, hw), dtype=np.float32))
    w = rng.standard_normal((o, c, k, k), dtype=np.float32)
    ort_run = ort_conv(x, w, stride, pad)
    ref = ort_run()
    runs = {"onnxruntime": ort_run}
    # direct: weights packed to OIHW{ic}i{oc}o (64-byte aligned, as onnxruntime's buffers)
    dk = KNOBS[name]
    s, args = conv2d_nchw_blocked(c, hw, hw, o, k, stride, pad, dk)
    direct = compiler.build(s, args, num_threads=THREADS)
    wp = aligned_copy(pack_weights(w, dk.ic, dk.oc))
    out_d = aligned_empty(args[2].shape, "float32")
    runs["direct"] = lambda: direct(x, wp, out_d)
    outs = {"direct": out_d}
    if k == 3 and stride == 1:
        wk = WINOGRAD_KNOBS[name]
        s, args = conv2d_winograd(c, hw, hw, o, wk)
        wino = compiler.build(s, args, num_threads=THREADS)
        u = aligned_copy(transform_weights(w, wk.k_block))
        out_w = aligned_empty(args[2].shape, "float32")
        runs["winograd"] = lambda: wino(x, u, out_w)
        outs["winograd"] = out_w
    for key, out in outs.items():
        runs[key]()
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        assert err < 1e-5, f"{name} {key}: wrong result, relative error {err}"
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for key, fn in runs.items():
            best[key] = min(best[key], mean_ms(fn, number))
    flops = 2.0 * o * ref.shape[2] * ref.shape[3] * c * k * k
    ours = min((key for key in runs if key != "onnxruntime"), key=best.get)
    ratio = best["onnxruntime"] / best[ours]
    parts = [f"{key} {ms:.3f} ms ({flops / ms / 1e6:.0f} GFLOPS-equiv)" for key, ms in best.items()]
    print(f"{name:4s} {hw}x{hw} {c}->{o} k{k} s{stride}: " + ", ".join(parts))
    direct_ratio = best["onnxruntime"] / best["direct"]
    print(
        f"     best ours: {ours}, ratio vs onnxruntime {ratio:.2f}x "
        f"(direct schedule alone: {direct_ratio:.2f}x)"
    )
    return ratio, direct_ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="C2,C6,C9,C12")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"conv2d float32 NCHW batch 1, {THREADS} threads, seed {args.seed}")
    both = {n: bench_layer(n, args.rounds, args.number, args.seed) for n in args.layers.split(",")}
    wins = sum(r >= 1.0 for r, _ in both.values())
    print(
        "ratios vs onnxruntime (best schedule): "
        + ", ".join(f"{n} {r:.2f}x" for n, (r, _) in both.items())
        + f"; layers at >= 1.0x: {wins} (target: at least 2)"
    )
    print(
        "ratios vs onnxruntime (direct schedule only): "
        + ", ".join(f"{n} {d:.2f}x" for n, (_, d) in both.items())
    )


if __name__ == "__main__":
    main()
