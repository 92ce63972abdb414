"""Compiled int8 kernels for the ``cpu-int8`` target: the graph's ``qconv2d`` / ``qdense`` nodes
on :mod:`compiler.ops.cpu.int8`, bit-exact with the numpy reference
:func:`runtime.cpu_ops.run_cpu_op` and the accelerator's contract. The dot-product form
follows the compiler's CPU target (``CpuTarget.host``, which ``PYVTA_CPU_FEATURES`` may limit):
``vpdpbusd`` where it has AVX-512 VNNI or AVX-VNNI (on the input not offset where the graph
proves it non-negative: :func:`nonnegative`, a ReLU or clip upstream), else ``vpmaddubsw`` for
such an input, else ``vpmaddwd``;
the vector width follows its registers.

:class:`CpuInt8Kernels` builds one kernel per compiled node and packs its weights when it is
constructed (the backend that runs them is the runtime's, ``runtime.int8_kernels``; the
pipeline's ``build_cpu_kernels`` pass makes one at compile time, so the kernels are in the disk
cache before the first inference). Grouped convs run the template per group (each group's
output channels padded to the vector), depthwise ones (``on_depthwise_kernel``) on
:func:`grouped_int8_spec`; a conv's kernel takes its whole batch (one call; the threads
split output channel blocks x images x rows); output channels that no vector divides are
padded with zero weights. Nodes it does not compile (batched dense, every other op) run on the
graph's float CPU backend (compiled float kernels for its float layers, numpy for the rest); a
float ``dense`` with constant weights (the classifier) has its weights transposed once, not per
inference (the same product, the same bits).
"""

from __future__ import annotations

import functools
import json
import os
import weakref

import numpy as np

from pyvta.runtime import cpu_llvm, int8_kernels
from pyvta.runtime.int8_kernels import (
    Int8Kernel,
    ScaleKernel,
    compiled_int8,
    compiled_scale,
    conv_groups,
    conv_view,
    padded_channels,
)
from pyvta.runtime.ir import HOST, Graph, Node
from pyvta.runtime.vta_ops import FusedParams

# a grouped conv runs the template (each group's channels padded to the vector, its input
# channels to whole lanes) unless that computes more than this many times its products: then
# (depthwise) grouped_int8_spec's kernel, one output channel's few products at a time
MAX_TEMPLATE_WASTE = 4


