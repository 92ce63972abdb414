"""The ``"gpu"`` backend of a float graph: every node one GPU template (``compiler.ops.cuda``).

``targets.gpu.place`` puts every node of a float graph on ``"gpu"`` and writes its
schedule into it (``attrs["gpu_schedule"]``: ``{"template": ..., "knobs": {...}}``), so an
artifact says what every layer runs. The templates:

- ``conv2d`` (fused bias / residual / clip): ``direct`` (``conv2d_gpu``, group 1) or
  ``depthwise`` (group = channels); ``dense`` (fused epilogue): the GEMM template,
- ``add`` / ``relu`` / ``clip``: flat elementwise; ``max_pool``, ``avg_pool``,
  ``global_avg_pool``, ``softmax`` (last axis of a 2-D value),
- ``reshape`` / ``flatten`` / ``identity``: no kernel — the output is the input's memory
  under another shape (on the GPU the same device buffer).

Nothing falls back to numpy: an op without a template is refused when the graph is placed.

Two node backends run the same lowered kernels: :class:`EmulatedGpu` (``cuda-emulated``: the
kernels as CPU loop IR, llvmlite) and :class:`DeviceGpu` (the PTX on an NVIDIA GPU through
``backend.cuda.launch``: device buffers for every value, the weights uploaded once).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from pyvta.compiler.targets.gpu.devices import gpu_device
from pyvta.isa.errors import PyvtaError
from pyvta.runtime.compiled_model import GpuKernel
from pyvta.runtime.ir import GPU, Graph, GraphError, Node

VIEW_OPS = ("reshape", "flatten", "identity")


class GpuUnavailableError(PyvtaError, RuntimeError):
    """The real-GPU backend was asked for where ``cuInit`` (or cuda-bindings) fails."""


# -- default schedules -----------------------------------------------------------------------
def _square(node: Node, name: str) -> int:
    vals = list(node.attrs[name])
    if len(set(vals)) != 1:
        raise GraphError(
            f"node {node.name!r} ({node.op}): {name} {vals} on the GPU must be equal in every"
            " dimension (the GPU templates take one square value)"
        )
    return int(vals[0])


def _conv_knobs(out_w: int, kernel: int) -> dict:
    from pyvta.compiler.ops.cuda import GpuConv2dKnobs

    kn = GpuConv2dKnobs(unroll=kernel <= 3)  # a 7x7 window unrolled bloats the PTX
    if out_w < kn.threads_x * kn.reg_x:  # narrow layers: one column per thread, fewer threads
        kn = replace(kn, threads_x=max(1, min(kn.threads_x, out_w)), reg_x=1)
    return kn.to_dict()


def _dense_knobs(m: int) -> dict:
    from pyvta.compiler.ops.cuda import GpuGemmKnobs

    if m >= 16:
        return GpuGemmKnobs().to_dict()
    return GpuGemmKnobs(threads_x=64, threads_y=1, reg_m=1, reg_n=1, tile_k=16).to_dict()


def default_schedule(node: Node, in_shapes, out_shape) -> dict:
    """The untuned template and knobs of ``node`` (``attrs["gpu_schedule"]``)."""
    op = node.op
    if op == "conv2d":
        a = node.attrs
        if list(a["dilations"]) != [1, 1]:
            raise GraphError(f"conv2d {node.name!r}: dilations {a['dilations']} (GPU: [1, 1])")
        channels, group = in_shapes[0][1], a["group"]
        if group == 1:
            return {"template": "direct", "knobs": _conv_knobs(out_shape[3], in_shapes[1][2])}
        if group == channels == out_shape[1]:
            return {"template": "depthwise", "knobs": {"threads": 128}}
        raise GraphError(
            f"conv2d {node.name!r}: group {group} of {channels} channels (GPU: 1 or depthwise)"
        )
    if op == "dense":
        return {"template": "gemm", "knobs": _dense_knobs(in_shapes[0][0])}
    if op in TEMPLATES:
        return {"template": op, "knobs": {}}
    raise GraphError(
        f"op {op!r} (node {node.name!r}) has no GPU template (the gpu target runs:"
        f" {', '.join(sorted(TEMPLATES))})"
    )


# -- node -> (schedule, args) ----------------------------------------------------------------
def _epilogue(node: Node, n_inputs: int):
    from pyvta.compiler.ops.cuda import Epilogue

    clip = node.attrs.get("clip")
    return Epilogue(bias=n_inputs >= 3, residual=n_inputs == 4, clip=tuple(clip) if clip else None)


def _conv(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import GpuConv2dKnobs, conv2d_gpu, depthwise_conv2d_gpu

    (_, c, h, w), (o, _, k, _) = shapes[0], shapes[1]
    stride, pad = _square(node, "strides"), _square(node, "pads")
    sched, ep = node.attrs["gpu_schedule"], _epilogue(node, len(shapes))
    if sched["template"] == "depthwise":
        threads = sched["knobs"]["threads"]
        return depthwise_conv2d_gpu(c, h, w, k, stride, pad, threads, epilogue=ep)
    knobs = GpuConv2dKnobs(**sched["knobs"])
    return conv2d_gpu(c, h, w, o, k, stride, pad, knobs, epilogue=ep)


def _dense(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import GpuGemmKnobs, dense_gpu

    (m, k), (n, _) = shapes[0], shapes[1]
    knobs = GpuGemmKnobs(**node.attrs["gpu_schedule"]["knobs"])
    return dense_gpu(m, n, k, knobs, epilogue=_epilogue(node, len(shapes)))


def _elementwise(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import elementwise_gpu

    if node.op == "add" and shapes[0] != shapes[1]:
        raise GraphError(f"add {node.name!r}: shapes {shapes} (GPU: equal shapes, no broadcast)")
    clip = (node.attrs["min"], node.attrs["max"]) if node.op == "clip" else None
    return elementwise_gpu(node.op, int(np.prod(out_shape)), clip)


def _max_pool(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import max_pool2d_gpu

    k, s, p = (_square(node, a) for a in ("kernel", "strides", "pads"))
    return max_pool2d_gpu(shapes[0], k, s, p)


def _avg_pool(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import avg_pool2d_gpu

    k, s, p = (_square(node, a) for a in ("kernel", "strides", "pads"))
    if p and not node.attrs["count_include_pad"]:
        raise GraphError(
            f"avg_pool {node.name!r}: padding without count_include_pad (GPU: the padding is"
            " counted, or no padding)"
        )
    return avg_pool2d_gpu(shapes[0], k, s, p)


def _global_avg_pool(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import global_avg_pool_gpu

    return global_avg_pool_gpu(shapes[0])


def _softmax(node, shapes, out_shape):
    from pyvta.compiler.ops.cuda import softmax_gpu

    if len(shapes[0]) != 2 or node.attrs["axis"] not in (1, -1):
        raise GraphError(
            f"softmax {node.name!r}: {shapes[0]} axis {node.attrs['axis']} (GPU: 2-D, last axis)"
        )
    return softmax_gpu(*shapes[0])


TEMPLATES = {
    "conv2d": _conv,
    "dense": _dense,
    "add": _elementwise,
    "relu": _elementwise,
    "clip": _elementwise,
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "global_avg_pool": _global_avg_pool,
    "softmax": _softmax,
}


def node_schedule(node: Node, in_shapes, out_shape):
    """``(sch, args)`` of a ``"gpu"`` node: args are its inputs in node order, then its output
    (flat for the elementwise ops)."""
    return TEMPLATES[node.op](node, [tuple(s) for s in in_shapes], tuple(out_shape))


def _shapes(graph: Graph, node: Node):
    return [graph.values[i].shape for i in node.inputs], graph.values[node.outputs[0]].shape


def _kernel_nodes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.target == GPU and n.op not in VIEW_OPS]


_MODULES: dict[str, object] = {}  # (op, attrs, shapes, target, options) -> built, per process


def build_node(graph: Graph, node: Node, target: str, **options):
    """``node`` built by ``compiler.build`` for ``target`` (``cuda`` / ``cuda-emulated``), once
    per process for equal ops, attributes and shapes (ResNet repeats its layers)."""
    from pyvta import compiler

    shapes = _shapes(graph, node)
    key = json.dumps([node.op, node.attrs, shapes, target, options], sort_keys=True, default=str)
    mod = _MODULES.get(key)
    if mod is None:
        sch, args = node_schedule(node, *shapes)
        mod = _MODULES[key] = compiler.build(sch, args, target=target, **options)
    return mod


def compile_gpu_kernels(graph: Graph, arch: str = "sm_90") -> dict[str, GpuKernel]:
    """PTX and launch plan of every kernel node (node name -> ``GpuKernel``)."""
    out = {}
    for n in _kernel_nodes(graph):
        mod = build_node(graph, n, "cuda", arch=arch)
        out[n.name] = GpuKernel(mod.ptx, mod.plan, arch)
    return out


def _node_arrays(node: Node, args, params, out: np.ndarray) -> list[np.ndarray]:
    """The node's inputs then output, reshaped to the kernel's parameters (flat for the
    elementwise kernels; a ``[O]`` bias for a ``[O, 1, 1]`` one)."""
    arrays = [np.ascontiguousarray(a, np.float32) for a in args] + [out]
    return [a.reshape(p.shape) for a, p in zip(arrays, params, strict=True)]


class EmulatedGpu:
    """``"gpu"`` nodes through ``cuda-emulated``: every kernel built (as CPU code) when this is
    constructed; ``race_check`` also runs each in reverse thread order and compares."""

    def __init__(self, graph: Graph, race_check: bool = False) -> None:
        from pyvta.compiler.api import default_cache_dir

        self.graph = graph
        opts = {"race_check": race_check, "cache_dir": default_cache_dir()}  # CPU code on disk
        self.modules = {
            n.name: build_node(graph, n, "cuda-emulated", **opts) for n in _kernel_nodes(graph)
        }

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        v = self.graph.values[node.outputs[0]]
        if node.op in VIEW_OPS:
            return args[0].reshape(v.shape)
        mod = self.modules[node.name]
        out = np.zeros(v.shape, np.float32)
        mod(*_node_arrays(node, args, mod.func.params, out))
        return out


def network_plan(graph: Graph, kernels: dict[str, GpuKernel]) -> dict:
    """The JSON-able network plan of ``launch.LoadedNetwork`` for ``graph`` and its kernels."""
    gpu_nodes = [n for n in graph.nodes if n.target == GPU]
    if len(gpu_nodes) != len(graph.nodes):
        other = next(n for n in graph.nodes if n.target != GPU)
        raise GraphError(f"node {other.name!r} runs on {other.target!r}, not on the GPU")
    missing = [n.name for n in _kernel_nodes(graph) if n.name not in kernels]
    if missing:
        raise GraphError(f"no GPU kernel for nodes {missing} (compile the model for gpu)")
    return {
        "values": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype}
                   for v in graph.values.values()],
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "constants": sorted(graph.constants),
        "aliases": {n.outputs[0]: n.inputs[0] for n in gpu_nodes if n.op in VIEW_OPS},
        "nodes": [{"name": n.name, "plan": kernels[n.name].plan, "values": [*n.inputs, n.outputs[0]]}
                  for n in _kernel_nodes(graph)],
    }  # fmt: skip


def open_gpu(launch=None):
    """``launch.Gpu()``; ``GpuUnavailableError`` (a pyvta error) naming why when there is none."""
    if launch is None:
        from pyvta.compiler.backend.cuda import launch
    try:
        return launch.Gpu()
    except launch.GpuUnavailable as e:
        raise GpuUnavailableError(
            f"the gpu target needs an NVIDIA GPU: {e}; run the same kernels on the CPU with"
            " --device cuda-emulated"
        ) from None


class DeviceGpu:
    """``"gpu"`` nodes on an NVIDIA GPU: the network plan loaded once (a device buffer per
    value, constants uploaded once, every node's PTX module); a node's run uploads the graph
    inputs it reads, launches its kernels and downloads its output for the executor (a view
    node launches nothing: its output shares its input's device buffer)."""

    def __init__(self, graph: Graph, kernels: dict[str, GpuKernel], gpu=None) -> None:
        self.graph = graph
        self.gpu = gpu or open_gpu()
        from pyvta.compiler.backend.cuda.launch import LoadedNetwork

        ptx = {name: k.ptx for name, k in kernels.items()}
        self.net = LoadedNetwork(self.gpu, network_plan(graph, kernels), ptx, graph.constants)

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        if node.op in VIEW_OPS:
            return args[0].reshape(self.graph.values[node.outputs[0]].shape)
        for name, a in zip(node.inputs, args, strict=True):
            if name in self.graph.inputs:
                self.net.upload(name, a)
        self.net.nodes[self.net.index[node.name]].launch()
        self.gpu.call("cuCtxSynchronize")
        return self.net.download(node.outputs[0])


def gpu_backend(
    graph: Graph, device: str | None = None, kernels: dict | None = None, race_check=False
):
    """The node backend running ``graph``'s ``"gpu"`` nodes on ``device`` (``devices.DEVICES``;
    None: the default): on the GPU from ``kernels`` (default: compiled now), or emulated on the
    CPU (the same lowered kernels)."""
    if not gpu_device(device).on_gpu:
        return EmulatedGpu(graph, race_check)
    gpu = open_gpu()  # before compiling: no GPU, no work
    return DeviceGpu(graph, kernels if kernels is not None else compile_gpu_kernels(graph), gpu)
