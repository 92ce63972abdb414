"""The host CPU's node backend of a graph: its compiled ``cpu_*`` nodes on kernels built
before (``modules``: the JIT's, ``compiler.targets.cpu.kernels``, or an artifact's shared
object, ``runtime.cpu_code``), numpy (``runtime.cpu_ops``) for the rest.

It plans the memory of one inference: every compiled op writes into a buffer of an arena
that is reused once its value is dead (values that views alias stay alive as long as the
views; graph outputs are returned as fresh arrays, copied from a buffer of their node's).
Nothing here compiles: a compiled node without its kernel is refused.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.ir import HOST, Graph, GraphError, Node

VIEW_OPS = ("reshape", "flatten", "identity")  # numpy ops whose output may alias their input
COMPILED_OPS = (
    "cpu_conv2d",
    "cpu_max_pool",
    "cpu_avg_pool",
    "cpu_global_avg_pool",
    "cpu_concat",
    "cpu_dense",
    "cpu_elementwise",
    "cpu_softmax",
    "layout_transform",
)
# ops whose kernels are built for one image (every input that is not a constant, and the output,
# have the batch as their first axis): a batch of N runs one kernel built for the batch
# (``compiler.passes.batch_images``), or the one-image kernel on each image in turn
PER_IMAGE_OPS = (
    "cpu_conv2d",
    "cpu_max_pool",
    "cpu_avg_pool",
    "cpu_global_avg_pool",
    "cpu_concat",
    "layout_transform",
)


def compiled_nodes(graph: Graph) -> list[Node]:
    """The host nodes of ``graph`` that run a compiled kernel (``COMPILED_OPS``)."""
    return [n for n in graph.nodes if n.op in COMPILED_OPS and n.target == HOST]


def kernel_shapes(graph: Graph, node: Node) -> tuple[list[tuple], tuple[int, list[bool]] | None]:
    """The input shapes the kernel of a compiled ``node`` is built for and, where it runs a
    batch of N > 1 one image at a time (``PER_IMAGE_OPS``), ``(N, which inputs are per
    image)`` (else None)."""
    shapes = [graph.values[i].shape for i in node.inputs]
    batch = graph.values[node.outputs[0]].shape[0] if node.op in PER_IMAGE_OPS else 1
    if batch == 1:
        return shapes, None
    per_image = [i not in graph.constants for i in node.inputs]
    shapes = [(1, *s[1:]) if p else s for s, p in zip(shapes, per_image, strict=True)]
    return shapes, (batch, per_image)


class CpuKernels:
    """The "cpu" backend of a graph: compiled ``cpu_*`` nodes on preplanned buffers, numpy
    (``cpu_ops``) for the rest."""

    def __init__(self, graph: Graph, modules: dict | None = None) -> None:
        """``modules``: every compiled node's kernel, built before (node name -> a kernel
        called as ``Module`` is: the JIT's, or an artifact's shared object,
        ``cpu_code.CpuCode.load``)."""
        self.graph = graph
        self.modules: dict[str, object] = dict(modules or {})
        compiled = compiled_nodes(graph)
        missing = [n for n in compiled if n.name not in self.modules]
        if missing:
            raise GraphError(
                f"{len(missing)} nodes of this graph (e.g. {missing[0].name!r}, {missing[0].op})"
                " are compiled CPU kernels, which need llvmlite (pyvta[host]) or the artifact's"
                " code for this CPU (pyvta compile --board/--cpu-target); without either (a"
                " board's runtime) run artifacts compiled for vta, whose CPU layers are numpy"
            )
        # node -> (images, which inputs are per image): a batch runs its one-image kernel N times
        self._per_image: dict[str, tuple[int, list[bool]]] = {}
        for n in compiled:
            per_image = kernel_shapes(graph, n)[1]
            if per_image is not None:
                self._per_image[n.name] = per_image
        self.slots, self._arena = plan_memory(graph, set(self.modules))
        # node -> (the args it last ran on, its bound kernel call or None, its output, whether
        # that is returned as is): a node given the same arrays again (arena views, constants)
        # reuses the checked call; a graph output is computed into a buffer of its node's
        # (``_own``) and copied out (a fresh array per run, without binding the call again)
        self._bound: dict[str, tuple[tuple, object, np.ndarray, bool]] = {}
        self._own: dict[str, np.ndarray] = {}
        # value -> its arena view: a new input array rebinds the nodes that read it, and no more
        # (a new view per rebinding made every node after it rebind, ~10 us each, every run)
        self._views: dict[str, np.ndarray] = {}

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        hit = self._bound.get(node.name)
        if hit is not None:
            prev, call, out, as_is = hit
            if len(prev) == len(args) and all(map(operator.is_, prev, args)):
                if call is not None:
                    call()
                return out if as_is else out.copy()
        mod = self.modules.get(node.name)
        if mod is None:
            out = run_cpu_op(node.op, args, node.attrs)
            if node.op in VIEW_OPS and np.shares_memory(out, args[0]):
                self._bound[node.name] = (tuple(args), None, out, True)  # the same view next time
            return out
        v = self.graph.values[node.outputs[0]]
        slot = self.slots.get(v.name)
        if slot is None:  # a graph output: computed into the node's own buffer, returned copied
            out = self._own.get(v.name)
            if out is None:
                from pyvta.runtime.arrays import aligned_empty

                out = self._own[v.name] = aligned_empty(v.shape, v.dtype)
        else:  # the same view object every run, so the nodes reading it find their calls bound
            out = self._views.get(v.name)
            if out is None:
                out = self._views[v.name] = self._arena[slot][: math.prod(v.shape)].reshape(v.shape)
        call = self._bind(node, mod, args, out)
        call()
        if all(a.flags.c_contiguous for a in args):  # no copies bound
            self._bound[node.name] = (tuple(args), call, out, slot is not None)
        return out if slot is not None else out.copy()

    def _bind(self, node: Node, mod, args: list[np.ndarray], out: np.ndarray):
        """The kernel's call on ``args`` and ``out``: one call, or one per image of a batch."""
        params = mod.func.params
        per_image = self._per_image.get(node.name)
        if per_image is None:
            arrays = zip(args + [out], params, strict=True)  # elementwise: flat arrays
            return mod.bind(*[np.ascontiguousarray(a).reshape(p.shape) for a, p in arrays])
        batch, sliced = per_image
        if params[-1].shape[0] == batch:  # a kernel built for the batch (``batch_images``)
            arrays = zip(args + [out], params, strict=True)
            return mod.bind(*[np.ascontiguousarray(a).reshape(p.shape) for a, p in arrays])
        calls = []
        for b in range(batch):
            arrays = [a[b : b + 1] if cut else a for a, cut in zip(args, sliced, strict=True)]
            arrays.append(out[b : b + 1])
            calls.append(
                mod.bind(
                    *[np.ascontiguousarray(a).reshape(p.shape)
                      for a, p in zip(arrays, params, strict=True)]
                )
            )  # fmt: skip

        def run_images():
            for c in calls:
                c()

        return run_images


