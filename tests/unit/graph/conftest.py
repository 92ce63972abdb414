"""Shared helpers for graph tests: tiny ONNX models and onnxruntime sessions."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

SEED = 1234


@pytest.fixture
def rng() -> np.random.Generator:
    print(f"seed {SEED}")
    return np.random.default_rng(SEED)


def make_model(nodes, inputs: dict, outputs: dict, inits: dict | None = None, opset: int = 17):
    """An ONNX model from nodes; ``inputs``/``outputs`` map names to shapes (float32)."""
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_run(model, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
