"""The host CPU's backend of an int8 graph: its ``qconv2d`` / ``qdense`` nodes on int8 kernels
built before (the JIT's, ``compiler.targets.cpu_int8.kernels``, or an artifact's shared object,
``runtime.cpu_code``), bit-exact with the numpy reference :func:`runtime.cpu_ops.run_cpu_op`
and the accelerator's contract; the other nodes on a fallback backend (the graph's float
``runtime.cpu_kernels.CpuKernels``). Without kernels (a board without the artifact's code) the
numpy reference computes the same bits. Nothing here compiles.

A conv's kernel takes its whole batch in one call (a kernel built for fewer images runs on each
group in turn); output channels that no vector divides are padded with zero weights, per conv
group (``padded_channels``).
"""

from __future__ import annotations

import operator

import numpy as np

from pyvta.runtime.cpu_kernels import CpuKernels
from pyvta.runtime.ir import HOST, Graph, Node
from pyvta.runtime.vta_ops import FusedParams

INT8_OPS = ("qconv2d", "qdense")
OC_PAD = 8  # output channels are padded to a multiple of this (a whole int32 vector of AVX2)


def compiled_int8(node: Node, graph: Graph) -> bool:
    """Whether ``node`` runs on a compiled int8 kernel: a ``cpu`` ``qconv2d`` (any group,
    dilation and batch), or a ``qdense`` of one row, with constant weights and bias."""
    if node.target != HOST or node.op not in INT8_OPS:
        return False
    if not all(i in graph.constants for i in node.inputs[1:3]):
        return False
    if node.op == "qdense":
        return graph.values[node.inputs[0]].shape[0] == 1
    return True


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


def conv_groups(node: Node) -> int:
    """The conv groups of a compiled node (a ``qdense``: 1)."""
    return node.attrs.get("group", 1) if node.op == "qconv2d" else 1


