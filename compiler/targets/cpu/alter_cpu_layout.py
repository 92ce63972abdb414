"""Plan the blocked NCHW{c}c layout of a float CPU network and pick each layer's schedule
(TVM's AlterOpLayout): the compiled CPU ops read and write ``[1, C/c, H, W, c]`` from the first
conv to the global pool, and layouts change only at the network's borders.

Rewrites (float32, batch 1, ``target == "cpu"``; anything else is left alone):

- ``conv2d`` (group 1, or depthwise: group = C = O; unit dilation) -> ``cpu_conv2d`` with its
  weights transformed for the chosen template (direct NCHWc, Winograd or depthwise) and the
  schedule choice in ``attrs["schedule"]`` (``compiler.targets.cpu.kernels``),
- ``max_pool`` -> ``cpu_max_pool``, ``global_avg_pool`` -> ``cpu_global_avg_pool`` (its output
  is NCHW ``[1, C, 1, 1]`` byte for byte: the border is a ``reshape``),
- ``dense`` -> ``cpu_dense`` (weights in column panels), ``add``/``relu``/``clip`` of equal
  shapes -> ``cpu_elementwise`` (on whatever layout their first input has), ``softmax`` over
  the last axis of ``[M, N]`` -> ``cpu_softmax``.

A blocked value keeps its NCHW name for readers that need NCHW: a ``layout_transform`` under
that name follows every blocked producer, and ``remove_dead_code`` drops those nobody reads.
Channels that are not a multiple of the block use one block of all channels (the 3-channel
image: ``[1, 1, H, W, 3]``); a direct conv reading such an NCHW value (the image) blocks it
in its own padding copy, so no transform runs before the first conv.
"""

from __future__ import annotations

from pyvta.compiler.graph.passes.rewrite import NodeEmitter
from pyvta.compiler.targets.cpu import kernels as cpu_kernels
from pyvta.runtime.ir import Graph, Node

MAX_SINGLE_BLOCK = 32  # channels below this that the block does not divide form one block


class _Layouts:
    """Which blocked form each NCHW value has, emitting transforms on demand."""

    def __init__(self, g: Graph, em: NodeEmitter, block: int) -> None:
        self.g, self.em, self.block = g, em, block
        self.blocked: dict[str, tuple[str, int]] = {}  # NCHW name -> (blocked name, block)

    def block_for(self, channels: int) -> int | None:
        if channels % self.block == 0:
            return self.block
        return channels if channels < MAX_SINGLE_BLOCK else None

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
        if nchw_op == "reshape":
            attrs = {"shape": list(shape)}
        else:
            attrs = {"channels": shape[1], "src_block": block, "dst_block": None}
        self.em.emit(nchw_op, [blocked], attrs, f"{name}_nchw", output=name)


def _is_4d_float(g: Graph, name: str) -> bool:
    v = g.values[name]
    return v.dtype == "float32" and len(v.shape) == 4 and v.shape[0] == 1


def _conv(g: Graph, n: Node, lay: _Layouts, tuned: dict) -> bool:
    a = n.attrs
    x = n.inputs[0]
    if not _is_4d_float(g, x) or list(a["dilations"]) != [1, 1]:
        return False
    w = g.constants.get(n.inputs[1])
    if w is None or n.inputs[2] not in g.constants:
        return False
    o, cg, kh, kw = w.shape
    c = g.values[x].shape[1]
    depthwise = a["group"] == c == o and cg == 1
    if a["group"] != 1 and not depthwise:
        return False
    ib, ob = lay.block_for(c), lay.block_for(o)
    if ib is None or ob is None or ob % 8 or (depthwise and ib != ob):
        return False
    _, _, h, wd = g.values[x].shape
    wl = cpu_kernels.ConvWorkload(c, h, wd, o, (kh, kw), tuple(a["strides"]), tuple(a["pads"]),
                                  ib, ob, depthwise)  # fmt: skip
    schedule = tuned.get(wl.key) or cpu_kernels.default_conv_schedule(wl)
    wt = cpu_kernels.conv_weights(schedule, g.constants[n.inputs[1]], ib, ob)
    # the direct template blocks an NCHW input of one block in its padding copy itself
    nchw_read = x not in lay.blocked and ib == c != lay.block and schedule["template"] == "direct"
    ins = [
        x if nchw_read else lay.get(x, ib),
        g.add_constant(g.fresh_name(f"{n.inputs[1]}_{schedule['template']}"), wt),
    ]
    ins.append(n.inputs[2])
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
    y = n.outputs[0]
    yb = lay.em.emit("cpu_conv2d", ins, attrs, n.name, output=g.fresh_name(f"{y}_{ob}c"))
    lay.produced(y, yb, ob)
    return True


def _pool(g: Graph, n: Node, lay: _Layouts) -> bool:
    x = n.inputs[0]
    if x not in lay.blocked or not _is_4d_float(g, x):
        return False
    blk = lay.blocked[x][1]
    y = n.outputs[0]
    if n.op == "max_pool":
        attrs = {k: list(n.attrs[k]) for k in ("kernel", "strides", "pads")}
        yb = lay.em.emit("cpu_max_pool", [lay.get(x, blk)], attrs, n.name, g.fresh_name(f"{y}_c"))
        lay.produced(y, yb, blk)
    else:
        yb = lay.em.emit(
            "cpu_global_avg_pool", [lay.get(x, blk)], {}, n.name, g.fresh_name(f"{y}_c")
        )
        lay.produced(y, yb, blk, nchw_op="reshape")
    return True


def _dense(g: Graph, n: Node, lay: _Layouts) -> bool:
    x, wname, bname = n.inputs[:3]
    w = g.constants.get(wname)
    if w is None or bname not in g.constants or g.values[x].dtype != "float32":
        return False
    block = cpu_kernels.dense_block(w.shape[0])
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
    cpu_block`` is the channel block, ``options.cpu_schedules`` maps workload keys to tuned
    schedule choices (``compiler.targets.cpu.kernels.ConvWorkload.key``)."""
    if not getattr(options, "cpu_kernels", False):
        return graph
    g = graph.copy()
    nodes: list[Node] = []
    em = NodeEmitter(g, nodes)
    lay = _Layouts(g, em, options.cpu_block)
    tuned = options.cpu_schedules or {}
    for n in g.nodes:
        done = False
        em.names.discard(n.name)  # a rewritten node keeps its name
        if n.target == "cpu":
            if n.op == "conv2d":
                done = _conv(g, n, lay, tuned)
            elif n.op in ("max_pool", "global_avg_pool"):
                done = _pool(g, n, lay)
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
