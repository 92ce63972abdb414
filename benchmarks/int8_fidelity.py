"""int8 fidelity: per-channel power-of-two weight scales vs one per tensor vs onnxruntime's int8,
each against onnxruntime float, on the zoo models and on seeded random networks (netgen seeds
no test uses), for both ``vta`` partitions, side by side in one run.

Rows per model (cosine of the logits to onnxruntime float: mean and min over the evaluation
inputs; top-1 agreement with float), each for the ``whole`` partition (the default: stem, pools
and classifier int8 on the accelerator) and the ``legacy`` one (float stem and classifier):

- ours per-tensor: ``compile_model(..., weight_scales=WeightScales.TENSOR)``, one weight scale
  per layer (the default),
- ours auto: ``WeightScales.AUTO``: per-channel where, on the
  calibration samples, it brings that layer's int8 output closer to its float output, kept only
  if the whole int8 graph's outputs are closer to float on them too (the count is printed),
- ours per-channel: ``WeightScales.CHANNEL``, wherever channels' scales differ,
- onnxruntime int8 QDQ per-tensor and per-channel (``quantize_static``, MinMax calibration on the
  same calibration inputs; scales that are not powers of two, zero points).

Ours run as the ``vta`` target's golden numpy model; ``cpu-int8`` and ``vta`` on the simulator and
the RTL are bit-exact with it (tests/unit/graph/test_per_channel.py), so one row stands for all.

    .venv/bin/python benchmarks/int8_fidelity.py [--zoo resnet18,resnet34,mobilenet]
        [--size 64] [--netgen 1001,...,1006] [--count 32] [--calibration 8]
        [--partitions whole,legacy]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from pyvta.compiler.graph import WeightScales
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine, onnxruntime_session
from pyvta.compiler.graph.zoo import build_model, sample_inputs
from pyvta.runtime.compiled_model import run_model
from pyvta.testing import netgen
from pyvta.testing.side_by_side import qdq_model

CALIBRATION_SEED, EVAL_SEED, MODEL_SEED = 1, 2, 0
# the quantized conv/dense layers of a compiled ``vta`` graph (CPU ones under --partition legacy)
LAYER_OPS = ("vta_conv2d", "vta_dense", "vta_conv2d_max_pool", "qconv2d", "qdense")
SCALES = {
    "per-tensor": WeightScales.TENSOR,
    "auto": WeightScales.AUTO,
    "per-channel": WeightScales.CHANNEL,
}


def _summary(ref: list[np.ndarray], out: list[np.ndarray]) -> tuple[float, float, float]:
    cos = np.array([cosine(r, o) for r, o in zip(ref, out, strict=True)])
    top1 = np.mean(
        [np.array_equal(r.argmax(-1), o.argmax(-1)) for r, o in zip(ref, out, strict=True)]
    )
    return float(cos.mean()), float(cos.min()), float(top1)


def _inputs(model: onnx.ModelProto, name: str, count: int, seed: int) -> list[np.ndarray]:
    if name.startswith("netgen"):
        return [netgen.sample_input(model, seed * 10_000 + i) for i in range(count)]
    size = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    return sample_inputs(count, size, seed)


def evaluate(name: str, model: onnx.ModelProto, args, tmp: Path) -> list[tuple[str, tuple]]:
    fp32 = tmp / f"{name}.onnx"
    onnx.save(model, fp32)
    calib = [{"input": x} for x in _inputs(model, name, args.calibration, CALIBRATION_SEED)]
    evals = _inputs(model, name, args.count, EVAL_SEED)
    ref_sess = onnxruntime_session(fp32, threads=2, spin=False)
    ref = [ref_sess.run(None, {"input": x})[0] for x in evals]
    rows = []
    for part, (label, scales) in itertools.product(args.partitions, SCALES.items()):
        t0 = time.perf_counter()
        cm = compile_model(
            fp32, "vta", calib, weight_scales=scales, lower=False, vta_partition=part
        )
        quantized = [n for n in cm.graph.nodes if n.op in LAYER_OPS]
        pc = sum(isinstance(n.attrs["shift"], list) for n in quantized)
        out = [run_model(cm, x)[0][0] for x in evals]
        note = f"{pc}/{len(quantized)} layers per-channel, {time.perf_counter() - t0:.0f} s"
        rows.append((f"ours {part} {label}", _summary(ref, out), note))
    for label, per_channel in (("onnxruntime int8", False), ("onnxruntime int8 per-ch", True)):
        path = str(tmp / f"{name}.{int(per_channel)}.int8.onnx")
        qdq_model(str(fp32), calib, path, per_channel=per_channel)
        sess = onnxruntime_session(path, threads=2, spin=False)
        out = [sess.run(None, {"input": x})[0] for x in evals]
        rows.append((label, _summary(ref, out), "QDQ, MinMax"))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default="resnet18,resnet34,mobilenet", help="zoo models ('' none)")
    ap.add_argument("--size", type=int, default=64, help="zoo input height/width")
    ap.add_argument(
        "--netgen", default="1001,1002,1003,1004,1005,1006", help="netgen seeds ('' none)"
    )
    ap.add_argument("--partitions", default="whole,legacy", help="vta partitions to compare")
    ap.add_argument("--count", type=int, default=32, help="evaluation inputs per model")
    ap.add_argument("--calibration", type=int, default=8, help="calibration inputs per model")
    args = ap.parse_args(argv)
    args.partitions = args.partitions.split(",")
    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime.quantization's advice
    models = {}
    for name in filter(None, args.zoo.split(",")):
        models[f"{name}@{args.size}"] = build_model(name, size=args.size, seed=MODEL_SEED)
    for seed in filter(None, args.netgen.split(",")):
        m = netgen.random_network(int(seed), batch=1)
        models[f"netgen{seed}"] = m
        print(f"netgen{seed}: {netgen.describe(m)}")
    print(
        f"seeds: zoo model {MODEL_SEED}, calibration {CALIBRATION_SEED} ({args.calibration}"
        f" inputs), evaluation {EVAL_SEED} ({args.count} inputs); reference: onnxruntime float"
    )
    ours = [f"ours {p} {s}" for p in args.partitions for s in SCALES]
    wins = {k: 0 for k in ours}
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models.items():
            print(f"\n{name}\n{'':<2}{'':<24} {'cos mean':>9} {'cos min':>9} {'top-1':>6}")
            rows = evaluate(name, model, args, Path(tmp))
            for label, (mean, low, top1), note in rows:
                print(f"  {label:<24} {mean:>9.5f} {low:>9.5f} {top1:>6.0%}  {note}")
            ort = next(r[1][0] for r in rows if r[0] == "onnxruntime int8")
            for label, (mean, _, _), _ in rows[: len(ours)]:
                wins[label] += mean >= ort
            means = {label: mean for label, (mean, _, _), _ in rows}
            for s in SCALES if {"whole", "legacy"} <= set(args.partitions) else ():
                gap = means[f"ours whole {s}"] - means[f"ours legacy {s}"]
                print(f"  whole - legacy ({s}): {gap:+.5f} cos mean")
    print(f"\ncos mean at least onnxruntime int8 (per-tensor), of {len(models)} models: {wins}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
