"""Compiled int8 kernels for the ``cpu-int8`` target: the graph's ``qconv2d`` / ``qdense`` nodes
on :mod:`compiler.ops.cpu.int8`, bit-exact with the numpy reference
:func:`runtime.cpu_ops.run_cpu_op` and the accelerator's contract. The dot-product form
follows the compiler's CPU target (``CpuTarget.host``, which ``PYVTA_CPU_FEATURES`` may limit):
``vpdpbusd`` where it has AVX-512 VNNI or AVX-VNNI, else ``vpmaddwd``; the vector width follows
its registers.

:class:`CpuInt8Kernels` builds one kernel per compiled node and packs its weights when it is
constructed (the pipeline's ``build_cpu_kernels`` pass makes one at compile time, so the
kernels are in the disk cache before the first inference). Nodes it does not compile (grouped
or dilated convs, batched dense, every other op) run on the graph's float CPU backend, which
runs them with numpy as before; a float ``dense`` with constant weights (the classifier) has
its weights transposed once, not per inference (the same product, the same bits).
"""

from __future__ import annotations

import json
import os
import weakref

import numpy as np

from pyvta.runtime import cpu_llvm
from pyvta.runtime.ir import Graph, Node
from pyvta.runtime.vta_ops import FusedParams

INT8_OPS = ("qconv2d", "qdense")


def compiled_int8(node: Node, graph: Graph) -> bool:
    """Whether ``node`` runs on a compiled int8 kernel: a ``cpu`` ``qconv2d`` with one group and
    no dilation, or a ``qdense`` of one row, with constant weights and bias."""
    if node.target != "cpu" or node.op not in INT8_OPS:
        return False
    if not all(i in graph.constants for i in node.inputs[1:3]):
        return False
    a = node.attrs
    if node.op == "qconv2d":
        return a.get("group", 1) == 1 and tuple(a.get("dilations", (1, 1))) == (1, 1)
    return graph.values[node.inputs[0]].shape[0] == 1


def conv_view(node: Node, graph: Graph) -> tuple[tuple[int, int, int, int, tuple], FusedParams]:
    """``((C, H, W, O, kernel), params)`` of a compiled node; a ``qdense`` is a 1x1 conv of a
    1x1 image with ``K`` channels."""
    w = graph.constants[node.inputs[1]]
    params = FusedParams.from_attrs(node.attrs)
    if node.op == "qdense":
        return (w.shape[1], 1, 1, w.shape[0], (1, 1)), FusedParams(
            params.shift, params.clip_lo, params.clip_hi, params.res_shift
        )
    _, c, h, wd = graph.values[node.inputs[0]].shape
    return (c, h, wd, w.shape[0], tuple(w.shape[2:])), params


_MODULES: dict[str, object] = {}  # (layer, params, knobs, threads) -> built module, per process


def int8_layer(node: Node, graph: Graph, target) -> tuple[tuple, np.ndarray, np.ndarray]:
    """A compiled node's layer for the CPU ``target`` (a ``CpuTarget``: its vector width and
    dot-product form pick the tile), ``qconv2d_nchw``'s arguments ``(C, H, W, O, kernel, params,
    residual, knobs)``, and its weight and bias packed for that tile."""
    from pyvta.compiler.ops.cpu.int8 import (
        Int8ConvKnobs,
        conv_out_hw,
        dot_form,
        dot_isa,
        pack_qconv,
    )

    (c, h, w, o, kernel), params = conv_view(node, graph)
    _, ow = conv_out_hw(h, w, kernel, params.strides, params.pads)
    lanes, regs = target.vector_lanes("int32"), target.vector_registers
    dot = dot_form(dot_isa(target.feature_dict))
    knobs = Int8ConvKnobs.for_layer(o, ow, lanes, regs, dot)
    residual = len(node.inputs) == 4
    wt = graph.constants[node.inputs[1]]
    weight, bias = pack_qconv(
        wt.reshape(o, c, *kernel), graph.constants[node.inputs[2]], knobs.oc_block, knobs.dot
    )
    return (c, h, w, o, kernel, params, residual, knobs), weight, bias


def node_channel_shifts(node: Node, graph: Graph) -> list[np.ndarray]:
    """A node's per-channel shifts (its kernel's two int32 [O] inputs after the bias), or none
    when the node has one shift per layer."""
    (_, _, _, o, _), params = conv_view(node, graph)
    return list(params.channel_shifts(o)) if params.per_channel else []