def plan_memory(graph: Graph, compiled: set[str]) -> tuple[dict[str, int], list[np.ndarray]]:
    """Arena slots for the outputs of the ``compiled`` nodes: value name -> slot index, and
    the slots (float32, 64-byte aligned). A slot is reused once every reader of its value (and
    of the views of it) has run; graph outputs and their aliases get no slot."""
    if not compiled:
        return {}, []
    from pyvta.runtime.arrays import aligned_empty

    root: dict[str, str] = {}
    for n in graph.nodes:
        for o in n.outputs:
            root[o] = root.get(n.inputs[0], n.inputs[0]) if n.op in VIEW_OPS else o
    last: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        for name in n.inputs:
            last[root.get(name, name)] = i
    pinned = {root.get(o, o) for o in graph.outputs}
    free: list[tuple[int, int]] = []  # (elements, slot)
    sizes: list[int] = []
    slots: dict[str, int] = {}
    ends: dict[int, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        if n.name in compiled:
            v = graph.values[n.outputs[0]]
            if v.dtype == "float32" and v.name not in pinned:
                elems = int(np.prod(v.shape))
                fit = [f for f in free if f[0] >= elems]
                if fit:
                    best = min(fit)
                    free.remove(best)
                    slot = best[1]
                else:
                    slot = len(sizes)
                    sizes.append(elems)
                slots[v.name] = slot
                ends.setdefault(last.get(v.name, i), []).append(slot)
        for slot in ends.pop(i, []):
            free.append((sizes[slot], slot))
    return slots, [aligned_empty((s,), "float32") for s in sizes]
