"""Graph IR: stable printer and checker."""

from __future__ import annotations

import numpy as np
import pytest

from pyvta.runtime.ir import Graph, GraphError, Node, Value, check_graph, format_graph
from pyvta.runtime.shapes import record_outputs


def _small() -> Graph:
    g = Graph("g", ["x"], ["y"], [], {}, {"x": Value("x", (1, 3, 8, 8), "float32")})
    g.add_constant("w", np.zeros((4, 3, 3, 3), np.float32))
    g.add_constant("b", np.zeros(4, np.float32))
    attrs = {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1,
             "clip": None}  # fmt: skip
    g.nodes.append(record_outputs(g, Node("conv2d", "c0", ["x", "w", "b"], ["h"], attrs)))
    g.nodes.append(record_outputs(g, Node("relu", "r0", ["h"], ["y"])))
    return g


def test_printer_is_stable_and_readable():
    g = _small()
    text = format_graph(g)
    assert text == format_graph(g.copy())
    assert "%h: float32[1, 4, 8, 8] = conv2d(%x, %w, %b) {clip=None, dilations=[1, 1]" in text
    assert "const %w: float32[4, 3, 3, 3]" in text and text.endswith("}")
    check_graph(g)


def test_checker_rejects_use_before_definition():
    g = _small()
    g.nodes.reverse()
    with pytest.raises(GraphError, match="before it is defined"):
        check_graph(g)


def test_checker_rejects_wrong_recorded_shape():
    g = _small()
    g.values["h"] = Value("h", (1, 4, 7, 7), "float32")
    with pytest.raises(GraphError, match="shape inference gives"):
        check_graph(g)


def test_checker_rejects_unknown_op_and_target():
    g = _small()
    g.nodes[1].target = "tpu"
    with pytest.raises(GraphError, match=r"target 'tpu' \(allowed: \('cpu', 'vta', 'gpu'\)"):
        check_graph(g)
    g = _small()
    g.nodes[1].op = "gelu"
    with pytest.raises(GraphError, match="unknown op 'gelu'"):
        check_graph(g)


def test_value_rejects_bad_dtype():
    with pytest.raises(GraphError, match="allowed"):
        Value("v", (1,), "float16")
