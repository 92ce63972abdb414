"""Plan the blocked NCHW{c}c layout of a float CPU network and pick each layer's schedule
(TVM's AlterOpLayout): the compiled CPU ops read and write ``[N, ceil(C/c), H, W, c]`` from the
first conv to the global pool, and layouts change only at the network's borders.

Rewrites (float32, ``target == HOST``, any batch; anything else is left alone):

- ``conv2d`` -> ``cpu_conv2d`` with its weights transformed for the chosen template (direct
  NCHWc, Winograd, pointwise or depthwise) and the schedule choice in ``attrs["schedule"]``
  (``compiler.targets.cpu.kernels``): any kernel, stride, pads and dilation; a group of 1 or
  depthwise (group = C = O) runs as such, other groups on the direct template with
  block-diagonal weights, each output block reading only its groups' input blocks (or,
  where groups straddle the blocks, exactly their channels: ``GroupSpan.exact_tile``),
- ``max_pool`` / ``avg_pool`` -> ``cpu_max_pool`` / ``cpu_avg_pool``, ``global_avg_pool`` ->
  ``cpu_global_avg_pool`` (its output is NCHW ``[N, C, 1, 1]`` byte for byte when the block
  divides C: the border is then a ``reshape``), ``concat`` of channels -> ``cpu_concat``,
- ``dense`` -> ``cpu_dense`` (weights in column panels), ``add``/``relu``/``clip`` of equal
  shapes -> ``cpu_elementwise`` (on whatever layout their first input has), ``softmax`` over
  the last axis of ``[M, N]`` -> ``cpu_softmax``.

Each value's channel block is :func:`channel_block` of its channel count and the host's vector
width and CPU: 16 or 8, the one whose padded channels cost least when a block of fewer vectors
costs more per channel (44 channels: three blocks of 16, the last 4 padding; 40 channels on
AVX-512: five blocks of 8 on a Zen 4, three of 16 on a Zen 5, ``HALF_VECTOR_COST``). Padded channels hold zeros from a conv (zero weights and bias) and finite values from
any op; a conv reading them multiplies them by zero weights. A blocked value keeps its NCHW name
for readers that need NCHW: a ``layout_transform`` under that name follows every blocked
producer, and ``remove_dead_code`` drops those nobody reads. The image (fewer than 8 channels,
NCHW) is one block of all its channels; a direct conv reads it as NCHW (padded in its own
padding copy), so no transform runs before the first conv.
"""

from __future__ import annotations

import numpy as np

from pyvta.compiler.graph.passes.rewrite import NodeEmitter
from pyvta.compiler.ops.cpu.groups import GroupSpan
from pyvta.compiler.ops.cpu.nchwc import conv_output_hw
from pyvta.compiler.targets.cpu import kernels as cpu_kernels
from pyvta.runtime.ir import HOST, Graph, Node
from pyvta.runtime.layout import dense_group_oihw

CHANNEL_BLOCKS = (16, 8)  # the channel blocks a value may have, preferred first on a tie
MIN_CHANNEL_BLOCK = 8  # an input of fewer channels is always read as one block of them all
# Relative time per padded channel of a value whose block fills this many float32 vectors (two
# or more: 1). A block of one vector feeds one FMA per broadcast input value; on a Zen 4 (2
# threads, convs alone, AVX2) 56 -> 72 channels 5x5 at 24 x 24 ran 1.76 ms with output blocks
# of 8 and 1.48 ms with 16 (80 channels), 48 -> 40 3x3 at 32 x 32 0.65 and 0.50 ms (48), inputs
# in blocks of 8 cost about as much again: 4/3. Half a vector: ``HALF_VECTOR_COST``.
BLOCK_COST_BY_VECTORS = {2.0: 1.0, 1.0: 4 / 3}
# The cost per channel of a block of half a vector (8 of AVX-512's 16 lanes, run as 256-bit
# ops) over one vector's, by LLVM CPU name (else ``HALF_VECTOR_COST_DEFAULT``). A Zen 4 issues
# 256-bit ops at twice the rate of its double-pumped 512-bit ones: about 10% more per channel
# (22 channels 7x7 at 49 x 49 ran 1.33 ms as 24, blocks of 8, and 2.13 ms as 32, blocks of 16;
# 40 channels 3x3 at 25 x 25 0.19 and 0.25 ms). A Zen 5's 512-bit datapath runs a 256-bit op in
# the slot of a 512-bit one: two convs in a row, 2 threads, interleaved (docs/measurements.md),
# blocks of 16 ran 40 -> 40 3x3 at 25 x 25 1.25x faster than blocks of 8 (48 channels padded
# against 40), 24 -> 24 3x3 at 56 1.56x, 40 -> 40 5x5 at 28 1.28x, 72 -> 72 3x3 at 14 1.31x,
# 56 -> 72 5x5 at 24 1.44x: 1.46-2.07 per channel; 1.5.
HALF_VECTOR_COST = {"znver5": 1.5}
HALF_VECTOR_COST_DEFAULT = 1.1


