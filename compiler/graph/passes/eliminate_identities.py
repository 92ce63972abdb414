"""Remove ``identity`` nodes by renaming their readers to the identity's input."""

from __future__ import annotations

from pyvta.runtime.ir import Graph


def eliminate_identities(graph: Graph, options=None) -> Graph:
    """Every read of an identity's output reads its input instead (graph outputs included)."""
    g = graph.copy()
    alias: dict[str, str] = {}
    kept = []
    for n in g.nodes:
        n.inputs = [alias.get(i, i) for i in n.inputs]
        if n.op == "identity":
            alias[n.outputs[0]] = n.inputs[0]
            del g.values[n.outputs[0]]
        else:
            kept.append(n)
    g.nodes = kept
    g.outputs = [alias.get(o, o) for o in g.outputs]
    return g
