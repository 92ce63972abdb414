"""Graph executor: runs a (partitioned) graph node by node, dispatching each node to the backend
of its placement through a table (``{placement: NodeBackend}``).

The backend of a placement the caller does not give is :func:`default_backend`'s: host
(``"cpu"``) nodes run on :func:`host_backend` (the numpy kernels of :mod:`runtime.cpu_ops`, and
kernels built before for the compiled ops: the JIT's where the graph needs them and llvmlite is
here, ``runtime.jit``); accelerator (``"vta"``) nodes (``vta_conv2d``, ``vta_dense``) call an
object implementing the operator contract (:class:`runtime.vta_ops.VtaBackend`), the numpy
golden model unless given; ``"gpu"`` nodes run their GPU kernels (the JIT's GPU backend). A
device backend (``runtime.accelerator.AcceleratorBackend``) runs accelerator nodes from the
kernels of an artifact. A backend may expose ``last_cycles`` (int) after each node; the timing
table then shows cycles too.

Buffers are freed after their last use (the plan is computed once per graph), and the run
reports the peak of live intermediate bytes.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from pyvta.runtime.ir import ACCELERATOR, GPU, HOST, TARGETS, Graph, GraphError, Node
from pyvta.runtime.vta_ops import FusedParams, VtaBackend


class NodeBackend(Protocol):
    """Runs the nodes of one target: ``run(node, args)`` -> the node's (first) output. A
    backend may also have ``inference_scope()``: a context manager the executor holds open
    for each inference (the host CPU's binds the calling thread to its CPU)."""

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray: ...


class ContractNodes:
    """``"vta"`` nodes through an operator-contract object (``conv2d``/``dense``, e.g. the golden
    model)."""

    OPS = ("vta_conv2d", "vta_dense", "vta_max_pool", "vta_global_avg_pool", "vta_conv2d_max_pool")

    def __init__(self, vta: VtaBackend) -> None:
        self.vta = vta

    @property
    def last_cycles(self) -> int | None:
        return getattr(self.vta, "last_cycles", None)

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        res = args[3] if len(args) > 3 else None
        if node.op == "vta_max_pool":
            return self.vta.max_pool(args[0], node.attrs)
        if node.op == "vta_global_avg_pool":
            return self.vta.global_avg_pool(args[0], node.attrs)
        params = FusedParams.from_attrs(node.attrs)
        if node.op == "vta_conv2d":
            return self.vta.conv2d(args[0], args[1], args[2], res, params)
        if node.op == "vta_dense":
            return self.vta.dense(args[0], args[1], args[2], res, params)
        if node.op == "vta_conv2d_max_pool":
            return self.vta.conv2d_max_pool(args[0], args[1], args[2], res, params)
        raise GraphError(f"op {node.op!r} cannot run on vta (allowed: {', '.join(self.OPS)})")


class LayerTiming(NamedTuple):
    """One executed node: where it ran and how long it took (``ms``; ``cycles`` from VTA).
    (A named tuple: one is made per node per inference, and a frozen dataclass cost ~1 us.)"""

    node: str
    op: str
    target: str
    ms: float
    cycles: int | None = None

    def device_ms(self, clock_mhz: float) -> float:
        """Time on the target system: accelerator cycles at ``clock_mhz`` when the node has them
        (its wall ``ms`` is then the simulator's), else the measured wall time."""
        return self.ms if self.cycles is None else self.cycles / (clock_mhz * 1e3)


@dataclass
class TimingTable:
    """Per-layer timings of one run, plus the peak of live intermediate buffers in bytes."""

    rows: list[LayerTiming] = field(default_factory=list)
    peak_live_bytes: int = 0

    @property
    def total_ms(self) -> float:
        return sum(r.ms for r in self.rows)

    def by_target_ms(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.rows:
            out[r.target] = out.get(r.target, 0.0) + r.ms
        return out

    def format(self, top: int | None = None, clock_mhz: float = 100.0) -> str:
        """A text table: node, op, target, wall ms, cycles, device ms and its share of one
        inference. Device ms: accelerator cycles at ``clock_mhz`` for nodes with cycles (their
        wall time is the simulator's), the CPU wall time for the others."""
        dev = [r.device_ms(clock_mhz) for r in self.rows]
        total = sum(dev) or 1.0
        order = sorted(range(len(self.rows)), key=lambda i: -dev[i])[:top] if top else None
        head = f"{'node':<32} {'op':<16} {'target':<6} {'wall ms':>9} {'cycles':>10}"
        lines = [f"{head} {'device ms':>9} {'share':>6}"]
        for i in order if order is not None else range(len(self.rows)):
            r = self.rows[i]
            cyc = "" if r.cycles is None else str(r.cycles)
            lines.append(
                f"{r.node[:32]:<32} {r.op:<16} {r.target:<6} {r.ms:>9.3f} {cyc:>10}"
                f" {dev[i]:>9.3f} {100 * dev[i] / total:>5.1f}%"
            )
        split = ", ".join(f"{t} {ms:.2f} ms" for t, ms in sorted(self.by_target_ms().items()))
        lines.append(
            f"device time {sum(dev):.2f} ms (accelerator at {clock_mhz:g} MHz + CPU);"
            f" wall {self.total_ms:.2f} ms ({split}); peak live {self.peak_live_bytes} B"
        )
        return "\n".join(lines)


def plan_frees(graph: Graph) -> list[list[str]]:
    """For each node index, the values whose last reader it is (never inputs/constants/outputs)."""
    keep = set(graph.outputs) | set(graph.constants) | set(graph.inputs)
    last: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        for name in n.inputs:
            last[name] = i
        for name in n.outputs:
            last.setdefault(name, i)  # a value nobody reads dies where it is made
    frees: list[list[str]] = [[] for _ in graph.nodes]
    for name, i in last.items():
        if name not in keep:
            frees[i].append(name)
    return frees


def host_backend(graph: Graph, target: str | None = None) -> NodeBackend:
    """The host nodes' backend: the JIT's (``runtime.jit``: kernels built here for the compile
    ``target``'s CPU features, default the host's) where the graph has compiled nodes and
    llvmlite is here; else the runtime's own, numpy for every node that is not compiled (an int8
    graph's quantized convs included: the same bits), refusing a compiled float node (it needs
    its code)."""
    from pyvta.runtime import cpu_llvm
    from pyvta.runtime.cpu_kernels import CpuKernels, compiled_nodes
    from pyvta.runtime.int8_kernels import CpuInt8Kernels, compiled_int8, has_int8_nodes

    compiled = compiled_nodes(graph) or any(compiled_int8(n, graph) for n in graph.nodes)
    if compiled and cpu_llvm.llvmlite_installed():  # (within numpy_only it builds none)
        from pyvta.runtime.jit import jit

        return jit().host_backend(graph, target)
    return CpuInt8Kernels(graph) if has_int8_nodes(graph) else CpuKernels(graph)


def _host_backend(graph: Graph, vta: VtaBackend | None, compiled_for: str | None) -> NodeBackend:
    return host_backend(graph, compiled_for)


def _accelerator_backend(graph: Graph, vta: VtaBackend | None, compiled_for=None) -> NodeBackend:
    from pyvta.runtime.vta_ops import GoldenVta

    return ContractNodes(vta if vta is not None else GoldenVta())


def _gpu_backend(graph: Graph, vta: VtaBackend | None, compiled_for=None) -> NodeBackend:
    from pyvta.runtime.jit import jit

    return jit().gpu_backend(graph)  # the GPU target's default device


DEFAULT_BACKENDS = {
    HOST: _host_backend,
    ACCELERATOR: _accelerator_backend,
    GPU: _gpu_backend,
}


def default_backend(
    target: str, graph: Graph, vta: VtaBackend | None = None, compiled_for: str | None = None
) -> NodeBackend:
    """The backend of the nodes placed ``target`` when the caller gives none
    (``DEFAULT_BACKENDS``): host nodes :func:`host_backend`'s (for the CPU of the compile target
    ``compiled_for``); accelerator nodes the operator contract ``vta``, default the golden
    model; GPU nodes the graph's kernels on the GPU."""
    make = DEFAULT_BACKENDS.get(target)
    if make is None:
        raise GraphError(f"no backend for nodes placed {target!r} (allowed: {', '.join(TARGETS)})")
    return make(graph, vta, compiled_for)


class Executor:
    """Runs ``graph``; ``backends`` maps each node target to its backend (default:
    :func:`default_backend` for the targets not given); ``vta`` is shorthand for an operator-contract ``"vta"`` backend.
    ``clock`` times each node (seconds; e.g. ``time.thread_time`` for the calling thread's CPU
    time on a loaded machine); ``compiled_for``: the compile target's name (its host kernels'
    CPU features), for the default host backend."""

    def __init__(
        self,
        graph: Graph,
        vta: VtaBackend | None = None,
        backends: Mapping[str, NodeBackend] | None = None,
        clock=time.perf_counter,
        compiled_for: str | None = None,
    ) -> None:
        self.graph = graph
        self.clock = clock
        self.backends = dict(backends or {})
        for target in sorted({n.target for n in graph.nodes} - set(self.backends)):
            self.backends[target] = default_backend(target, graph, vta, compiled_for)  # not given
        self._frees = plan_frees(graph)
        # an int8 model's inputs: NaN/Inf in them would be clipped into int8 values somewhere
        int8 = any(n.op == "quantize" for n in graph.nodes)
        self._quantized = set(graph.inputs) if int8 else set()
        self._inputs = [(name, graph.values[name]) for name in graph.inputs]
        self._steps = [
            self._step(n, frees) for n, frees in zip(graph.nodes, self._frees, strict=True)
        ]
        used = {id(b): b for b in (self.backends[n.target] for n in graph.nodes)}.values()
        self._scopes = [b.inference_scope for b in used if hasattr(b, "inference_scope")]

    def _step(self, node: Node, frees: list[str]) -> tuple:
        """What running ``node`` needs, looked up once: its backend's ``run``, whether that
        backend reports cycles (it has ``last_cycles`` now), its input names, its output's name,
        shape and dtype, and the values it frees."""
        backend = self.backends[node.target]
        v = self.graph.values[node.outputs[0]]
        cycles = backend if hasattr(backend, "last_cycles") else None
        return (
            node, backend.run, cycles, tuple(node.inputs), v.name, v.shape, np.dtype(v.dtype),
            tuple(frees),
        )  # fmt: skip

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[list[np.ndarray], TimingTable]:
        """Execute once. ``inputs`` maps graph input names to arrays of the recorded shape."""
        g = self.graph
        env: dict[str, np.ndarray] = dict(g.constants)
        for name, v in self._inputs:
            if name not in inputs:
                raise GraphError(f"missing graph input {name!r} (inputs: {g.inputs})")
            a = np.asarray(inputs[name])
            if tuple(a.shape) != v.shape or str(a.dtype) != v.dtype:
                raise GraphError(f"input {name!r} is {a.dtype}{list(a.shape)}, expected {v}")
            if name in self._quantized and not np.isfinite(a).all():
                raise GraphError(
                    f"input {name!r} holds NaN or Inf; this model quantizes it to int8, where they"
                    " have no value (give finite inputs, or run the float target)"
                )
            env[name] = a
        with _collector_paused(), contextlib.ExitStack() as scopes:
            for scope in self._scopes:
                scopes.enter_context(scope())
            return self._run_nodes(env)

    def _run_nodes(self, env: dict[str, np.ndarray]) -> tuple[list[np.ndarray], TimingTable]:
        g, clock = self.graph, self.clock
        rows: list[LayerTiming] = []
        live = peak = 0
        for node, run, cycles, ins, out_name, shape, dtype, frees in self._steps:
            args = [env[i] for i in ins]
            start = clock()
            out = run(node, args)
            ms = 1e3 * (clock() - start)
            rows.append(
                LayerTiming(
                    node.name,
                    node.op,
                    node.target,
                    ms,
                    None if cycles is None else cycles.last_cycles,
                )
            )
            if out.shape != shape or out.dtype != dtype:
                raise GraphError(
                    f"node {node.name!r} ({node.op}@{node.target}) produced "
                    f"{out.dtype}{list(out.shape)}, expected {g.values[out_name]}"
                )
            env[out_name] = out
            live += out.nbytes
            if live > peak:
                peak = live
            for name in frees:
                live -= env.pop(name).nbytes
        return [env[o] for o in g.outputs], TimingTable(rows, peak)


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off during one inference (restored after): a full
    collection in a process holding a compiled model took ~150 ms, landing on whichever node
    allocated at the time. Cycles made during the inference are collected by the next collection
    after it, so nothing is kept past one inference."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
