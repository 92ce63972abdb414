"""Fuse injective epilogues into the producing float ``conv2d`` / ``dense`` (TVM-style fusion).

Fused, in this order of application on a producer's single reader:

- bias add: ``add(y, c)`` with a constant per-output-channel ``c`` -> bias += c,
- residual add: ``add(y, r)`` with ``r`` of ``y``'s shape -> 4th input ``r`` (``y + r``),
- ``relu`` / ``clip`` -> the ``clip`` attr ``[lo, hi]`` (bounds intersect).

Bias and residual adds fuse only while no activation is fused yet (the op computes
``act(conv + bias + residual)``). The fused node takes the reader's place in the node order, so
every input it reads is defined before it. Requantization joins later, in ``quantize_int8``.
"""

from __future__ import annotations

import numpy as np

from pyvta.runtime.ir import HOST, Graph, Node

PRODUCERS = ("conv2d", "dense")


def _bias_shape_ok(c: np.ndarray, producer: Node, out_channels: int) -> bool:
    if producer.op == "dense":
        return c.shape in ((out_channels,), (1, out_channels))
    return c.shape in ((out_channels, 1, 1), (1, out_channels, 1, 1))


def _try_fuse(g: Graph, p: Node, c: Node, order: dict[int, int]) -> bool:
    """Fold reader ``c`` into producer ``p``; False when the pattern does not apply."""
    y = p.outputs[0]
    out_channels = g.values[y].shape[1]
    if c.op in ("relu", "clip"):
        lo, hi = (0.0, float("inf")) if c.op == "relu" else (c.attrs["min"], c.attrs["max"])
        old = p.attrs.get("clip") or [float("-inf"), float("inf")]
        p.attrs["clip"] = [max(old[0], lo), max(min(old[1], hi), max(old[0], lo))]
        return True
    if c.op != "add" or p.attrs.get("clip") is not None or len(p.inputs) != 3:
        return False
    other = c.inputs[1] if c.inputs[0] == y else c.inputs[0]
    if other == y:
        return False
    if other in g.constants and p.inputs[2] in g.constants:
        const = g.constants[other]
        if not _bias_shape_ok(const, p, out_channels):
            return False
        bias = g.constants[p.inputs[2]] + const.reshape(-1)
        p.inputs[2] = g.add_constant(g.fresh_name(f"{p.inputs[2]}_fused"), bias.astype(np.float32))
        return True
    if g.values[other].shape == g.values[y].shape and other not in g.constants:
        rival = g.producers().get(other)
        rival_ok = (
            rival is not None
            and rival.op in PRODUCERS
            and rival.attrs.get("clip") is None
            and len(rival.inputs) == 3
            and len(g.consumers().get(other, [])) == 1
        )
        if rival_ok and order[id(rival)] > order[id(p)]:
            return False  # fuse into the later producer (its rival's value exists first)
        p.inputs.append(other)
        return True
    return False


def fuse_operators(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    changed = True
    while changed:
        changed = False
        users = g.consumers()
        order = {id(n): i for i, n in enumerate(g.nodes)}
        for p in g.nodes:
            if p.op not in PRODUCERS or p.target != HOST:
                continue
            readers = users.get(p.outputs[0], [])
            if len(readers) != 1 or p.outputs[0] in g.outputs or len(readers[0].inputs) > 2:
                continue
            c = readers[0]
            if c.inputs.count(p.outputs[0]) != 1 or not _try_fuse(g, p, c, order):
                continue
            del g.values[p.outputs[0]]
            p.outputs = list(c.outputs)
            i = order[id(c)]
            g.nodes = [n for n in g.nodes if n is not p]
            g.nodes.insert(i - 1, p)
            g.nodes = [n for n in g.nodes if n is not c]
            changed = True
            break
    return g