def channel_block(channels: int, lanes: int | None = None, cpu: str | None = None) -> int:
    """The block of a value of ``channels`` channels: of ``CHANNEL_BLOCKS``, the one of least
    modelled cost on a host of ``lanes`` float32 vector lanes and LLVM CPU name ``cpu``
    (default: this host's): the padded channels times ``BLOCK_COST_BY_VECTORS`` of the vectors
    a block fills (half a vector: ``HALF_VECTOR_COST``). Ties go to the block that pads least,
    then the first. AVX2 (8 lanes): 40 -> 16 (48 x 1 < 40 x 4/3), 72 -> 16, 24 -> 8 (a tie);
    AVX-512 (16 lanes): 16 unless 8 pads at least 10% less (40 -> 8, 44 -> 16), on a Zen 5
    unless it pads a third less (40 -> 16, 24 -> 16, 8 -> 8)."""
    host = None if lanes and cpu else cpu_kernels.host_target()
    lanes = lanes or host.vector_lanes("float32")
    cpu = cpu or host.cpu
    half = HALF_VECTOR_COST.get(cpu, HALF_VECTOR_COST_DEFAULT)

    def cost(block: int) -> tuple[float, int]:
        padded = -(-channels // block) * block
        vectors = min(2.0, block / lanes)
        per = BLOCK_COST_BY_VECTORS[1.0] * half if vectors < 1 else BLOCK_COST_BY_VECTORS[vectors]
        return padded * per, padded

    return min(CHANNEL_BLOCKS, key=cost)


def reads_as_nchw(channels: int, block: int) -> bool:
    """Whether a conv (not depthwise, on the direct template) reads an input of ``channels``
    channels, whose layout block is ``block``, as NCHW with all its channels one block (padded
    as NCHW in its own copy: ``compiler.ops.cpu.nchwc_direct``): fewer channels than the widest
    block, and the block would pad them, so the reduction runs over the real channels only (the
    image; 10 -> 128 channels 3x3 at 21 x 21 one thread, Zen 4: 0.156 -> 0.102 ms AVX-512, 0.198
    -> 0.119 AVX2; 12 -> 32 at 40 x 40 0.144 -> 0.113, 0.165 -> 0.128). Fewer than
    ``MIN_CHANNEL_BLOCK`` always. A blocked value read so needs a transform to NCHW (a node):
    the conv takes it when it saves ``NCHW_READ_MIN_SAVED_FLOPS`` (``_conv``)."""
    return channels < max(CHANNEL_BLOCKS) and channels % block != 0


# A conv reads a blocked value as NCHW (reads_as_nchw) when the padded channels it skips are at
# least this many float operations an image (~10 us of a core): below, the transform node's
# few microseconds eat the gain (6 -> 8 channels 3x3 at 27 x 27: 0.041 -> 0.040 ms, 5 -> 8 at
# 7 x 7 2 us either way, one thread, Zen 4).
NCHW_READ_MIN_SAVED_FLOPS = 1_000_000


def _pad_to(a: np.ndarray, axis_sizes: dict[int, int]) -> np.ndarray:
    """``a`` with zeros appended along the given axes up to the given sizes."""
    widths = [(0, axis_sizes.get(i, d) - d) for i, d in enumerate(a.shape)]
    return np.pad(a, widths) if any(w for _, w in widths) else a


class _Layouts:
    """Which blocked form each NCHW value has, emitting transforms on demand; ``features``: the
    host feature level the untuned schedules are sized for (``options.cpu_features``)."""

    def __init__(self, g: Graph, em: NodeEmitter, features: str | None = None) -> None:
        self.g, self.em, self.features = g, em, features
        self.blocked: dict[str, tuple[str, int]] = {}  # NCHW name -> (blocked name, block)

    def block_of(self, name: str) -> int:
        """The block ``name`` has (or gets: :func:`channel_block` of its channels)."""
        have = self.blocked.get(name)
        return have[1] if have is not None else self.block_for(self.g.values[name].shape[1])

    def block_for(self, channels: int) -> int:
        """:func:`channel_block` of ``channels`` at this layout's feature level's vector width."""
        host = cpu_kernels.host_target(self.features)
        return channel_block(channels, host.vector_lanes("float32"), host.cpu)

    def get(self, name: str, block: int) -> str:
        """``name`` in NCHW{block}c, transformed from its NCHW or other blocked form."""
        have = self.blocked.get(name)
        if have is not None and have[1] == block:
            return have[0]
        src, src_block = have if have is not None else (name, None)
        c = self.g.values[name].shape[1]
        attrs = {"channels": c, "src_block": src_block, "dst_block": block}
        out = self.em.emit("layout_transform", [src], attrs, f"{name}_to{block}c")
        if have is None:
            self.blocked[name] = (out, block)
        return out

    def produced(self, name: str, blocked: str, block: int, nchw_op: str = "layout_transform"):
        """Record that ``blocked`` (NCHW{block}c) is ``name``; re-emit ``name`` in NCHW."""
        self.blocked[name] = (blocked, block)
        shape = self.g.values[name].shape
        if nchw_op == "reshape" and shape[1] % block == 0:  # the same bytes
            attrs = {"shape": list(shape)}
        else:  # padded channels to drop (or another layout)
            nchw_op = "layout_transform"
            attrs = {"channels": shape[1], "src_block": block, "dst_block": None}
        self.em.emit(nchw_op, [blocked], attrs, f"{name}_nchw", output=name)


def _is_4d_float(g: Graph, name: str) -> bool:
    v = g.values[name]
    return v.dtype == "float32" and len(v.shape) == 4


def _conv(g: Graph, n: Node, lay: _Layouts, tuned: dict) -> bool:
    a = n.attrs
    x = n.inputs[0]
    w = g.constants.get(n.inputs[1])
    if not _is_4d_float(g, x) or w is None or n.inputs[2] not in g.constants:
        return False
    o, cg, kh, kw = w.shape
    _, c, h, wd = g.values[x].shape
    depthwise = a["group"] == c == o and cg == 1
    groups = None
    if a["group"] != 1 and not depthwise:
        w = dense_group_oihw(w, a["group"])
        groups = GroupSpan(a["group"], c // a["group"], o // a["group"])
    ob = lay.block_for(o)
    nchw_read = not depthwise and reads_as_nchw(c, lay.block_of(x))
    if nchw_read and x in lay.blocked:  # worth its transform to NCHW?
        oh, ow = conv_output_hw(
            h, wd, (kh, kw), a["strides"], a["pads"], a.get("dilations", (1, 1))
        )
        skipped = -(-c // lay.block_of(x)) * lay.block_of(x) - c
        nchw_read = 2 * o * oh * ow * kh * kw * skipped >= NCHW_READ_MIN_SAVED_FLOPS
    ib = ob if depthwise else (c if nchw_read else lay.block_of(x))
    c_pad, o_pad = -(-c // ib) * ib, -(-o // ob) * ob
    dil = tuple(a.get("dilations", (1, 1)))
    if (
        groups is not None
        and groups.count(ib, ob, c_pad // ib, o_pad // ob) == c_pad // ib
        and groups.exact_tile(ib, ob, o_pad // ob) is None
    ):
        groups = None  # every output block reads every input block: a plain conv (any template)
    wl = cpu_kernels.ConvWorkload(c_pad, h, wd, o_pad, (kh, kw), tuple(a["strides"]),
                                  tuple(a["pads"]), ib, ob, depthwise, dilations=dil,
                                  groups=groups)  # fmt: skip
    schedule = tuned.get(wl.key) or cpu_kernels.default_conv_schedule(wl, lay.features)
    if nchw_read and schedule["template"] != "direct":
        nchw_read = False
        ib = lay.block_of(x)  # blocked (transformed first when it is not): the layout's block
        c_pad = -(-c // ib) * ib
    wp = _pad_to(w, {0: o_pad} if depthwise else {0: o_pad, 1: c_pad})
    wt = cpu_kernels.conv_weights(schedule, wp, ib, ob, groups)
    bias = _pad_to(g.constants[n.inputs[2]].astype(np.float32), {0: o_pad})
    ins = [
        x if nchw_read else lay.get(x, ib),
        g.add_constant(g.fresh_name(f"{n.inputs[1]}_{schedule['template']}"), wt),
        n.inputs[2] if o_pad == o else g.add_constant(g.fresh_name(f"{n.inputs[2]}_pad"), bias),
    ]
    if len(n.inputs) == 4:
        ins.append(lay.get(n.inputs[3], ob))
    attrs = {
        "channels": o,
        "kernel": [kh, kw],
        "strides": list(a["strides"]),
        "pads": list(a["pads"]),
        "in_block": ib,
        "out_block": ob,
        "clip": a.get("clip"),
        "schedule": schedule,
    }
    if dil != (1, 1):
        attrs["dilations"] = list(dil)
    if groups is not None:
        attrs["groups"] = [groups.group, groups.group_in, groups.group_out]
    y = n.outputs[0]
    yb = lay.em.emit("cpu_conv2d", ins, attrs, n.name, output=g.fresh_name(f"{y}_{ob}c"))
    lay.produced(y, yb, ob)
    return True


def _pool(g: Graph, n: Node, lay: _Layouts) -> bool:
    x = n.inputs[0]
    if not _is_4d_float(g, x):
        return False
    blk = lay.block_of(x)
    y = n.outputs[0]
    if n.op in ("max_pool", "avg_pool"):
        attrs = {k: list(n.attrs[k]) for k in ("kernel", "strides", "pads")}
        if n.op == "avg_pool":
            attrs["count_include_pad"] = bool(n.attrs["count_include_pad"])
        op = f"cpu_{n.op}"
        yb = lay.em.emit(op, [lay.get(x, blk)], attrs, n.name, g.fresh_name(f"{y}_c"))
        lay.produced(y, yb, blk)
    else:
        yb = lay.em.emit(
            "cpu_global_avg_pool", [lay.get(x, blk)], {}, n.name, g.fresh_name(f"{y}_c")
        )
        lay.produced(y, yb, blk, nchw_op="reshape")
    return True


def _concat(g: Graph, n: Node, lay: _Layouts) -> bool:
    if n.attrs["axis"] != 1 or not all(_is_4d_float(g, i) for i in n.inputs):
        return False
    parts = [g.values[i].shape[1] for i in n.inputs]
    ins = [lay.get(i, lay.block_of(i)) for i in n.inputs]
    blk = lay.block_for(sum(parts))
    y = n.outputs[0]
    attrs = {"parts": parts, "block": blk}
    yb = lay.em.emit("cpu_concat", ins, attrs, n.name, output=g.fresh_name(f"{y}_c"))
    lay.produced(y, yb, blk)
    return True


def _dense(g: Graph, n: Node, lay: _Layouts) -> bool:
    x, wname, bname = n.inputs[:3]
    w = g.constants.get(wname)
    if w is None or bname not in g.constants or g.values[x].dtype != "float32":
        return False
    block = cpu_kernels.dense_block(w.shape[0], lay.features)
    wp = cpu_kernels.pack_dense_weights(w, block)
    ins = [x, g.add_constant(g.fresh_name(f"{wname}_panels"), wp), bname] + n.inputs[3:]
    attrs = {"clip": n.attrs.get("clip")}
    lay.em.emit("cpu_dense", ins, attrs, n.name, output=n.outputs[0])
    return True


def _elementwise(g: Graph, n: Node, lay: _Layouts) -> bool:
    shapes = {g.values[i].shape for i in n.inputs}
    if len(shapes) != 1 or any(g.values[i].dtype != "float32" for i in n.inputs):
        return False
    if any(i in g.constants for i in n.inputs):
        return False
    attrs = {"op": n.op}
    if n.op == "clip":
        attrs.update(min=n.attrs["min"], max=n.attrs["max"])
    first = n.inputs[0]
    y = n.outputs[0]
    if first in lay.blocked:
        blk = lay.blocked[first][1]
        ins = [lay.get(i, blk) for i in n.inputs]
        yb = lay.em.emit("cpu_elementwise", ins, attrs, n.name, output=g.fresh_name(f"{y}_c"))
        lay.produced(y, yb, blk)
    else:
        lay.em.emit("cpu_elementwise", list(n.inputs), attrs, n.name, output=y)
    return True


def _softmax(g: Graph, n: Node, lay: _Layouts) -> bool:
    v = g.values[n.inputs[0]]
    if v.dtype != "float32" or len(v.shape) != 2 or n.attrs["axis"] not in (1, -1):
        return False
    lay.em.emit("cpu_softmax", list(n.inputs), {}, n.name, output=n.outputs[0])
    return True


def alter_cpu_layout(graph: Graph, options) -> Graph:
    """Runs when ``options.cpu_kernels`` is set (the float ``"cpu"`` target); ``options.
    cpu_schedules`` maps workload keys to tuned schedule choices
    (``compiler.targets.cpu.kernels.ConvWorkload.key``). Channel blocks: :func:`channel_block`."""
    if not getattr(options, "cpu_kernels", False):
        return graph
    g = graph.copy()
    nodes: list[Node] = []
    em = NodeEmitter(g, nodes)
    lay = _Layouts(g, em, getattr(options, "cpu_features", None))
    tuned = options.cpu_schedules or {}
    for n in g.nodes:
        done = False
        em.names.discard(n.name)  # a rewritten node keeps its name
        if n.target == HOST:
            if n.op == "conv2d":
                done = _conv(g, n, lay, tuned)
            elif n.op in ("max_pool", "avg_pool", "global_avg_pool"):
                done = _pool(g, n, lay)
            elif n.op == "concat":
                done = _concat(g, n, lay)
            elif n.op == "dense":
                done = _dense(g, n, lay)
            elif n.op in ("add", "relu", "clip"):
                done = _elementwise(g, n, lay)
            elif n.op == "softmax":
                done = _softmax(g, n, lay)
        if not done:
            em.names.add(n.name)
            nodes.append(n)
    g.nodes = nodes
    return g
