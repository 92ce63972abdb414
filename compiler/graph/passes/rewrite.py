"""Small helpers passes share for building nodes in a graph being rewritten."""

from __future__ import annotations

from pyvta.runtime.ir import HOST, Graph, Node
from pyvta.runtime.shapes import record_outputs


class NodeEmitter:
    """Appends new nodes to ``out`` (a node list) with unique names and recorded output values."""

    def __init__(self, graph: Graph, out: list[Node]) -> None:
        self.graph = graph
        self.out = out
        self.names = {n.name for n in graph.nodes}

    def node_name(self, base: str) -> str:
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def emit(
        self,
        op: str,
        inputs: list[str],
        attrs: dict,
        name: str,
        output: str | None = None,
        target: str = HOST,
    ) -> str:
        """Add ``op(inputs)``; the output is ``output`` or a fresh name from ``name``."""
        out = output if output is not None else self.graph.fresh_name(name)
        node = Node(op, self.node_name(name), list(inputs), [out], dict(attrs), target)
        record_outputs(self.graph, node)
        self.out.append(node)
        return out