def padded_channels(o: int, groups: int = 1) -> tuple[int, np.ndarray]:
    """``(O_pad, positions)``: the output channels a compiled template kernel
    (``compiler.ops.cpu.int8.qconv2d_nchw``) computes, each group's ``o / groups`` padded up to
    ``OC_PAD``, and where the ``o`` channels sit among them (int ``[o]``)."""
    og = o // groups
    og_pad = -(-og // OC_PAD) * OC_PAD
    return groups * og_pad, (np.arange(groups)[:, None] * og_pad + np.arange(og)).ravel()


def node_channel_shifts(node: Node, graph: Graph) -> list[np.ndarray]:
    """A node's per-channel shifts (its kernel's two int32 ``[O_pad]`` inputs after the bias,
    0 for the padded channels), or none when the node has one shift per layer."""
    (_, _, _, o, _), params = conv_view(node, graph)
    if not params.per_channel:
        return []
    o_pad, pos = padded_channels(o, conv_groups(node))
    padded = [np.zeros(o_pad, np.int32) for _ in range(2)]
    for p, v in zip(padded, params.channel_shifts(o), strict=True):
        p[pos] = v
    return padded


class Int8Kernel:
    """One compiled node: its kernel (``module``, called as ``Module`` is), its packed weight
    and corrected bias (``compiler.targets.cpu_int8.kernels.int8_layer``). Its output is one
    buffer, written every inference (a graph output is returned copied), and its calls are
    bound once (``Module.bind``) for the arrays it is given: the next node finds the same
    array and reuses its bound call, no per-inference checks or allocations."""

    def __init__(self, module, weight, bias, node: Node, graph: Graph) -> None:
        self.module, self.weight, self.bias = module, weight, bias
        self.shifts = node_channel_shifts(node, graph)  # per-channel: int32 inputs after the bias
        self.shapes = [p.shape for p in module.func.params]
        self.out_shape = graph.values[node.outputs[0]].shape
        self.channels = conv_view(node, graph)[0][3]
        self.groups = conv_groups(node)
        # a kernel built for fewer images than the node's batch (an artifact's one-image kernel)
        # runs on each group of images in turn; the JIT's take the whole batch in one call
        self.batch = self.out_shape[0] // self.shapes[0][0] if node.op == "qconv2d" else 1
        self.out = np.empty((self.batch, *self.shapes[-1]), np.int8)
        self.copy_out = node.outputs[0] in graph.outputs
        self._args: tuple = ()
        self._call = None
        self.bound_calls: list = []  # the kernel's own calls (benchmarks/executor_overhead.py)

    def _bind(self, args: list[np.ndarray]):
        calls, held = [], []  # held: the arrays the bound calls point into, kept alive
        step = self.shapes[0][0]  # images per call
        for b in range(self.batch):
            per_image = [a[b * step : (b + 1) * step] if self.batch > 1 else a for a in args]
            arrays = [per_image[0], self.weight, self.bias, *self.shifts] + per_image[3:]
            ins = [
                np.ascontiguousarray(a).reshape(s)
                for a, s in zip(arrays, self.shapes, strict=False)
            ]
            held.append(ins)
            calls.append(self.module.bind(*ins, self.out[b]))
        view = self.out  # [calls, images per call, O_pad, OH, OW]
        o_pad = view.shape[2]
        if o_pad != self.channels:  # the layer's own channels, each group's first
            g = self.groups
            per_group = view.reshape(*view.shape[:2], g, o_pad // g, *view.shape[3:])
            view = per_group[:, :, :, : self.channels // g]
        same = view.flags.c_contiguous and not self.copy_out
        result = view.reshape(self.out_shape)  # a copy unless same
        self.bound_calls = calls

        def run(held=held):
            for c in calls:
                c()
            return result if same else np.array(view).reshape(self.out_shape)  # a copy

        return run

    def __call__(self, args: list[np.ndarray]) -> np.ndarray:
        if len(args) == len(self._args) and all(map(operator.is_, args, self._args)):
            return self._call()
        call = self._bind(args)
        if all(a.flags.c_contiguous for a in args):  # the bound call holds no copies
            self._args, self._call = tuple(args), call
        return call()


SCALE_OPS = ("quantize", "dequantize")


def compiled_scale(node: Node, graph: Graph) -> bool:
    """Whether ``node`` is a ``cpu`` (de)quantize that runs a compiled kernel
    (:class:`ScaleKernel`): one of an NCHW (or blocked) tensor; a flat one runs numpy."""
    return (
        node.target == HOST
        and node.op in SCALE_OPS
        and len(graph.values[node.inputs[0]].shape) >= 4
    )


class ScaleKernel:
    """A ``quantize`` / ``dequantize`` node's kernel (built by
    ``compiler.targets.cpu_int8.kernels.scale_spec``, the whole batch in one call,
    bit-exact with ``run_cpu_op``). A quantize that reads the blocked form of padded channels
    writes ``[N, C_pad, H, W]`` (as ``[N, C_pad/b, b, H * W]``) and keeps the first ``C``. Its
    output buffer is written every inference (a graph output, or a non-contiguous one, is
    returned copied)."""

    def __init__(self, module, node: Node, graph: Graph) -> None:
        self.module = module
        out_v = graph.values[node.outputs[0]]
        buf = module.func.params[-1].shape
        self.out = np.empty(buf, out_v.dtype)
        if node.op == "quantize" and node.attrs.get("src_block"):  # [N, C_pad/b, b, H * W]
            n, c = out_v.shape[:2]
            self.result = self.out.reshape(n, -1, *out_v.shape[2:])[:, :c]
        else:
            self.result = self.out.reshape(out_v.shape)
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
    """The ``"cpu"`` backend of an int8 graph: ``kernels`` (node name -> :class:`Int8Kernel`)
    for the nodes that have one, ``scales`` (node name -> :class:`ScaleKernel`) for the
    compiled (de)quantize, ``fallback`` (default: the graph's float
    :class:`~runtime.cpu_kernels.CpuKernels`, numpy for these graphs) for the rest;
    ``dense_weights``: a float ``dense`` node's constant weights, transposed once for
    ``runtime.cpu_ops.dense_transposed`` (node name -> ``cpu_llvm.gemm_operand(w.T)``)."""

    def __init__(
        self,
        graph: Graph,
        fallback=None,
        kernels: dict | None = None,
        dense_weights=None,
        scales: dict | None = None,
    ) -> None:
        self.graph = graph
        self.fallback = fallback if fallback is not None else CpuKernels(graph)
        self.kernels: dict[str, Int8Kernel] = dict(kernels or {})
        self._dense_wt: dict[str, np.ndarray] = dict(dense_weights or {})
        self.scales: dict[str, ScaleKernel] = dict(scales or {})  # compiled (de)quantize

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
    return any(n.op in INT8_OPS and n.target == HOST for n in graph.nodes)
