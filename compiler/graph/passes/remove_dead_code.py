"""Drop nodes and constants that no graph output depends on."""

from __future__ import annotations

from pyvta.runtime.ir import Graph


def remove_dead_code(graph: Graph, options=None) -> Graph:
    """Keep only nodes reachable backwards from the outputs, and the constants they read."""
    g = graph.copy()
    live = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs):
            kept.append(n)
            live.update(n.inputs)
        else:
            for o in n.outputs:
                g.values.pop(o, None)
    g.nodes = kept[::-1]
    for name in [c for c in g.constants if c not in live]:
        del g.constants[name]
        del g.values[name]
    return g
