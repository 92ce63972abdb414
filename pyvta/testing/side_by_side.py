"""Helpers of the benchmarks that time pyvta beside onnxruntime in one process
(benchmarks/cpu_int8.py, cpu_network.py, cpu_generality.py): one home for each."""

from __future__ import annotations

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
