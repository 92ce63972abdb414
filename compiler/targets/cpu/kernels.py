"""Compiled kernels for the graph's ``cpu_*`` ops (``compiler.ops.cpu`` templates, llvmlite);
the backend that runs them is the runtime's (``runtime.cpu_kernels``).

``alter_cpu_layout`` writes each conv's schedule choice into its node (``attrs["schedule"]``:
``{"template": "direct" | "winograd" | "pointwise" | "depthwise", "knobs": {...}}``), so an
artifact says which schedule every layer runs. :class:`CpuKernels` builds one kernel per node
before the first inference; ``compiler.build`` caches kernels on disk by their loop IR, so compiling a
model (``compile_model``) leaves every kernel a later ``pyvta run`` needs in the cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.ops.cpu import nchwc, nchwc_direct
from pyvta.compiler.ops.cpu.depthwise import (
    DepthwiseKnobs,
    depthwise_nchwc,
    group_tile_fits,
    group_weights,
    pack_depthwise_weights,
)
from pyvta.compiler.ops.cpu.groups import GroupSpan
from pyvta.compiler.ops.cpu.nchwc import pack_dense_weights
from pyvta.compiler.ops.cpu.pointwise import PointwiseKnobs, pointwise_nchwc
from pyvta.compiler.ops.cpu.winograd import transform_weights
from pyvta.compiler.passes.batch_images import batch_images
from pyvta.runtime import cpu_kernels, cpu_llvm
from pyvta.runtime.cpu_kernels import COMPILED_OPS, VIEW_OPS
from pyvta.runtime.ir import HOST, Graph, Node

__all__ = ["CpuKernels", "ConvWorkload", "pack_dense_weights"]

DENSE_PANEL_VECTORS = 5  # at most this many SIMD vectors of outputs per dense weight panel
DENSE_SMALL_BLOCKS = (4, 2)  # panels of outputs that no whole vector divides


@dataclass(frozen=True)
class ConvWorkload:
    """A float conv layer as the CPU templates see it (one image): ``ib``/``ob`` are the
    channel blocks of the tensors it reads and writes (the layout plan's, not its own choice),
    ``c``/``o`` the channels rounded up to them (padded channels carry zero weights);
    ``nchw_input``: it reads the NCHW image (the direct template pads it as NCHW)
    (not part of ``key``: the knobs tuned on the blocked input serve it the same);
    ``dilations``: (rows, columns) between kernel taps (in ``key`` when not 1); ``groups``: a
    grouped conv (not depthwise; in ``key`` when set): the direct template's, or where its
    groups are narrower than the block (``group_width``) also the depthwise template's."""

    c: int
    h: int
    w: int
    o: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    ib: int
    ob: int
    depthwise: bool = False
    nchw_input: bool = False
    dilations: tuple[int, int] = (1, 1)
    groups: GroupSpan | None = None

    @property
    def key(self) -> str:
        """The tuning log's name for this workload."""
        k, s, p = self.kernel, self.strides, self.pads
        dw = " depthwise" if self.depthwise else ""
        dil = f" d{self.dilations[0]}x{self.dilations[1]}" if self.dilations != (1, 1) else ""
        if self.groups is not None:
            g = self.groups
            dil += f" g{g.group}x{g.group_in}x{g.group_out}"
        return (
            f"conv2d_nchwc c{self.c} h{self.h} w{self.w} o{self.o} k{k[0]}x{k[1]} "
            f"s{s[0]}x{s[1]} p{','.join(map(str, p))} ib{self.ib} ob{self.ob}{dw}{dil}"
        )

    @property
    def out_hw(self) -> tuple[int, int]:
        (kh, kw), (sh, sw), (t, lft, b, r) = self.kernel, self.strides, self.pads
        dh, dw = self.dilations
        return (
            (self.h + t + b - (kh - 1) * dh - 1) // sh + 1,
            (self.w + lft + r - (kw - 1) * dw - 1) // sw + 1,
        )

    @property
    def winograd_ok(self) -> bool:
        """F(2x2, 3x3) applies: 3x3, stride 1, pad 1, no dilation, not depthwise."""
        return (
            not self.depthwise
            and self.kernel == (3, 3)
            and self.strides == (1, 1)
            and self.pads == (1, 1, 1, 1)
            and self.dilations == (1, 1)
            and self.groups is None
        )

    @property
    def pointwise_ok(self) -> bool:
        """The pointwise (pixel-GEMM) template applies: 1x1, stride 1, no padding."""
        return (
            not self.depthwise
            and self.groups is None
            and self.kernel == (1, 1)
            and self.strides == (1, 1)
            and not any(self.pads)
        )

    @property
    def channels_read(self) -> int:
        """Input channels one output channel reads: 1 (depthwise), its group's (grouped), or
        all of them (padded channels included)."""
        return 1 if self.depthwise else self.groups.group_in if self.groups else self.c

    @property
    def flops(self) -> int:
        oh, ow = self.out_hw
        return 2 * self.o * oh * ow * self.kernel[0] * self.kernel[1] * self.channels_read

    @property
    def group_width(self) -> int | None:
        """The channels each output channel reads where they are all in its own channel block,
        so the depthwise template runs it: 1 for a depthwise conv; ``g`` for a grouped conv of
        groups of ``g`` input and ``g`` output channels, ``g`` dividing the (same) channel
        block and narrower than it (a group as wide as the block is a dense block: direct);
        else None."""
        if self.depthwise:
            return 1
        g = self.groups
        if g is None or g.group_in != g.group_out or self.ib != self.ob or self.c != self.o:
            return None
        return g.group_in if g.group_in < self.ob and self.ob % g.group_in == 0 else None

    @property
    def in_blocks_read(self) -> int:
        """Input channel blocks one output block's reduction runs over: all of them, or for a
        grouped conv the span its groups' channels fall in (``GroupSpan.count``)."""
        c_blocks = self.c // self.ib
        if self.groups is None:
            return c_blocks
        return self.groups.count(self.ib, self.ob, c_blocks, self.o // self.ob)

    @property
    def weight_bytes(self) -> int:
        """Its float32 weights (padded channels included): what it reads from memory when
        nothing of it is left in the caches."""
        return 4 * self.o * self.channels_read * self.kernel[0] * self.kernel[1]


def dense_block(out_features: int, features: str | None = None) -> int:
    """Columns per weight panel of a dense layer on the host (limited to the feature level
    ``features``): the most whole vectors, up to ``DENSE_PANEL_VECTORS``, dividing
    ``out_features`` (a batch-1 dense is a chain of FMAs per vector: more vectors per panel,
    more chains in flight; 1000 -> 40 on AVX2), else the widest of ``DENSE_SMALL_BLOCKS``
    dividing it, else (an odd count) one vector, the last panel padded with zero weights."""
    lanes = host_target(features).vector_lanes("float32")
    for vecs in range(DENSE_PANEL_VECTORS, 0, -1):
        if out_features % (vecs * lanes) == 0:
            return vecs * lanes
    return next((b for b in DENSE_SMALL_BLOCKS if out_features % b == 0), lanes)


def host_target(features: str | None = None):
    """The host CPU limited to the feature level ``features`` (a compile target's,
    ``compiler.targets.cpu.CpuTarget.features``; None: ``$PYVTA_CPU_FEATURES``, else the
    host's own)."""
    from pyvta.compiler.backend.llvm import CpuTarget

    return CpuTarget.host(None, features)


def host_lanes(features: str | None = None) -> int:
    """float32 lanes of the host's vectors at the feature level ``features`` (see ``host_target``;
    the layout plan's channel blocks follow them)."""
    return host_target(features).vector_lanes("float32")


# Winograd F(2x2, 3x3) is the untuned choice for 3x3 stride-1 layers at least this wide and
# with at least this many input channels (the transforms cost per tile, the saved
# multiplications grow with C x K). In ResNet-18 on AVX2 (one thread, the layer alone, input
# transform on channel vectors, U blocked by k_block, 6 x 16 register tiles) the 56-, 28-,
# 14- and 7-wide layers ran 0.66, 0.62, 0.56 and 0.78x the time of direct. Below 64 channels
# (Zen 4, one thread, C -> C at W x W, minimum of 25 interleaved runs; AVX-512 / AVX2 time of
# Winograd over direct): 32 at 32 (blocks of 16) 0.73 / 0.75, 32 at 16 0.78 / 0.98, 40 at 34
# (blocks of 8) 0.80 / 0.62, 40 at 17 0.86 / 0.88, 48 at 24 0.67 / 0.80, 48 at 12 0.72 / 0.82,
# 56 at 28 0.73 / 0.66, 56 at 14 0.83 / 0.77; 24 channels at 28 1.00 / 1.03, at 56 0.98 / 0.60.
WINOGRAD_MIN_WIDTH = 7
# With ``nchwc.WIDE_REGISTER_FILE`` vector registers (AVX-512's 32) the direct template's
# untuned tile spans two output blocks (``nchwc.VECTOR_BLOCK_TILE_BLOCKS``) and 7-wide layers
# run direct: ResNet-18's layer 4
# (512 -> 512 at 7 x 7) 2.5-2.8 -> 2.3 ms a conv (Intel AVX-512 host, one thread, in the
# network, CPU time, 20 interleaved runs).
WINOGRAD_MIN_WIDTH_32_REGISTERS = 8
# Layers at least this wide take F(4x4, 3x3) (``WinogradKnobs.out_tile`` 4): ResNet-18's 56-
# and 28-wide 3x3 convs ran 1.26-1.72x faster than with F(2x2, 3x3) on an Intel AVX-512 host
# and 1.43-1.70x limited to AVX2 (one thread, in the network, CPU time, 16-20 interleaved
# runs; the network 1.13x on AVX2); in-network re-ranking chose it for those layers on that
# host and on a Zen 5, and F(2x2) for the 14-wide ones on both.
WINOGRAD_OUT_TILE_4_MIN_WIDTH = 28
WINOGRAD_MIN_CHANNELS = 32
# tiles per register tile (x two vectors of channels: 12 accumulators on AVX2), the first
# whose rounding up of the layer's tiles wastes at most WINOGRAD_MAX_WASTE of them
WINOGRAD_P_BLOCKS = (6, 5, 4)
WINOGRAD_MAX_WASTE = 0.05
# A conv of fewer float operations (one image) runs on one thread: about 10-20 us of one core,
# less than a parallel launch gains (waking a sleeping pool thread, and waiting for one the OS
# has preempted mid-chunk on a shared machine). Generated nets of 0.3-0.4 ms (seeds 3, 6, 10,
# 21; Zen 4, load average 11-13 on 2 cores, 40 interleaved runs) ran as fast at their minimum
# on one thread as on two, with medians 0.37-0.65 ms against 0.61-0.82 ms and 80th
# percentiles 0.5-0.7 ms against 0.8-40 ms.
PARALLEL_MIN_FLOPS = 2_000_000
WINOGRAD_MIN_K_BLOCK = 8  # output channels per register tile, at least (the smallest block)


def default_direct_knobs(
    wl: ConvWorkload, features: str | None = None, exact_groups: bool = True
) -> dict:
    """Direct NCHWc with register tiles sized to the host's vector registers; a grouped conv
    whose groups straddle the blocks in a tile of their repeat (``GroupSpan.exact_tile``; not
    with ``exact_groups`` False: the tile it had before, over its groups' span of blocks)."""
    oh, ow = wl.out_hw
    target = host_target(features)
    block_bytes = wl.c * wl.kernel[0] * wl.kernel[1] * wl.ob * 4  # one output block's weights
    exact = None
    if wl.groups is not None and exact_groups:
        exact = wl.groups.exact_tile(wl.ib, wl.ob, wl.o // wl.ob)
    k = nchwc_direct.NchwcConvKnobs.for_target(
        target, ow, wl.ob, oh, wl.o // wl.ob, block_bytes, shared_input=wl.groups is None,
        exact_tile=exact,
    )  # fmt: skip
    return k.to_dict()


def default_depthwise_knobs(wl: ConvWorkload, features: str | None = None) -> dict:
    """The depthwise template's untuned knobs for ``wl`` (a depthwise conv, or groups narrower
    than the block: ``DepthwiseKnobs.for_target`` with its ``group_width``)."""
    return DepthwiseKnobs.for_target(
        host_target(features), wl.out_hw, wl.ob, wl.group_width
    ).to_dict()


def default_pointwise_knobs(wl: ConvWorkload, features: str | None = None) -> PointwiseKnobs:
    """The pointwise template's untuned knobs for 1x1 layer ``wl``
    (``PointwiseKnobs.for_target`` with its pixels and channel blocks)."""
    blocks = (wl.o // wl.ob, wl.c // wl.ib)
    return PointwiseKnobs.for_target(host_target(features), wl.h * wl.w, wl.ob, *blocks)


def default_winograd_knobs(wl: ConvWorkload, features: str | None = None) -> dict | None:
    """Winograd's untuned tile (``WINOGRAD_P_BLOCKS`` tiles x ``winograd_k_block`` channels;
    F(4x4, 3x3) from ``WINOGRAD_OUT_TILE_4_MIN_WIDTH`` on), or None where the untuned choice
    is direct (``WINOGRAD_MIN_WIDTH``, or ``WINOGRAD_MIN_WIDTH_32_REGISTERS`` with 32 vector
    registers; ``WINOGRAD_MIN_CHANNELS``) or no channel tile divides the layer's output
    channels."""
    from pyvta.compiler.ops.cpu.nchwc import WIDE_REGISTER_FILE

    target = host_target(features)
    wide = target.vector_registers >= WIDE_REGISTER_FILE
    min_width = WINOGRAD_MIN_WIDTH_32_REGISTERS if wide else WINOGRAD_MIN_WIDTH
    if not wl.winograd_ok or wl.w < min_width or wl.c < WINOGRAD_MIN_CHANNELS:
        return None
    k_block = winograd_k_block(wl.o, target.vector_lanes("float32"))
    if k_block is None:
        return None
    out_tile = 4 if wl.w >= WINOGRAD_OUT_TILE_4_MIN_WIDTH else 2
    tiles = -(-wl.h // out_tile) * -(-wl.w // out_tile)
    p_block = next(
        (p for p in WINOGRAD_P_BLOCKS if -tiles % p <= WINOGRAD_MAX_WASTE * tiles),
        WINOGRAD_P_BLOCKS[-1],
    )
    return {"p_block": p_block, "k_block": k_block, "parallel": True, "out_tile": out_tile}


def winograd_k_block(channels: int, lanes: int) -> int | None:
    """Output channels per Winograd register tile: the first of two vectors, one vector, half a
    vector (at least ``WINOGRAD_MIN_K_BLOCK``) that divides ``channels``, else None. Tiles of
    other widths (24, 72 channels) are no vector type: they ran 10-30x slower. On a Zen 4 (2
    threads) a 3x3 conv of 64 -> 72 channels at 32 x 32 ran 0.45 ms as Winograd with 8-channel
    tiles, 0.83 ms direct (AVX-512); on AVX2 direct in blocks of 8 1.9 ms, Winograd of the 80
    channels in blocks of 16 (16-channel tiles) 0.44 ms."""
    widths = (2 * lanes, lanes, lanes // 2)
    return next((k for k in widths if k >= WINOGRAD_MIN_K_BLOCK and channels % k == 0), None)


def default_conv_schedule(wl: ConvWorkload, features: str | None = None) -> dict:
    """The untuned choice: depthwise for group = C and for groups narrower than the channel
    block (``ConvWorkload.group_width``) whose tile fits the registers (``group_tile_fits``);
    pointwise (a GEMM over the pixels) for 1x1 stride-1 layers; Winograd for 3x3 stride-1
    layers at least ``WINOGRAD_MIN_WIDTH`` wide with ``WINOGRAD_MIN_CHANNELS`` inputs; direct
    NCHWc otherwise. Layers of fewer than
    ``PARALLEL_MIN_FLOPS`` run on the calling thread alone (``parallel`` False)."""
    schedule = _default_template(wl, features)
    if wl.flops < PARALLEL_MIN_FLOPS:
        schedule["knobs"]["parallel"] = False
    return schedule


def _default_template(wl: ConvWorkload, features: str | None = None) -> dict:
    g = wl.group_width
    if g is not None and (wl.depthwise or group_tile_fits(host_target(features), wl.ob, g)):
        return {"template": "depthwise", "knobs": default_depthwise_knobs(wl, features)}
    if wl.pointwise_ok:
        return {"template": "pointwise", "knobs": default_pointwise_knobs(wl, features).to_dict()}
    wino = default_winograd_knobs(wl, features)
    if wino is not None:
        return {"template": "winograd", "knobs": wino}
    return {"template": "direct", "knobs": default_direct_knobs(wl, features)}


def conv_weights(
    schedule: dict, w: np.ndarray, ib: int, ob: int, groups: GroupSpan | None = None
) -> np.ndarray:
    """OIHW weights in the form ``schedule``'s template reads (a grouped conv's: the
    block-diagonal ``[O, C, KH, KW]``, packed to the input blocks each output block reads)."""
    t = schedule["template"]
    if t == "direct" and groups is not None:
        if groups.reads_exactly(schedule["knobs"].get("oc_blocks", 1), ib, ob, w.shape[0] // ob):
            return groups.pack_exact(w, ob)
        return groups.pack(nchwc.pack_conv_weights(w, ib, ob))
    if t in ("direct", "pointwise"):
        return nchwc.pack_conv_weights(w, ib, ob)
    if t == "winograd":
        return transform_weights(
            w, schedule["knobs"]["k_block"], schedule["knobs"].get("out_tile", 2)
        )
    if t == "depthwise":
        return pack_depthwise_weights(
            w if groups is None else group_weights(w, groups.group_in), ob
        )
    raise ValueError(
        f"conv schedule template {t!r} (allowed: direct, winograd, pointwise, depthwise)"
    )


def conv_schedule(wl: ConvWorkload, schedule: dict, clip=None, residual: bool = False):
    """``(sch, args)`` of ``wl`` with ``schedule`` and the fused epilogue."""
    from pyvta.compiler.ops.cpu.winograd import WinogradKnobs, conv2d_winograd

    ep = nchwc.Epilogue(residual, tuple(clip) if clip is not None else None)
    t, knobs = schedule["template"], schedule.get("knobs", {})
    if wl.nchw_input and t != "direct":
        raise ValueError(f"only the direct template reads an NCHW input, not {t!r} ({wl.key})")
    if t == "direct":
        k = nchwc_direct.NchwcConvKnobs(**knobs)
        return nchwc_direct.conv2d_nchwc(
            wl.c, wl.h, wl.w, wl.o, wl.kernel, wl.strides, wl.pads, wl.ib, wl.ob, k, ep,
            nchw_input=wl.nchw_input, dilations=wl.dilations, groups=wl.groups,
        )  # fmt: skip
    if t == "winograd":
        if not wl.winograd_ok:
            raise ValueError(f"winograd does not apply to {wl.key}")
        return conv2d_winograd(wl.c, wl.h, wl.w, wl.o, WinogradKnobs(**knobs), (wl.ib, wl.ob), ep)
    if t == "pointwise":
        if not wl.pointwise_ok:
            raise ValueError(f"pointwise does not apply to {wl.key}")
        k = PointwiseKnobs(**knobs)
        return pointwise_nchwc(wl.c, wl.h, wl.w, wl.o, wl.ib, wl.ob, k, ep)
    if t == "depthwise":
        k = DepthwiseKnobs(**knobs)
        if wl.group_width is None:
            raise ValueError(f"depthwise does not apply to {wl.key}")
        return depthwise_nchwc(
            wl.c, wl.h, wl.w, wl.kernel, wl.strides, wl.pads, wl.ob, k, ep, wl.dilations,
            wl.group_width,
        )  # fmt: skip
    raise ValueError(
        f"conv schedule template {t!r} (allowed: direct, winograd, pointwise, depthwise)"
    )


def node_workload(node: Node, x_shape) -> ConvWorkload:
    """The workload of a ``cpu_conv2d`` node reading ``x_shape``: ``[N, C/c, H, W, c]``, or the
    NCHW ``[N, C, H, W]`` it blocks itself (``attrs["in_block"]``)."""
    a = node.attrs
    nchw = len(x_shape) == 4
    if nchw:
        _, c, h, w = x_shape
        ib = a["in_block"]
    else:
        _, cb, h, w, ib = x_shape
        c = cb * ib
    ob = a["out_block"]
    groups = GroupSpan(*a["groups"]) if a.get("groups") else None
    depthwise = a["schedule"]["template"] == "depthwise" and groups is None
    return ConvWorkload(
        c, h, w, -(-a["channels"] // ob) * ob, tuple(a["kernel"]), tuple(a["strides"]),
        tuple(a["pads"]), ib, ob, depthwise, nchw, tuple(a.get("dilations", (1, 1))), groups,
    )  # fmt: skip


def node_schedule(node: Node, in_shapes: list[tuple[int, ...]], features: str | None = None):
    """``(sch, args)`` of a compiled op's node given its input shapes (``features``: the
    host's feature level it is for, ``host_target``)."""
    a, op = node.attrs, node.op
    if op == "cpu_conv2d":
        wl = node_workload(node, in_shapes[0])
        return conv_schedule(wl, a["schedule"], a.get("clip"), len(in_shapes) == 4)
    if op == "cpu_max_pool":
        _, cb, h, w, blk = in_shapes[0]
        return nchwc.max_pool_nchwc(cb * blk, h, w, a["kernel"], a["strides"], a["pads"], blk)
    if op == "cpu_avg_pool":
        _, cb, h, w, blk = in_shapes[0]
        return nchwc.avg_pool_nchwc(
            cb * blk, h, w, a["kernel"], a["strides"], a["pads"], blk, a["count_include_pad"]
        )
    if op == "cpu_concat":
        _, _, h, w, _ = in_shapes[0]
        return nchwc.concat_nchwc(
            list(zip(a["parts"], (s[4] for s in in_shapes), strict=True)), h, w, a["block"]
        )
    if op == "cpu_global_avg_pool":
        _, cb, h, w, blk = in_shapes[0]
        return nchwc.global_avg_pool_nchwc(cb * blk, h, w, blk)
    if op == "cpu_dense":
        (m, k), (_, _, blk), (n,) = in_shapes[0], in_shapes[1], in_shapes[2]
        ep = nchwc.Epilogue(len(in_shapes) == 4, tuple(a["clip"]) if a.get("clip") else None)
        return nchwc.dense_nc(
            m, k, n, blk, ep, vector_lanes=host_target(features).vector_lanes("float32")
        )
    if op == "cpu_elementwise":
        return nchwc.elementwise(a["op"], int(np.prod(in_shapes[0])), a)
    if op == "cpu_softmax":
        return nchwc.softmax_nc(*in_shapes[0])
    if op == "layout_transform":
        s = in_shapes[0]
        shape = (1, a["channels"], s[2], s[3])
        return nchwc.layout_transform(shape, a["src_block"], a["dst_block"])
    raise ValueError(f"op {op!r} has no compiled CPU kernel (compiled: {', '.join(COMPILED_OPS)})")


def numpy_nodes(graph: Graph) -> list[tuple[str, str, str]]:
    """``(node, op, why)`` of each ``cpu`` node that runs numpy (``run_cpu_op``), not a compiled
    kernel: neither a compiled float op, a view (reshape, flatten), nor a compiled int8 node."""
    from pyvta.runtime.int8_kernels import INT8_OPS, compiled_int8, compiled_scale

    out = []
    for n in graph.nodes:
        if n.target != HOST or n.op in COMPILED_OPS or n.op in VIEW_OPS:
            continue
        if (n.op in INT8_OPS and compiled_int8(n, graph)) or compiled_scale(n, graph):
            continue
        if n.op in INT8_OPS:
            why = "int8 layer with weights that are not constants"
        elif n.op in ("quantize", "dequantize"):
            why = "int8 scaling of a flat (not NCHW) tensor"
        else:
            dtypes = {graph.values[i].dtype for i in n.inputs}
            why = f"no compiled kernel for {n.op} on {'/'.join(sorted(dtypes))}"
        out.append((n.name, n.op, why))
    return out


def node_module(
    node: Node,
    in_shapes,
    num_threads: int,
    features: str | None = None,
    images: tuple[int, list[bool]] | None = None,
):
    """The built kernel of a compiled node for the host limited to ``features`` (``_host``),
    once per process (``builds.built`` of its ``node_spec``): after ``compile_model`` a fresh
    process finds its lowered function and code on disk, and neither lowers nor generates
    code."""
    from pyvta.compiler.targets.cpu.builds import built

    return built(node_spec(node, in_shapes, num_threads, features, images))


def node_spec(
    node: Node,
    in_shapes,
    num_threads: int,
    features: str | None = None,
    images: tuple[int, list[bool]] | None = None,
):
    """The ``builds.KernelSpec`` of a compiled node's kernel: described by the node, its shapes,
    the threads and the CPU; lowered by :func:`lower_node`. ``images``: ``(N, which inputs are
    per image)`` of a node run on a batch (``cpu_kernels.kernel_shapes``; ``in_shapes`` are one
    image's): one kernel for the batch (``batch_images``)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.targets.cpu.builds import KernelSpec

    target = CpuTarget.host(num_threads, features)  # schedules and code follow its features
    what = json.dumps(
        [node.op, node.attrs, in_shapes, num_threads, target.key, images],
        sort_keys=True,
        default=str,
    )
    if node.op == "cpu_conv2d":  # Winograd's transforms unroll into the largest code
        winograd = node.attrs["schedule"]["template"] == "winograd"
        order = (int(winograd), node_workload(node, in_shapes[0]).flops)
    else:
        order = (0, 0)
    args = (node, in_shapes, features, images)
    return KernelSpec(what, lower_node, args, num_threads, features, order)


def graph_spec(graph: Graph, node: Node, num_threads: int, features: str | None = None):
    """:func:`node_spec` of a compiled node of ``graph`` (its shapes there)."""
    shapes, images = cpu_kernels.kernel_shapes(graph, node)
    return node_spec(node, shapes, num_threads, features, images)


def lower_node(node: Node, in_shapes, features: str | None, images):
    """A compiled node's lowered function (its schedule's, over a batch where ``images``)."""
    from pyvta import compiler

    func = compiler.lower(*node_schedule(node, in_shapes, features))
    if images is not None:
        batch, per_image = images
        parallel = _images_in_parallel(node, in_shapes, batch)
        func = batch_images(func, batch, [*per_image, True], parallel)
    return func


def _images_in_parallel(node: Node, in_shapes, batch: int) -> bool:
    """Whether a batch's images run across threads where the one-image kernel has no parallel
    loop: a conv the untuned choice keeps on one thread (``PARALLEL_MIN_FLOPS`` per image) whose
    batch is above that threshold."""
    if node.op != "cpu_conv2d" or node.attrs["schedule"]["knobs"].get("parallel", True):
        return False
    return node_workload(node, in_shapes[0]).flops * batch >= PARALLEL_MIN_FLOPS


class CpuKernels(cpu_kernels.CpuKernels):
    """The "cpu" backend of a graph (``runtime.cpu_kernels.CpuKernels``) with the kernels of
    its compiled nodes built here when constructed (the JIT, or the disk cache) for the host
    limited to ``features`` (a compile target's), but those given in ``modules``; without
    llvmlite none is built (the runtime refuses the graph)."""

    def __init__(
        self,
        graph: Graph,
        num_threads: int | None = None,
        modules: dict | None = None,
        features: str | None = None,
    ) -> None:
        threads = num_threads or os.cpu_count() or 1
        modules = dict(modules or {})
        if cpu_llvm.have_llvmlite():
            from pyvta.compiler.targets.cpu.builds import build_all

            specs = {
                n.name: graph_spec(graph, n, threads, features)
                for n in cpu_kernels.compiled_nodes(graph)
                if n.name not in modules
            }
            modules.update(zip(specs, build_all(list(specs.values())), strict=True))
        super().__init__(graph, modules)
        self.threads = threads
        if threads > 1 and cpu_llvm.have_llvmlite():  # loaded: the first inference finds it
            from pyvta.compiler.backend.llvm.runtime import start_pool

            start_pool(threads)

    def inference_scope(self):
        return pool_scope(self.threads)


def pool_scope(threads: int):
    """The ``inference_scope`` of a backend whose kernels run on ``threads`` threads: the
    calling thread bound to the CPU the pool leaves it (``runtime.caller_bound``) while an
    inference runs; nothing on one thread or without llvmlite."""
    if threads > 1 and cpu_llvm.have_llvmlite():
        from pyvta.compiler.backend.llvm.runtime import caller_bound

        return caller_bound(threads)
    return contextlib.nullcontext()


_BACKENDS: dict[int, tuple[weakref.ref, str | None, CpuKernels]] = {}


def cpu_backend_for(graph: Graph, features: str | None = None) -> CpuKernels:
    """The :class:`CpuKernels` of ``graph`` for the feature level ``features``, made once per
    graph object (so ``run_model`` called again reuses its kernels and arena)."""
    hit = _BACKENDS.get(id(graph))
    if hit is not None and hit[0]() is graph and hit[1] == features:
        return hit[2]
    backend = CpuKernels(graph, features=features)
    _BACKENDS[id(graph)] = (weakref.ref(graph), features, backend)
    weakref.finalize(graph, _BACKENDS.pop, id(graph), None)  # the arena dies with the graph
    return backend
