"""The float reference a compiled network is judged against: the same ONNX model run by
onnxruntime, and the cosine similarity the demo, the accuracy benchmark and the tests compare by
(ONNX models of a few nodes for tests: ``zoo.float_model``).

onnxruntime is imported when a session is made (the ``graph`` extra), never at import.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx


def onnxruntime_session(model: onnx.ModelProto | str | Path, threads: int = 1, spin: bool = True):
    """An onnxruntime CPU session of ``model`` (a model or an ONNX file) on ``threads`` intra-op
    threads (0: onnxruntime's default, one per core); ``spin=False`` keeps idle pool threads from busy-waiting between runs (they would
    slow whatever is timed beside them)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    if not spin:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def run_onnxruntime(model: onnx.ModelProto | str | Path, feeds: dict[str, np.ndarray]):
    """The outputs of one onnxruntime run of ``model`` (single-threaded), in graph order."""
    return onnxruntime_session(model).run(None, feeds)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two arrays taken as flat float64 vectors (0 when either is zero)."""
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms else 0.0
