"""Compiled int8 kernels for the ``cpu-int8`` target: the graph's ``qconv2d`` / ``qdense`` nodes
on :mod:`compiler.ops.cpu.int8`, bit-exact with the numpy reference
:func:`runtime.cpu_ops.run_cpu_op` and the accelerator's contract. The dot-product form
follows the compiler's CPU target (``CpuTarget.host``, which ``PYVTA_CPU_FEATURES`` may limit):
``vpdpbusd`` where it has AVX-512 VNNI or AVX-VNNI, else ``vpmaddwd``; the vector width follows
its registers.

:class:`CpuInt8Kernels` builds one kernel per compiled node and packs its weights when it is
constructed (the pipeline's ``build_cpu_kernels`` pass makes one at compile time, so the
kernels are in the disk cache before the first inference). Grouped convs of up to
``MAX_DENSE_GROUPS`` groups run as one conv of block-diagonal weights, more (depthwise) on
:class:`GroupedInt8Kernel`; a batch runs one image at a time; output channels that no vector
divides are padded with zero weights. Nodes it does not compile (batched dense, every other op)
run on the graph's float CPU backend (compiled float kernels for its float layers, numpy for
the rest); a float ``dense`` with constant weights (the classifier) has its weights transposed
once, not per inference (the same product, the same bits).
"""

from __future__ import annotations

import json
import operator
import os
import weakref

import numpy as np

from pyvta.runtime import cpu_llvm
from pyvta.runtime.ir import Graph, Node
from pyvta.runtime.vta_ops import FusedParams

INT8_OPS = ("qconv2d", "qdense")


MAX_DENSE_GROUPS = 8  # up to this many groups: one conv of block-diagonal weights (group x the
# work, on the fast dot-product template); more (depthwise): GroupedInt8Kernel
OC_PAD = 8  # output channels are padded to a multiple of this (a whole int32 vector of AVX2)


def compiled_int8(node: Node, graph: Graph) -> bool:
    """Whether ``node`` runs on a compiled int8 kernel: a ``cpu`` ``qconv2d`` (any group,
    dilation and batch), or a ``qdense`` of one row, with constant weights and bias."""
    if node.target != "cpu" or node.op not in INT8_OPS:
        return False
    if not all(i in graph.constants for i in node.inputs[1:3]):
        return False
    if node.op == "qdense":
        return graph.values[node.inputs[0]].shape[0] == 1
    return True


def conv_weights(node: Node, graph: Graph) -> np.ndarray:
    """The OIHW int8 weights of a compiled node as one conv: a grouped conv's as the
    block-diagonal ``[O, C, KH, KW]`` (zeros between groups: the same sums, bit for bit)."""
    from pyvta.compiler.targets.cpu.alter_cpu_layout import dense_group_weights

    w = graph.constants[node.inputs[1]]
    group = node.attrs.get("group", 1) if node.op == "qconv2d" else 1
    return dense_group_weights(w, group) if group > 1 else w


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


