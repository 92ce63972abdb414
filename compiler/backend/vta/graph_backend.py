"""The graph's accelerator layers: found from the compiled graph and lowered into relocatable
kernels at compile time; the runtime runs them on any ``driver.Device``
(``runtime.accelerator.AcceleratorBackend``).

    layers = accelerator_layers(graph)                      # distinct (workload, epilogue), counts
    kernels = compile_kernels(graph, hw, configs)           # node name -> driver.Kernel
    vta = AcceleratorBackend(driver.open("sim"), kernels)   # runtime.accelerator: nothing is lowered
    Executor(graph, backends={"vta": vta}).run(...)

A ``vta_conv2d`` / ``vta_dense`` node is derived once (``node_layer``): its workload from the
packed input and weight shapes, its epilogue from its ``FusedParams``, its constants from the graph.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.backend.vta.config import ConvConfig
from pyvta.compiler.backend.vta.conv_pool import POOL_ATTRS, build_conv_pool_kernel, fusable
from pyvta.compiler.backend.vta.operator import build_kernel, lowering_epilogue
from pyvta.compiler.backend.vta.pool import PoolWorkload, build_pool_kernel
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue, WorkloadError
from pyvta.compiler.targets.vta import TARGET as VTA
from pyvta.driver.kernel import Kernel
from pyvta.isa import HwConfig
from pyvta.runtime.accelerator import POOL_OPS, AcceleratorBackend
from pyvta.runtime.ir import Graph, GraphError, Node
from pyvta.runtime.vta_ops import FusedParams


def conv_workload(x_shape, w_shape, p) -> ConvWorkload:
    """The VTA workload of a packed conv2d node (x (N, I/B, H, W, 1, B), w (O/B, I/B, KH, KW,
    B, B)) with fused parameters ``p``: the N images in one launch (``batch``)."""
    n, ib, h, wd, bn, b = x_shape
    ob, _, kh, kw, _, _ = w_shape
    sh, sw = p.strides
    pt, pl, pb, pr = p.pads
    if sh != sw or bn != 1 or p.dilations[0] != p.dilations[1]:
        raise WorkloadError(
            f"the VTA conv2d template needs equal strides, equal dilations and batch block 1;"
            f" got strides {p.strides}, dilations {p.dilations}, batch block {bn}"
        )
    return ConvWorkload(
        h,
        wd,
        ib * b,
        ob * b,
        kh,
        kw,
        sh,
        pt,
        b,
        pad_bottom=pb,
        pad_right=pr,
        pad_left=None if pl == pt else pl,  # (None: the key tuning logs know)
        batch=n,
        groups=p.block_groups,
        dilation=p.dilations[0] if kh * kw > 1 else 1,
    )


def dense_workload(x_shape, w_shape) -> ConvWorkload:
    """The VTA workload of a packed dense node (x (N, I/B, 1, B), w (O/B, I/B, B, B)): a 1x1
    conv over an image of 1 x N pixels (the batch), so a weight tile serves every image."""
    n, ib, _, b = x_shape
    return ConvWorkload(1, n, ib * b, w_shape[0] * b, 1, 1, 1, 0, b)


def fused_epilogue(p, residual: bool) -> Epilogue:
    """The epilogue of a node's ``FusedParams`` (before the lowering choices); per-channel
    shifts: ``channel_epilogue``."""
    return channel_epilogue(p, residual)[0]


def channel_epilogue(p, residual: bool, block: int = 16) -> tuple[Epilogue, np.ndarray | None]:
    """The epilogue and, for per-channel shifts, the channel shift rows (co_b, ``block``) int32.

    The contract's ``(acc + (res << res_shift[o])) >> shift[o]`` runs as ``acc >>= d[o]``, then
    ``+ (res << R)``, then ``>> S`` with ``d[o] = shift[o] - S`` and ``R = res_shift[o] - d[o]``
    (nested floor shifts; exact while the int32 sum cannot wrap, which ``lowering_epilogue``
    checks): ``S = 0`` without a residual, else ``S = max(shift[o] - res_shift[o], 0)``, which
    must be one value over the channels (so it is for the quantizer's ``fa[o] - fy`` and
    ``fa[o] - fr``). Channels with both shifts 0 (the packing's padded ones) take ``d = 0``."""
    if not p.per_channel:
        ep = Epilogue(True, p.shift, p.clip_lo, p.clip_hi, residual, p.res_shift)
        return ep, None
    channels = next(len(v) for v in (p.shift, p.res_shift) if isinstance(v, tuple))
    shift, res_shift = p.channel_shifts(channels)
    s_total = 0
    if residual:
        real = (shift != 0) | (res_shift != 0)
        gaps = np.unique((shift - res_shift)[real])
        if gaps.size > 1:
            raise GraphError(
                f"per-channel shifts on vta need shift - res_shift equal over the channels (the"
                f" residual joins after the channel shift); got {sorted(gaps.tolist())}"
            )
        s_total = max(int(gaps[0]) if gaps.size else 0, 0)
    d = np.maximum(shift - s_total, 0).astype(np.int32)
    r = int(np.max(res_shift - d, initial=0)) if residual else 0
    ep = Epilogue(True, s_total, p.clip_lo, p.clip_hi, residual, r, channel_shift=True)
    return ep, d.reshape(-1, block)


VTA_OPS = ("vta_conv2d", "vta_dense")
CONV_POOL = "vta_conv2d_max_pool"  # a conv and the 3x3/2 max pool after it (``conv_pool``)


@dataclass(frozen=True)
class NodeLayer:
    """One accelerator node as the accelerator runs it, per batch item.

    ``weights`` packed (co_b, ci_b, KH, KW, b, b) int8 (a dense node's with KH = KW = 1);
    ``bias`` packed (co_b, b) int32; ``batch`` launches per inference (1: the workload holds
    every image, ``ConvWorkload.batch``)."""

    workload: ConvWorkload
    epilogue: Epilogue  # the node's arithmetic (before the lowering choices)
    weights: np.ndarray
    bias: np.ndarray
    batch: int
    channel_shifts: np.ndarray | None = None  # (co_b, b) int32 with ``epilogue.channel_shift``


def node_layer(graph: Graph, node: Node) -> NodeLayer:
    """The workload, epilogue and packed constants of a ``vta_conv2d``/``vta_dense`` node."""
    if node.op not in (*VTA_OPS, CONV_POOL):
        raise GraphError(f"node {node.name!r}: op {node.op!r} is not an accelerator op {VTA_OPS}")
    x_shape = graph.values[node.inputs[0]].shape
    try:
        w, bias = graph.constants[node.inputs[1]], graph.constants[node.inputs[2]]
    except KeyError as e:
        raise GraphError(f"node {node.name!r}: weights and bias must be constants ({e})") from None
    p = FusedParams.from_attrs(node.attrs)
    if node.op in ("vta_conv2d", CONV_POOL):
        wl = conv_workload(x_shape, w.shape, p)
    else:
        wl, w = dense_workload(x_shape, w.shape), w[:, :, None, None, :, :]
    ep, shifts = channel_epilogue(p, len(node.inputs) > 3, wl.block)
    w = np.ascontiguousarray(w, np.int8)
    return NodeLayer(wl, ep, w, np.ascontiguousarray(bias, np.int32), 1, shifts)


def accelerator_nodes(graph: Graph) -> list[Node]:
    """The conv2d/dense accelerator nodes (the layers a tuner tunes; a conv + max pool node's
    conv too: its config applies where the fused schedule does not fit, ``conv_pool_kernels``)."""
    return [n for n in graph.nodes if n.target == VTA.placement and n.op in (*VTA_OPS, CONV_POOL)]


def pool_kernel(graph: Graph, node: Node, hw: HwConfig) -> Kernel:
    """The kernel of a ``vta_max_pool`` / ``vta_global_avg_pool`` node; a re-centred mean's
    channel offsets (its ``offset`` attr, packed, once per image of the batch) as a constant."""
    pw = pool_workload(graph, node, hw.block_in)
    if not pw.offset:
        return build_pool_kernel(pw, hw)
    n = graph.values[node.inputs[0]].shape[0]
    rows = np.asarray(node.attrs["offset"], np.int64).reshape(-1, pw.block)
    return build_pool_kernel(pw, hw, np.tile(rows, (n, 1)))


def pool_workload(graph: Graph, node: Node, block: int) -> PoolWorkload:
    """The ALU workload of a ``vta_max_pool`` / ``vta_global_avg_pool`` node (packed input)."""
    n, cb, h, w, _, b = graph.values[node.inputs[0]].shape
    cb *= n  # the images' channel planes one after another: a pool treats each alike
    a = node.attrs
    if node.op == "vta_global_avg_pool":
        return PoolWorkload("global_avg", cb * b, h, w, mult=a["mult"], shift=a["shift"], block=b,
                            offset="offset" in a)  # fmt: skip
    kh, kw = a["kernel"]
    return PoolWorkload("max", cb * b, h, w, kh, kw, a["strides"], a["pads"], block=b)


@dataclass(frozen=True)
class Layer:
    """One distinct accelerator layer of a network: what a tuner needs to measure it."""

    workload: ConvWorkload
    epilogue: Epilogue  # with the lowering choices its bias values allow
    count: int  # launches per inference


def accelerator_layers(graph: Graph) -> list[Layer]:
    """The distinct (workload, lowering epilogue) of a graph's accelerator nodes, with counts,
    read from the compiled graph (nothing runs)."""
    counts: dict[tuple[ConvWorkload, Epilogue], int] = {}
    for node in accelerator_nodes(graph):
        nl = node_layer(graph, node)
        ep = lowering_epilogue(nl.workload, nl.epilogue, nl.bias)[0]
        counts[(nl.workload, ep)] = counts.get((nl.workload, ep), 0) + nl.batch
    return [Layer(wl, ep, n) for (wl, ep), n in counts.items()]


def conv_pool_kernels(graph, node, hw, configs, measure, search) -> dict[str, Kernel]:
    """The kernels of a ``vta_conv2d_max_pool`` node: one fused kernel where the schedule fits
    ``hw`` (``conv_pool.fusable``), else a conv kernel and a max pool kernel (``<name>/pool``)."""
    nl = node_layer(graph, node)
    ep = dataclasses.replace(lowering_epilogue(nl.workload, nl.epilogue, nl.bias)[0],
                             bias_via_gemm=False)  # fmt: skip
    if fusable(nl.workload, ep, hw):
        return {node.name: build_conv_pool_kernel(nl.workload, ep, nl.weights, nl.bias, hw,
                                                  nl.channel_shifts)}  # fmt: skip
    conv = build_kernel(nl.workload, nl.epilogue, nl.weights, nl.bias, hw,
                        config_for(configs or {}, nl), measure=measure, search=search,
                        channel_shifts=nl.channel_shifts)  # fmt: skip
    wl = nl.workload
    pw = PoolWorkload("max", wl.batch * wl.co_blocks * wl.block, wl.out_h, wl.out_w, 3, 3,
                      POOL_ATTRS["strides"], POOL_ATTRS["pads"], block=wl.block)  # fmt: skip
    return {node.name: conv, f"{node.name}/pool": build_pool_kernel(pw, hw)}


def config_for(configs: dict, nl: NodeLayer) -> ConvConfig | None:
    """A layer's given config: keyed by ``(workload, lowering epilogue)`` (as a network tuning
    log gives them) or by the workload alone; None: derive a default."""
    if not configs:
        return None
    ep = lowering_epilogue(nl.workload, nl.epilogue, nl.bias)[0]
    for wl in (nl.workload, dataclasses.replace(nl.workload, batch=1)):  # (one image's tiles fit N)
        hit = configs.get((wl, ep)) or configs.get(wl)
        if hit is not None:
            return hit
    return None


def compile_kernels(
    graph: Graph,
    hw: HwConfig,
    configs: dict | None = None,
    measure: Callable | None = None,
    search: int = 0,
    progress: Callable[[str], None] | None = None,
    explore: int = 0,
) -> dict[str, Kernel]:
    """Lower every accelerator node of ``graph`` into a relocatable kernel (node name -> Kernel).

    ``configs``: per-layer schedule configs (e.g. from a tuning log); others get the analytic
    default, or with ``search`` > 0 the best of that many candidates on ``measure(insns)``."""
    kernels: dict[str, Kernel] = {}
    t0 = time.perf_counter()
    layers = {n.name: node_layer(graph, n) for n in accelerator_nodes(graph) if n.op != CONV_POOL}
    if not search:  # the analytic defaults the layers will ask for, ranked on every core
        from pyvta.compiler.backend.vta.default import rank_missing

        rank_missing(
            (nl.workload, lowering_epilogue(nl.workload, nl.epilogue, nl.bias)[0], hw)
            for nl in layers.values()
            if config_for(configs or {}, nl) is None
        )
    for node in graph.nodes:
        if node.target == VTA.placement and node.op in POOL_OPS:
            kernels[node.name] = pool_kernel(graph, node, hw)
        if node.target == VTA.placement and node.op == CONV_POOL:
            kernels.update(conv_pool_kernels(graph, node, hw, configs, measure, search))
    for name, nl in layers.items():  # (conv + pool nodes above)
        kernels[name] = build_kernel(
            nl.workload,
            nl.epilogue,
            nl.weights,
            nl.bias,
            hw,
            config_for(configs or {}, nl),
            measure=measure,
            search=search,
            explore=explore,
            channel_shifts=nl.channel_shifts,
        )
    if progress:
        progress(f"lowered {len(kernels)} accelerator kernels in {time.perf_counter() - t0:.1f} s")
    return kernels


def accelerator_for(graph: Graph, device, configs=None, search: int = 0, explore: int = 0):
    """Compile ``graph``'s kernels for ``device`` (its cycle estimate for ``search``) and load
    them: the runtime's ``AcceleratorBackend``."""
    measure = getattr(device, "estimate_cycles", None)
    kernels = compile_kernels(graph, device.config, configs, measure, search, explore=explore)
    return AcceleratorBackend(device, kernels)


def kernel_workload(kernel: Kernel) -> ConvWorkload | PoolWorkload:
    """The workload a kernel was lowered for (``info["workload"]``; a pool's for ``"pool"``):
    e.g. of an ``AcceleratorBackend`` launch, ``kernel_workload(run.kernel)``."""
    if kernel.info.get("kind") == "pool":
        return PoolWorkload(**kernel.info["workload"])
    return ConvWorkload(**kernel.info["workload"])
