"""Quantization accuracy: our power-of-two int8 graph vs onnxruntime's static int8, against float.

Builds a zoo model (seeded), runs the float model with onnxruntime on ``--count`` seeded inputs,
and reports the cosine similarity of the logits and the top-1 agreement for

- ours: ``compile_model(..., "vta")`` (int8, power-of-two scales, first conv and final dense in
  float) run by the graph executor with the golden VTA backend,
- onnxruntime: ``quantize_static`` (QDQ, int8 activations and weights, MinMax calibration,
  per-tensor; its defaults) on the same calibration inputs, run by onnxruntime (the target),
- for reference also onnxruntime with ``per_channel=True`` weights (ours with per-channel
  power-of-two scales beside it: ``benchmarks/int8_fidelity.py``).

    .venv/bin/python benchmarks/quant_accuracy.py [--model resnet18] [--count 100] [--size 224]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize_static

from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine, onnxruntime_session
from pyvta.compiler.graph.zoo import build_model, sample_inputs
from pyvta.runtime.compiled_model import run_model

CALIBRATION_SEED, EVAL_SEED, MODEL_SEED = 1, 2, 0


class _Reader(CalibrationDataReader):
    def __init__(self, name: str, samples: list[np.ndarray]) -> None:
        self.items = iter([{name: s} for s in samples])

    def get_next(self):
        return next(self.items, None)


def _session(path: Path):
    return onnxruntime_session(path, threads=2, spin=False)  # no spinning: leave numpy the cores


def _summary(name: str, ref: list[np.ndarray], out: list[np.ndarray]) -> dict:
    cos = np.array([cosine(r, o) for r, o in zip(ref, out, strict=True)])
    agree = np.mean([int(r.argmax()) == int(o.argmax()) for r, o in zip(ref, out, strict=True)])
    return {"name": name, "cos_mean": cos.mean(), "cos_min": cos.min(), "top1": agree}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18", help="resnet18, resnet34 or mobilenet")
    ap.add_argument("--size", type=int, default=224, help="input height/width in pixels")
    ap.add_argument("--count", type=int, default=100, help="evaluation inputs")
    ap.add_argument("--calibration", type=int, default=16, help="calibration inputs")
    args = ap.parse_args()
    print(
        f"model {args.model} {args.size}x{args.size}, seeds: model {MODEL_SEED}, calibration "
        f"{CALIBRATION_SEED} ({args.calibration} inputs), evaluation {EVAL_SEED} ({args.count})"
    )
    calib = sample_inputs(args.calibration, args.size, CALIBRATION_SEED)
    evals = sample_inputs(args.count, args.size, EVAL_SEED)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model.onnx"
        int8 = Path(tmp) / "model.int8.onnx"
        int8_pc = Path(tmp) / "model.int8pc.onnx"
        t = time.perf_counter()
        onnx.save(build_model(args.model, size=args.size, seed=MODEL_SEED), fp32)
        print(f"built float model in {time.perf_counter() - t:.1f} s")

        t = time.perf_counter()
        ours = compile_model(fp32, "vta", [{"input": c} for c in calib])
        print(f"compiled ours (vta, golden backend) in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        for out, per_channel in ((int8, False), (int8_pc, True)):
            quantize_static(
                str(fp32), str(out), _Reader("input", calib), per_channel=per_channel,
                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
            )  # fmt: skip
        print(f"onnxruntime quantize_static in {time.perf_counter() - t:.1f} s")

        float_sess, int8_sess = _session(fp32), _session(int8)
        ref = [float_sess.run(None, {"input": x})[0] for x in evals]
        pc_sess = _session(int8_pc)
        ort_pc = [pc_sess.run(None, {"input": x})[0] for x in evals]
        t = time.perf_counter()
        ort_q = [int8_sess.run(None, {"input": x})[0] for x in evals]
        ort_ms = 1e3 * (time.perf_counter() - t) / len(evals)
        t = time.perf_counter()
        mine, table = [], None
        for x in evals:
            out, table = run_model(ours, x)
            mine.append(out[0])
        our_ms = 1e3 * (time.perf_counter() - t) / len(evals)

    rows = [_summary("ours: pow2 int8 (vta)", ref, mine)]
    rows.append(_summary("onnxruntime int8 (QDQ)", ref, ort_q))
    rows.append(_summary("(onnxruntime per-channel)", ref, ort_pc))
    top1_float = len({int(r.argmax()) for r in ref})
    print(f"float top-1 classes seen over {len(ref)} inputs: {top1_float} distinct")
    print(f"{'vs float (onnxruntime fp32)':<28} {'cos mean':>9} {'cos min':>9} {'top-1 agree':>12}")
    for r in rows:
        print(f"{r['name']:<28} {r['cos_mean']:>9.5f} {r['cos_min']:>9.5f} {r['top1']:>11.0%}")
    ours_ok = np.array([int(r.argmax()) == int(o.argmax()) for r, o in zip(ref, mine, strict=True)])
    ort_ok = np.array([int(r.argmax()) == int(o.argmax()) for r, o in zip(ref, ort_q, strict=True)])
    print(
        f"top-1 paired: both agree {np.sum(ours_ok & ort_ok)}, only ours {np.sum(ours_ok & ~ort_ok)},"
        f" only onnxruntime {np.sum(~ours_ok & ort_ok)} (of {len(ref)})"
    )
    ok = rows[0]["cos_mean"] >= rows[1]["cos_mean"] and rows[0]["top1"] >= rows[1]["top1"]
    print(f"ours at least as close to float as onnxruntime int8 (default): {'yes' if ok else 'NO'}")
    print(
        f"time per inference: ours {our_ms:.1f} ms (numpy golden), onnxruntime int8 {ort_ms:.1f} ms"
    )
    print("per-layer table of the last run (top 10):")
    print(table.format(top=10))


if __name__ == "__main__":
    main()