def padded_channels(o: int) -> int:
    """The output channels a compiled kernel computes: ``o`` padded up to ``OC_PAD``."""
    return -(-o // OC_PAD) * OC_PAD


def int8_layer(node: Node, graph: Graph, target) -> tuple[tuple, np.ndarray, np.ndarray]:
    """A compiled node's layer for the CPU ``target`` (a ``CpuTarget``: its vector width and
    dot-product form pick the tile), ``qconv2d_nchw``'s arguments ``(C, H, W, O_pad, kernel,
    params, residual, knobs, dilations, O)``, and its weight and bias packed for that tile.
    Channels no vector divides (74) are padded with zero weights (``padded_channels``): the
    kernel computes them and the caller keeps the layer's own; a grouped conv's weights are
    block-diagonal (``conv_weights``)."""
    from pyvta.compiler.ops.cpu.int8 import (
        Int8ConvKnobs,
        conv_out_hw,
        dot_form,
        dot_isa,
        pack_qconv,
    )

    (c, h, w, o, kernel), params = conv_view(node, graph)
    dil = tuple(node.attrs.get("dilations", (1, 1))) if node.op == "qconv2d" else (1, 1)
    _, ow = conv_out_hw(h, w, kernel, params.strides, params.pads, dil)
    lanes, regs = target.vector_lanes("int32"), target.vector_registers
    dot = dot_form(dot_isa(target.feature_dict))
    o_pad = padded_channels(o)
    knobs = Int8ConvKnobs.for_layer(o_pad, ow, lanes, regs, dot)
    residual = len(node.inputs) == 4
    wt = conv_weights(node, graph).reshape(o, c, *kernel)
    weight, bias = pack_qconv(
        np.pad(wt, [(0, o_pad - o), (0, 0), (0, 0), (0, 0)]),
        np.pad(graph.constants[node.inputs[2]], (0, o_pad - o)),
        knobs.oc_block,
        knobs.dot,
    )
    return (c, h, w, o_pad, kernel, params, residual, knobs, dil, o), weight, bias


def node_channel_shifts(node: Node, graph: Graph) -> list[np.ndarray]:
    """A node's per-channel shifts (its kernel's two int32 ``[O_pad]`` inputs after the bias,
    0 for the padded channels), or none when the node has one shift per layer."""
    (_, _, _, o, _), params = conv_view(node, graph)
    if not params.per_channel:
        return []
    pad = padded_channels(o) - o
    return [np.pad(np.asarray(v, np.int32), (0, pad)) for v in params.channel_shifts(o)]


class Int8Kernel:
    """One compiled node: its module, packed weight and corrected bias."""

    def __init__(self, node: Node, graph: Graph, num_threads: int) -> None:
        from pyvta import compiler
        from pyvta.compiler.backend.llvm import CpuTarget
        from pyvta.compiler.ops.cpu.int8 import qconv2d_nchw

        host = CpuTarget.host(num_threads)  # its vector width: AVX2 8 lanes, AVX-512 16
        layer, weight, bias = int8_layer(node, graph, host)
        self.knobs = layer[7]
        # one image per call (bound once per image): the template's batch=N, one call, ran
        # 1.7-3.7x slower per image (a 64->56 7x7 conv on 15x15: 2.2 ms for 4 images, 0.33 ms
        # for one; Zen 4, loaded machine; not understood yet)
        key = json.dumps([*layer, num_threads, host.key], default=repr)
        if key not in _MODULES:  # lowered once per process (the disk cache skips codegen)
            sch, args = qconv2d_nchw(*layer)
            _MODULES[key] = compiler.build(sch, args, num_threads=num_threads)
        self._set(_MODULES[key], weight, bias, node, graph)

    @classmethod
    def loaded(cls, module, weight, bias, node: Node, graph: Graph) -> Int8Kernel:
        """A kernel already built (an artifact's shared object: ``cpu_code.SharedKernel``) with
        the weight and bias packed for it (``int8_layer``)."""
        kernel = cls.__new__(cls)
        kernel._set(module, weight, bias, node, graph)
        return kernel

    def _set(self, module, weight, bias, node: Node, graph: Graph) -> None:
        self.module, self.weight, self.bias = module, weight, bias
        self.shifts = node_channel_shifts(node, graph)  # per-channel: int32 inputs after the bias
        self._outputs(module, node, graph, conv_view(node, graph)[0][3])

    def _outputs(self, module, node: Node, graph: Graph, channels: int) -> None:
        self.shapes = [p.shape for p in module.func.params]
        self.out_shape = graph.values[node.outputs[0]].shape
        self.channels = channels
        self.batch = self.out_shape[0] if node.op == "qconv2d" else 1
        # images per call: the whole batch, or one (an artifact's kernel built for one image)
        self.per_call = self.shapes[0][0] if node.op == "qconv2d" else 1
        # one output buffer, written every inference (a graph output is returned copied): the
        # next node finds the same array and reuses its bound call
        self.out = np.empty((self.batch, *self.shapes[-1][1:]), np.int8)
        self.copy_out = node.outputs[0] in graph.outputs
        self._args: tuple = ()
        self._call = None

    def _bind(self, args: list[np.ndarray]):
        calls, held = [], []  # held: the arrays the bound calls point into, kept alive
        k = self.per_call
        for b in range(0, self.batch, k):
            part = [a[b : b + k] if self.batch > k else a for a in args]
            arrays = (
                [part[0], self.weight, self.bias, *self.shifts] + part[3:] + [self.out[b : b + k]]
            )
            ins = [
                np.ascontiguousarray(a).reshape(s) for a, s in zip(arrays, self.shapes, strict=True)
            ]
            held.append(ins)
            calls.append(self.module.bind(*ins))
        view = self.out[:, : self.channels] if self.out.shape[1] != self.channels else self.out
        result = view.reshape(self.out_shape)
        same = result.flags.c_contiguous and not self.copy_out

        self.bound_calls = calls  # the kernel's own calls (benchmarks/executor_overhead.py)

        def run(held=held):
            for c in calls:
                c()
            return result if same else view.reshape(self.out_shape).copy()

        return run

    def __call__(self, args: list[np.ndarray]) -> np.ndarray:
        if len(args) == len(self._args) and all(map(operator.is_, args, self._args)):
            return self._call()
        call = self._bind(args)
        if all(a.flags.c_contiguous for a in args):  # the bound call holds no copies
            self._args, self._call = tuple(args), call
        return call()


class GroupedInt8Kernel(Int8Kernel):
    """A ``qconv2d`` of more than ``MAX_DENSE_GROUPS`` groups (depthwise): each output channel
    sums its own group (``compiler.ops.cpu.int8.qconv2d_grouped_nchw``), same contract."""

    def __init__(self, node: Node, graph: Graph, num_threads: int) -> None:  # noqa: D107
        from pyvta import compiler
        from pyvta.compiler.backend.llvm import CpuTarget
        from pyvta.compiler.ops.cpu.int8 import pack_qconv_grouped, qconv2d_grouped_nchw

        params = FusedParams.from_attrs(node.attrs)
        _, c, h, w = graph.values[node.inputs[0]].shape
        wt = graph.constants[node.inputs[1]]
        o, kernel, group = wt.shape[0], tuple(wt.shape[2:]), node.attrs["group"]
        dil = tuple(node.attrs.get("dilations", (1, 1)))
        residual = len(node.inputs) == 4
        host = CpuTarget.host(num_threads)
        lanes = host.vector_lanes("int32")
        layer = [c, h, w, o, kernel, params, group, residual, dil, lanes, num_threads]
        key = json.dumps(["grouped"] + layer + [host.key], default=repr)
        if key not in _MODULES:  # one image per call, as Int8Kernel
            sch, args = qconv2d_grouped_nchw(
                c, h, w, o, kernel, params, group, residual, dil, lanes
            )
            _MODULES[key] = compiler.build(sch, args, num_threads=num_threads)
        self.module = _MODULES[key]
        self.weight, self.bias = pack_qconv_grouped(wt, graph.constants[node.inputs[2]])
        self.shifts = []  # one shift per layer (per-channel grouped convs run Int8Kernel)
        self._outputs(self.module, node, graph, o)


SCALE_OPS = ("quantize", "dequantize")


def compiled_scale(node: Node, graph: Graph) -> bool:
    """Whether ``node`` is a ``cpu`` (de)quantize that runs a compiled kernel
    (:class:`ScaleKernel`): one of an NCHW (or blocked) tensor; a flat one runs numpy."""
    return (
        node.target == "cpu"
        and node.op in SCALE_OPS
        and len(graph.values[node.inputs[0]].shape) >= 4
        and cpu_llvm.have_llvmlite()
    )


class ScaleKernel:
    """A ``quantize`` / ``dequantize`` node as one compiled kernel over the whole batch
    (:func:`compiler.ops.cpu.int8.quantize_nchw` / ``dequantize_nchw``, bit-exact with the
    numpy ``run_cpu_op``), reading or writing the float layers' blocked form where the node says
    (``fuse_borders``). Its output buffer is written every inference (a graph output is
    returned copied), so the next node finds the same array."""

    def __init__(self, node: Node, graph: Graph, num_threads: int) -> None:
        from pyvta import compiler
        from pyvta.compiler.backend.llvm import CpuTarget
        from pyvta.compiler.ops.cpu.int8 import dequantize_nchw, quantize_nchw

        a = node.attrs
        host = CpuTarget.host(num_threads)
        out_v = graph.values[node.outputs[0]]
        if node.op == "quantize":
            shape = out_v.shape
            layer = [shape, a["frac_bits"], a.get("src_block")]
            build = quantize_nchw
        else:
            shape = graph.values[node.inputs[0]].shape
            layer = [shape, a["frac_bits"], a.get("dst_block")]
            build = dequantize_nchw
        key = json.dumps([node.op, *layer, num_threads, host.key], default=repr)
        if key not in _MODULES:
            sch, args = build(*layer)
            _MODULES[key] = compiler.build(sch, args, num_threads=num_threads)
        self.module = _MODULES[key]
        buf = self.module.func.params[-1].shape
        self.out = np.empty(buf, out_v.dtype)
        n, c = shape[0], shape[1]
        # a blocked quantize of padded channels writes [N, C_pad, H, W]: keep the first C
        whole = (
            self.out.reshape(n, -1, *shape[2:]) if len(buf) == 5 and node.op == "quantize" else None
        )
        self.result = self.out.reshape(out_v.shape) if whole is None else whole[:, :c]
        self.copy_out = node.outputs[0] in graph.outputs or not self.result.flags.c_contiguous
        self._args: tuple = ()
        self._call = None

    def __call__(self, args: list[np.ndarray]) -> np.ndarray:
        x = args[0]
        if not (self._args and x is self._args[0]):
            shape = self.module.func.params[0].shape
            if not x.flags.c_contiguous:  # a copy, alive for this call only
                self.module(np.ascontiguousarray(x).reshape(shape), self.out)
                return self.result.copy() if self.copy_out else self.result
            self._args, self._call = (x,), self.module.bind(x.reshape(shape), self.out)
        self._call()
        return self.result.copy() if self.copy_out else self.result


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
        self.scales: dict[str, ScaleKernel] = {}  # the compiled (de)quantize nodes
        self._dense_wt: dict[str, np.ndarray] = {}  # float dense node -> its weights, transposed
        if not cpu_llvm.have_llvmlite():
            return  # a board's runtime: the numpy kernels compute the same bits
        for n in graph.nodes:
            if compiled_int8(n, graph):
                if kernels is not None:
                    continue  # built already (an artifact's shared object)
                grouped = (
                    n.op == "qconv2d"
                    and n.attrs.get("group", 1) > MAX_DENSE_GROUPS
                    and not FusedParams.from_attrs(n.attrs).per_channel
                )
                kind = GroupedInt8Kernel if grouped else Int8Kernel
                self.kernels[n.name] = kind(n, graph, threads)
            elif compiled_scale(n, graph):
                self.scales[n.name] = ScaleKernel(n, graph, threads)
            elif n.op == "dense" and n.target == "cpu" and n.inputs[1] in graph.constants:
                self._dense_wt[n.name] = cpu_llvm.gemm_operand(graph.constants[n.inputs[1]].T)

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        kernel = self.kernels.get(node.name) or self.scales.get(node.name)
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
