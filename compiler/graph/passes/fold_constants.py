"""Evaluate nodes whose inputs are all constants and replace them by constants."""

from __future__ import annotations

import numpy as np

from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.ir import HOST, Graph


def fold_constants(graph: Graph, options=None) -> Graph:
    """Nodes with only constant inputs become constants (computed by the cpu kernels)."""
    g = graph.copy()
    kept = []
    for n in g.nodes:
        if n.inputs and n.target == HOST and all(i in g.constants for i in n.inputs):
            value = run_cpu_op(n.op, [g.constants[i] for i in n.inputs], n.attrs)
            out = g.values[n.outputs[0]]
            g.constants[out.name] = np.ascontiguousarray(value.astype(out.dtype)).reshape(out.shape)
        else:
            kept.append(n)
    g.nodes = kept
    return g
