"""Graph IR: values with shape and dtype, nodes (op, inputs, outputs, attrs, target), constants.

A :class:`Graph` is a topologically ordered list of :class:`Node` objects over named values. Every
value (graph input, constant, node output) has a :class:`Value` record with its shape and dtype.
Constants hold numpy arrays. ``format_graph`` prints a stable text form; ``check_graph`` verifies
the invariants and re-derives every node's output shape (run it after every pass).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa.errors import PyvtaError

DTYPES = ("float32", "int8", "int32", "int64")
HOST = "cpu"
"""The placement of a node that runs on the host CPU: every node's until a pass places it on the
accelerator or the GPU."""
ACCELERATOR = "vta"  # the placement of a node that runs on the accelerator (a ``driver.Device``)
GPU = "gpu"  # the placement of a node that runs on the GPU
TARGETS = (HOST, ACCELERATOR, GPU)  # the placements (``Node.target``), defined once


class GraphError(PyvtaError, ValueError):
    """A graph violates an IR invariant."""


@dataclass(frozen=True)
class Value:
    """A named tensor: ``shape`` (tuple of ints), ``dtype`` (one of ``DTYPES``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise GraphError(f"value {self.name!r} has dtype {self.dtype!r} (allowed: {DTYPES})")


@dataclass
class Node:
    """One operator application. ``attrs`` hold plain Python data (ints, floats, lists, None)."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    target: str = HOST


@dataclass
class Graph:
    """A dataflow graph. ``nodes`` are in topological order; ``values`` covers every name."""

    name: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[Node]
    constants: dict[str, np.ndarray]
    values: dict[str, Value]

    def copy(self) -> Graph:
        """A deep copy of the structure; constant arrays are shared (passes never mutate them)."""
        return Graph(
            name=self.name,
            inputs=list(self.inputs),
            outputs=list(self.outputs),
            nodes=[copy.deepcopy(n) for n in self.nodes],
            constants=dict(self.constants),
            values=dict(self.values),
        )

    def producers(self) -> dict[str, Node]:
        """Map value name -> the node that produces it."""
        return {out: n for n in self.nodes for out in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        """Map value name -> the nodes that read it (graph outputs are not nodes)."""
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in n.inputs:
                users.setdefault(name, []).append(n)
        return users

    def add_constant(self, name: str, array: np.ndarray) -> str:
        """Add (or replace) a constant; returns a fresh name when ``name`` is taken by a non-constant."""
        name = self.fresh_name(name) if name in self.values and name not in self.constants else name
        array = np.asarray(array)
        if not array.flags.c_contiguous:
            array = array.copy()  # (np.ascontiguousarray would turn a 0-d array into 1-d)
        self.constants[name] = array
        self.values[name] = Value(name, tuple(array.shape), str(array.dtype))
        return name

    def fresh_name(self, base: str) -> str:
        """``base`` or ``base_1``, ``base_2``... whichever is not yet a value name."""
        if base not in self.values:
            return base
        i = 1
        while f"{base}_{i}" in self.values:
            i += 1
        return f"{base}_{i}"

    def is_constant(self, name: str) -> bool:
        return name in self.constants


def _format_attr(value) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_format_attr(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


def _format_value(v: Value) -> str:
    return f"{v.dtype}[{', '.join(str(d) for d in v.shape)}]"


def format_graph(graph: Graph, constants: bool = True) -> str:
    """Stable text form: one line per input, constant (name, type) and node, in order."""
    ins = ", ".join(f"%{n}: {_format_value(graph.values[n])}" for n in graph.inputs)
    outs = ", ".join(f"%{n}" for n in graph.outputs)
    lines = [f"graph {graph.name}({ins}) -> ({outs}) {{"]
    if constants:
        for name in sorted(graph.constants):
            lines.append(f"  const %{name}: {_format_value(graph.values[name])}")
    for n in graph.nodes:
        outs = ", ".join(f"%{o}: {_format_value(graph.values[o])}" for o in n.outputs)
        args = ", ".join(f"%{i}" for i in n.inputs)
        attrs = ", ".join(f"{k}={_format_attr(n.attrs[k])}" for k in sorted(n.attrs))
        attrs = f" {{{attrs}}}" if attrs else ""
        lines.append(f"  {outs} = {n.op}({args}){attrs} @{n.target}  # {n.name}")
    lines.append("}")
    return "\n".join(lines)


def check_graph(graph: Graph) -> None:
    """Raise :class:`GraphError` unless the graph is well formed.

    Checks: unique value and node names, topological order, every referenced value has a record,
    constants match their records, known ops and targets, and recorded output shapes/dtypes equal
    the ones shape inference derives from the inputs.
    """
    from pyvta.runtime.shapes import infer_node

    defined = set(graph.inputs) | set(graph.constants)
    if len(defined) != len(graph.inputs) + len(graph.constants):
        raise GraphError("a graph input has the same name as a constant")
    for name, array in graph.constants.items():
        v = graph.values.get(name)
        if v is None or v.shape != tuple(array.shape) or v.dtype != str(array.dtype):
            raise GraphError(f"constant {name!r} does not match its value record {v}")
    node_names = set()
    for n in graph.nodes:
        if n.name in node_names:
            raise GraphError(f"node name {n.name!r} is used twice")
        node_names.add(n.name)
        if n.target not in TARGETS:
            raise GraphError(f"node {n.name!r} has target {n.target!r} (allowed: {TARGETS})")
        for i in n.inputs:
            if i not in defined:
                raise GraphError(f"node {n.name!r} ({n.op}) reads {i!r} before it is defined")
        ins = [graph.values[i] for i in n.inputs]
        expected = infer_node(n, ins)
        if len(expected) != len(n.outputs):
            raise GraphError(f"node {n.name!r} ({n.op}) has {len(n.outputs)} outputs")
        for out, (shape, dtype) in zip(n.outputs, expected, strict=True):
            if out in defined:
                raise GraphError(f"value {out!r} is defined twice (second time by {n.name!r})")
            v = graph.values.get(out)
            if v is None or v.shape != tuple(shape) or v.dtype != dtype:
                raise GraphError(
                    f"node {n.name!r} ({n.op}) output {out!r} is recorded as {v}, "
                    f"shape inference gives {dtype}{list(shape)}"
                )
            defined.add(out)
    for out in graph.outputs:
        if out not in defined:
            raise GraphError(f"graph output {out!r} is never defined")