def on_depthwise_kernel(node: Node, graph: Graph, dot: str) -> bool:
    """Whether a compiled ``qconv2d`` runs :func:`grouped_int8_spec`'s kernel (one
    shift per layer, and the template would compute over ``MAX_TEMPLATE_WASTE`` times the
    layer's products with ``dot``'s lanes) rather than the template's."""
    from pyvta.compiler.ops.cpu.int8 import DOTS

    groups = conv_groups(node)
    if groups == 1 or FusedParams.from_attrs(node.attrs).per_channel:
        return False
    (c, _, _, o, _), _ = conv_view(node, graph)
    per_lane = DOTS[dot][0]
    o_pad, _ = padded_channels(o, groups)
    computed = o_pad * -(-(c // groups) // per_lane) * per_lane
    return computed > MAX_TEMPLATE_WASTE * o * (c // groups)


# ops whose output is >= 0 wherever all their activation inputs are: layout changes, pools
# (max, or averages of zero-padded windows), concat, (de)quantize (monotone, 0 -> 0), sums
_SIGN_KEEPING_OPS = frozenset(
    {
        "identity", "flatten", "reshape", "packed_flatten", "layout_transform", "pack_nchw",
        "unpack_nchw", "pack_nc", "unpack_nc", "concat", "cpu_concat", "quantize",
        "dequantize", "max_pool", "cpu_max_pool", "avg_pool", "cpu_avg_pool",
        "global_avg_pool", "cpu_global_avg_pool", "qglobal_avg_pool", "add",
    }
)  # fmt: skip


def nonnegative(value: str, graph: Graph) -> bool:
    """Whether every element of ``value`` is >= 0 whatever the graph's input: made by a node
    whose clip's lower bound is >= 0 (``clip_lo`` of the int8 ops, ``clip`` of the fused float
    ones, ``relu``, a ``clip`` op), or by one of ``_SIGN_KEEPING_OPS`` whose activation inputs
    all are; a graph input or constant is not."""
    producers = graph.producers()

    def check(name: str) -> bool:
        node = producers.get(name)
        if node is None:
            return False
        a = node.attrs
        if "clip_lo" in a:
            return a["clip_lo"] >= 0
        if node.op == "relu":
            return True
        if node.op == "clip":
            return a.get("min") is not None and a["min"] >= 0
        if a.get("clip") is not None:
            return a["clip"][0] >= 0
        if node.op not in _SIGN_KEEPING_OPS:
            return False
        ins = [i for i in node.inputs if i not in graph.constants]
        return bool(ins) and all(check(i) for i in ins)

    return check(value)


def node_dot_form(node: Node, graph: Graph, features: dict[str, bool]) -> str:
    """The ``compiler.ops.cpu.int8.DOTS`` form of a compiled node on a CPU with ``features``
    (``pmaddubsw`` only for an input :func:`nonnegative` proves 0..127)."""
    from pyvta.compiler.ops.cpu.int8 import dot_form, dot_isa

    return dot_form(dot_isa(features), nonnegative(node.inputs[0], graph))


# Below these a node's kernel runs on one thread: waking the pool's worker and splitting the
# work cost more than the half it would do. Per node, AVX2, 1 vs 2 threads (Zen 5, load ~2):
# net16's depthwise 3x3 (0.23 M MACs) 0.032 vs 0.055 ms, its 1x1 32 -> 35 (0.88 M) 0.036 vs
# 0.044, net11's 3x3 s2 (0.72 M) 0.014 vs 0.019; the 1x1 24 -> 64 (4.8 M) 0.100 vs 0.061;
# quantize of 75 K values 0.023 vs 0.049, dequantize of 45 K 0.084 vs 0.093, of 200 K 0.058
# vs 0.058. At load 1.2 the convs alike (0.017 vs 0.038, 0.021 vs 0.033, 0.009 vs 0.011 ms),
# (de)quantize of 45-75 K values even to 1.2x faster on 2 threads (a few microseconds)
MIN_PARALLEL_MACS = 2_000_000
MIN_PARALLEL_VALUES = 100_000


def node_threads(node: Node, graph: Graph, threads: int) -> int:
    """The threads a compiled int8 node's kernel is built for: ``threads``, or 1 for a conv /
    dense of fewer than ``MIN_PARALLEL_MACS`` multiply-adds or a (de)quantize of fewer than
    ``MIN_PARALLEL_VALUES`` values."""
    if node.op in ("quantize", "dequantize"):
        work, least = int(np.prod(graph.values[node.inputs[0]].shape)), MIN_PARALLEL_VALUES
    else:
        w = graph.constants[node.inputs[1]]
        out = graph.values[node.outputs[0]].shape
        work, least = int(np.prod(out)) * int(np.prod(w.shape[1:])), MIN_PARALLEL_MACS
    return threads if work >= least else 1


def int8_layer(node: Node, graph: Graph, target) -> tuple[tuple, np.ndarray, np.ndarray]:
    """A compiled node's layer for the CPU ``target`` (a ``CpuTarget``: its vector width and
    dot-product form pick the tile), ``qconv2d_nchw``'s arguments ``(C, H, W, O_pad, kernel,
    params, residual, knobs, dilations, O, batch, groups)`` (a conv's whole batch, one call),
    and its weight and bias packed for that tile.
    Channels no vector divides (74) are padded with zero weights, each group's
    (``padded_channels``): the kernel computes them and the caller keeps the layer's own."""
    from pyvta.compiler.ops.cpu.int8 import (
        Int8ConvKnobs,
        conv_out_hw,
        pack_qconv,
        sum_dot_form,
    )

    (c, h, w, o, kernel), params = conv_view(node, graph)
    dil = tuple(node.attrs.get("dilations", (1, 1))) if node.op == "qconv2d" else (1, 1)
    _, ow = conv_out_hw(h, w, kernel, params.strides, params.pads, dil)
    lanes, regs = target.vector_lanes("int32"), target.vector_registers
    groups = conv_groups(node)
    o_pad, positions = padded_channels(o, groups)
    wt = np.zeros((o_pad, c // groups, *kernel), np.int8)
    wt[positions] = graph.constants[node.inputs[1]].reshape(o, c // groups, *kernel)
    dot = sum_dot_form(node_dot_form(node, graph, target.feature_dict), wt)
    knobs = Int8ConvKnobs.for_layer(o_pad // groups, ow, lanes, regs, dot)
    residual = len(node.inputs) == 4
    bias = np.zeros(o_pad, np.int32)
    bias[positions] = graph.constants[node.inputs[2]]
    weight, bias = pack_qconv(wt, bias, knobs.oc_block, knobs.dot)
    batch = graph.values[node.inputs[0]].shape[0] if node.op == "qconv2d" else 1
    layer = (c, h, w, o_pad, kernel, params, residual, knobs, dil, o, batch, groups)
    return layer, weight, bias


def int8_spec(node: Node, graph: Graph, num_threads: int, features: str | None = None):
    """A compiled node's ``builds.KernelSpec`` on :func:`qconv2d_nchw`'s template for this
    host limited to the feature level ``features``, its weight and bias packed for that tile,
    and the tile's knobs (:func:`int8_layer`)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.int8 import qconv2d_nchw
    from pyvta.compiler.targets.cpu.builds import KernelSpec, lowered

    host = CpuTarget.host(num_threads, features)  # its vector width: AVX2 8 lanes, AVX-512 16
    layer, weight, bias = int8_layer(node, graph, host)
    what = json.dumps([*layer, num_threads, host.key], default=repr)
    order = (0, int(np.prod(graph.values[node.outputs[0]].shape)))
    spec = KernelSpec(what, lowered, (qconv2d_nchw, *layer), num_threads, features, order)
    return spec, weight, bias, layer[7]


def grouped_int8_spec(node: Node, graph: Graph, num_threads: int, features: str | None = None):
    """A grouped ``qconv2d`` that :func:`on_depthwise_kernel` takes (depthwise): its
    ``builds.KernelSpec`` on ``compiler.ops.cpu.int8.qconv2d_grouped_nchw`` (each output channel
    sums its own group, same contract; one shift per layer: per-channel grouped convs run
    :func:`int8_spec`'s), its weight and bias packed, and None (no tile's knobs)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.int8 import pack_qconv_grouped, qconv2d_grouped_nchw
    from pyvta.compiler.targets.cpu.builds import KernelSpec, lowered

    params = FusedParams.from_attrs(node.attrs)
    _, c, h, w = graph.values[node.inputs[0]].shape
    wt = graph.constants[node.inputs[1]]
    o, kernel, group = wt.shape[0], tuple(wt.shape[2:]), node.attrs["group"]
    dil = tuple(node.attrs.get("dilations", (1, 1)))
    residual = len(node.inputs) == 4
    host = CpuTarget.host(num_threads, features)
    lanes = host.vector_lanes("int32")
    n = graph.values[node.inputs[0]].shape[0]
    layer = [c, h, w, o, kernel, params, group, residual, dil, lanes, n, num_threads]
    what = json.dumps(["grouped"] + layer + [host.key], default=repr)
    template = functools.partial(qconv2d_grouped_nchw, batch=n)
    args = (template, c, h, w, o, kernel, params, group, residual, dil, lanes)
    spec = KernelSpec(what, lowered, args, num_threads, features)
    weight, bias = pack_qconv_grouped(wt, graph.constants[node.inputs[2]])
    return spec, weight, bias, None


def scale_spec(node: Node, graph: Graph, num_threads: int, features: str | None = None):
    """The ``builds.KernelSpec`` of a ``quantize`` / ``dequantize`` node's kernel
    (:func:`compiler.ops.cpu.int8_scale.quantize_nchw` / ``dequantize_nchw`` over the whole
    batch, reading or writing the float layers' blocked form where the node says:
    ``fuse_borders``)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.int8_scale import dequantize_nchw, quantize_nchw
    from pyvta.compiler.targets.cpu.builds import KernelSpec, lowered

    a = node.attrs
    host = CpuTarget.host(num_threads, features)
    if node.op == "quantize":
        layer = [graph.values[node.outputs[0]].shape, a["frac_bits"], a.get("src_block")]
        template = functools.partial(quantize_nchw, vector_lanes=host.vector_lanes("float32"))
    else:
        layer = [graph.values[node.inputs[0]].shape, a["frac_bits"], a.get("dst_block")]
        template = functools.partial(dequantize_nchw, vector_lanes=host.vector_lanes("float32"))
    what = json.dumps([node.op, *layer, num_threads, host.key], default=repr)
    return KernelSpec(what, lowered, (template, *layer), num_threads, features)


class CpuInt8Kernels(int8_kernels.CpuInt8Kernels):
    """The ``"cpu"`` backend of an int8 graph (``runtime.int8_kernels.CpuInt8Kernels``) with
    the kernels of the nodes :func:`compiled_int8` accepts built here when constructed (none
    without llvmlite, or when ``kernels`` are given: the numpy reference computes the same
    bits) for the host limited to ``features``; ``fallback`` default: the graph's float CPU
    backend built here."""

    def __init__(
        self,
        graph: Graph,
        num_threads: int | None = None,
        fallback=None,
        kernels=None,
        features: str | None = None,
    ) -> None:
        from pyvta.compiler.targets.cpu.kernels import cpu_backend_for

        fallback = fallback if fallback is not None else cpu_backend_for(graph, features)
        built, dense_wt, scales = dict(kernels or {}), {}, {}
        specs, convs, quantizers = {}, {}, []  # node -> its kernel's spec; what else it needs
        if cpu_llvm.have_llvmlite():  # the (de)quantize kernels, also beside given kernels
            threads = num_threads or os.cpu_count() or 1
            for n in graph.nodes:
                if compiled_scale(n, graph):
                    specs[n.name] = scale_spec(n, graph, node_threads(n, graph, threads), features)
                    quantizers.append(n)
        if kernels is None and cpu_llvm.have_llvmlite():
            from pyvta.compiler.backend.llvm import CpuTarget

            threads = num_threads or os.cpu_count() or 1
            host = CpuTarget.host(threads, features).feature_dict
            for n in graph.nodes:
                if compiled_int8(n, graph):
                    nt = node_threads(n, graph, threads)
                    depthwise = on_depthwise_kernel(n, graph, node_dot_form(n, graph, host))
                    spec_of = grouped_int8_spec if depthwise else int8_spec
                    specs[n.name], *packed = spec_of(n, graph, nt, features)
                    convs[n.name] = (n, *packed)
                elif n.op == "dense" and n.target == HOST and n.inputs[1] in graph.constants:
                    dense_wt[n.name] = cpu_llvm.gemm_operand(graph.constants[n.inputs[1]].T)
        from pyvta.compiler.targets.cpu.builds import build_all

        modules = dict(zip(specs, build_all(list(specs.values())), strict=True))
        scales = {n.name: ScaleKernel(modules[n.name], n, graph) for n in quantizers}
        for name, (n, weight, bias, knobs) in convs.items():
            built[name] = Int8Kernel(modules[name], weight, bias, n, graph)
            if knobs is not None:
                built[name].knobs = knobs
        super().__init__(graph, fallback, built, dense_wt, scales)
        self.threads = num_threads or os.cpu_count() or 1

    def inference_scope(self):
        from pyvta.compiler.targets.cpu.kernels import pool_scope

        return pool_scope(self.threads)


_BACKENDS: dict[int, tuple[weakref.ref, str | None, CpuInt8Kernels]] = {}


def int8_backend_for(graph: Graph, features: str | None = None) -> CpuInt8Kernels:
    """The :class:`CpuInt8Kernels` of ``graph`` for the feature level ``features``, made once
    per graph object."""
    hit = _BACKENDS.get(id(graph))
    if hit is not None and hit[0]() is graph and hit[1] == features:
        return hit[2]
    backend = CpuInt8Kernels(graph, features=features)
    _BACKENDS[id(graph)] = (weakref.ref(graph), features, backend)
    weakref.finalize(graph, _BACKENDS.pop, id(graph), None)
    return backend
