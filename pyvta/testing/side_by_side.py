"""Helpers of the benchmarks that time pyvta beside onnxruntime in one process
(benchmarks/cpu_int8.py, cpu_network.py, cpu_generality.py): one home for each."""

from __future__ import annotations

import re
import time

import numpy as np


def qdq_model(path: str, samples: list[dict], out_path: str, per_channel: bool = False) -> str:
    """onnxruntime's static int8 QDQ quantization of ``path``, calibrated on ``samples``
    (``per_channel``: its per-channel weight scales)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

    quantize_static(
        path,
        out_path,
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=per_channel,
    )
    return out_path


def timed_ms(fn, clock=time.perf_counter) -> float:
    t0 = clock()
    fn()
    return (clock() - t0) * 1e3


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    """Largest absolute difference relative to the reference's largest magnitude."""
    return float(np.abs(a - ref).max() / np.abs(ref).max())


# what onnxruntime appends to a node's name in its profile: the kernel-time tag, its fused NCHWc
# and quantized forms, nodes it duplicates or splits
ORT_NAME_SUFFIX = re.compile(
    r"(_kernel_time|_nchwc|_quant|_QuantizeLinear|_DequantizeLinear|_token_\d+|/duplicated)$"
)


def onnxruntime_node_ms(path: str, feeds: dict, threads: int, runs: int) -> dict[str, float]:
    """onnxruntime's own per-node times of ``path`` (ms, median over ``runs`` profiled runs after
    one warm-up), keyed by node name with onnxruntime's suffixes (``ORT_NAME_SUFFIX``) stripped;
    nodes onnxruntime adds itself (layout reorders, transposes) keep their own names."""
    import json
    import os

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.enable_profiling = True
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for _ in range(runs + 1):
        session.run(None, feeds)
    profile = session.end_profiling()
    with open(profile) as f:
        events = json.load(f)
    os.remove(profile)
    per_run: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"]
        while ORT_NAME_SUFFIX.search(name):
            name = ORT_NAME_SUFFIX.sub("", name)
        per_run.setdefault(name, []).append(e["dur"] / 1e3)
    # one record per node per run, the warm-up's first: skip it; a name recorded several times
    # per run (split nodes) sums over each run's records
    out = {}
    for name, durs in per_run.items():
        per = max(1, len(durs) // (runs + 1))
        sums = [sum(durs[i : i + per]) for i in range(per, len(durs), per)] or [sum(durs)]
        out[name] = float(np.median(sums))
    return out
