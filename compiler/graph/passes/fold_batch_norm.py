"""Fold ``batch_norm`` into the float ``conv2d`` that produces its input.

With ``s = scale / sqrt(var + eps)``: ``w' = w * s[o]`` and ``b' = (b - mean) * s + bias``.
Applies when the conv has constant weights and bias, no fused epilogue, and the batch norm is
the only reader of its output.
"""

from __future__ import annotations

import numpy as np

from pyvta.runtime.ir import Graph


def fold_batch_norm(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    producers = g.producers()
    users = g.consumers()
    dropped = set()
    for bn in g.nodes:
        if bn.op != "batch_norm":
            continue
        conv = producers.get(bn.inputs[0])
        if (
            conv is None
            or conv.op != "conv2d"
            or len(conv.inputs) != 3
            or conv.attrs.get("clip") is not None
            or not all(i in g.constants for i in conv.inputs[1:] + bn.inputs[1:])
            or len(users.get(conv.outputs[0], [])) != 1
            or conv.outputs[0] in g.outputs
        ):
            continue
        scale, beta, mean, var = (g.constants[i].astype(np.float64) for i in bn.inputs[1:])
        s = scale / np.sqrt(var + bn.attrs["epsilon"])
        w = g.constants[conv.inputs[1]].astype(np.float64) * s[:, None, None, None]
        b = (g.constants[conv.inputs[2]].astype(np.float64) - mean) * s + beta
        wn = g.add_constant(g.fresh_name(f"{conv.inputs[1]}_bn"), w.astype(np.float32))
        bname = g.add_constant(g.fresh_name(f"{conv.inputs[2]}_bn"), b.astype(np.float32))
        del g.values[conv.outputs[0]]
        conv.inputs = [conv.inputs[0], wn, bname]
        conv.outputs = list(bn.outputs)
        dropped.add(id(bn))
    g.nodes = [n for n in g.nodes if id(n) not in dropped]
    return g