class Int8Kernel:
    """One compiled node: its module, packed weight and corrected bias."""

    def __init__(self, node: Node, graph: Graph, num_threads: int) -> None:
        from pyvta import compiler
        from pyvta.compiler.backend.llvm import CpuTarget
        from pyvta.compiler.ops.cpu.int8 import qconv2d_nchw

        host = CpuTarget.host(num_threads)  # its vector width: AVX2 8 lanes, AVX-512 16
        layer, weight, bias = int8_layer(node, graph, host)
        self.knobs = layer[-1]
        key = json.dumps([*layer, num_threads, host.key], default=repr)
        if key not in _MODULES:  # lowered once per process (the disk cache skips codegen)
            sch, args = qconv2d_nchw(*layer)
            _MODULES[key] = compiler.build(sch, args, num_threads=num_threads)
        shifts = node_channel_shifts(node, graph)
        self._set(_MODULES[key], weight, bias, graph.values[node.outputs[0]].shape, shifts)

    @classmethod
    def loaded(cls, module, weight, bias, out_shape, shifts=()) -> Int8Kernel:
        """A kernel already built (an artifact's shared object: ``cpu_code.SharedKernel``) with
        the weight and bias packed for it (``shifts``: ``node_channel_shifts``)."""
        kernel = cls.__new__(cls)
        kernel._set(module, weight, bias, out_shape, shifts)
        return kernel

    def _set(self, module, weight, bias, out_shape, shifts) -> None:
        self.module, self.weight, self.bias = module, weight, bias
        self.shifts = list(shifts)  # per-channel shifts: two int32 [O] inputs after the bias
        self.shapes = [p.shape for p in module.func.params]
        self.out_shape = tuple(out_shape)

    def __call__(self, args: list[np.ndarray]) -> np.ndarray:
        arrays = [args[0], self.weight, self.bias, *self.shifts] + args[3:]
        out = np.empty(self.shapes[-1], np.int8)
        ins = [
            np.ascontiguousarray(a).reshape(s) for a, s in zip(arrays, self.shapes, strict=False)
        ]
        self.module(*ins, out)
        return out.reshape(self.out_shape)


class CpuInt8Kernels:
    """The ``"cpu"`` backend of an int8 graph: compiled kernels for the nodes
    :func:`compiled_int8` accepts, ``fallback`` (default: the graph's float CPU backend, numpy
    for these graphs) for the rest. Builds every kernel when constructed."""

    def __init__(
        self, graph: Graph, num_threads: int | None = None, fallback=None, kernels=None
    ) -> None:
        """``kernels``: the compiled nodes' kernels, already built (node name ->
        ``Int8Kernel``, e.g. ``Int8Kernel.loaded`` from an artifact's shared object)."""
        from pyvta.compiler.targets.cpu.kernels import cpu_backend_for

        self.graph = graph
        self.fallback = fallback if fallback is not None else cpu_backend_for(graph)
        threads = num_threads or os.cpu_count() or 1
        self.kernels: dict[str, Int8Kernel] = dict(kernels or {})
        self._dense_wt: dict[str, np.ndarray] = {}  # float dense node -> its weights, transposed
        if kernels is not None or not cpu_llvm.have_llvmlite():
            return  # a board's runtime: the numpy kernels compute the same bits
        for n in graph.nodes:
            if compiled_int8(n, graph):
                self.kernels[n.name] = Int8Kernel(n, graph, threads)
            elif n.op == "dense" and n.target == "cpu" and n.inputs[1] in graph.constants:
                self._dense_wt[n.name] = cpu_llvm.gemm_operand(graph.constants[n.inputs[1]].T)

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        kernel = self.kernels.get(node.name)
        if kernel is not None:
            return kernel(args)
        wt = self._dense_wt.get(node.name)
        if wt is not None:
            from pyvta.runtime.cpu_ops import dense_transposed

            return dense_transposed(args[0], wt, args[2:], node.attrs)
        return self.fallback.run(node, args)


def has_int8_nodes(graph: Graph) -> bool:
    """Whether any ``cpu`` node of ``graph`` is a quantized conv / dense."""
    return any(n.op in INT8_OPS and n.target == "cpu" for n in graph.nodes)


_BACKENDS: dict[int, tuple[weakref.ref, CpuInt8Kernels]] = {}


def int8_backend_for(graph: Graph) -> CpuInt8Kernels:
    """The :class:`CpuInt8Kernels` of ``graph``, made once per graph object."""
    hit = _BACKENDS.get(id(graph))
    if hit is not None and hit[0]() is graph:
        return hit[1]
    backend = CpuInt8Kernels(graph)
    _BACKENDS[id(graph)] = (weakref.ref(graph), backend)
    weakref.finalize(graph, _BACKENDS.pop, id(graph), None)
    return backend
