"""Rewrite ``vta`` nodes to the packed block layout, with pack/unpack nodes at the borders.

``qconv2d@vta`` becomes ``vta_conv2d`` on ``(N, C/B, H, W, 1, B)`` activations with
``(O/B, I/B, KH, KW, B, B)`` weights and ``(O/B, B)`` bias (a grouped conv: ``(O/B, I/B/G, ...)``
block-diagonal weights of ``G`` block groups, attr ``block_groups``; a dilated one keeps
``dilations``); ``qdense@vta`` becomes ``vta_dense``.
Channels are zero-padded to the block (padded outputs stay 0: zero weights and bias; per-channel
shifts of the padded channels are 0). Every vta
output is unpacked right away under its original name; a later vta reader takes the packed
value directly, and ``remove_dead_code`` drops unpacks nobody reads.

A conv whose channels padded to blocks would waste the reduction (``layout.folds_taps``: the
stem's 3 channels) reads its input through ``pack_fold_taps`` (host: rows and kernel columns folded into
channels) as a ``KH/s x 1`` conv over ``layout.fold_oihw`` weights. ``max_pool@vta`` becomes ``vta_max_pool`` and
``qglobal_avg_pool@vta`` ``vta_global_avg_pool`` on packed values; a ``vta_dense`` reading the
flatten of a packed 1x1 value reads it through ``packed_flatten`` (a view).
"""

from __future__ import annotations

from pyvta.compiler.graph.passes.rewrite import NodeEmitter
from pyvta.runtime import layout, vta_ops
from pyvta.runtime.ir import ACCELERATOR, Graph, Node


def pack_layouts(graph: Graph, options) -> Graph:
    block = getattr(options, "block", layout.BLOCK_ELEMS)
    g = graph.copy()
    nodes: list[Node] = []
    em = NodeEmitter(g, nodes)
    packed: dict[str, str] = {}  # NCHW / NC name -> packed name
    flattens = {n.outputs[0]: n.inputs[0] for n in g.nodes if n.op == "flatten"}
    readers: dict[str, list[Node]] = {}
    for n in g.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    fused: set[str] = set()  # max pools folded into the conv before them

    def pack(name: str) -> str:
        if name not in packed:
            src = packed.get(flattens.get(name, ""))
            if src is not None and g.values[src].shape[2:5] == (1, 1, 1):  # (N, C/B, 1, 1, 1, B)
                packed[name] = em.emit("packed_flatten", [src], {}, f"{name}_pack")
            else:
                op = "pack_nchw" if len(g.values[name].shape) == 4 else "pack_nc"
                packed[name] = em.emit(op, [name], {"block": block}, f"{name}_pack")
        return packed[name]

    for n in g.nodes:
        if n.target != ACCELERATOR:
            nodes.append(n)
            continue
        if n.name in fused:
            continue
        y = n.outputs[0]
        if n.op in ("max_pool", "qglobal_avg_pool"):
            op = "vta_max_pool" if n.op == "max_pool" else "vta_global_avg_pool"
            em.names.discard(n.name)
            attrs = dict(n.attrs)
            if "offset" in attrs:  # (a re-centred mean's channel offsets: padded channels 0)
                attrs["offset"] = _pad_list(attrs["offset"], block)
            yp = em.emit(op, [pack(n.inputs[0])], attrs, n.name,
                         output=g.fresh_name(f"{y}_packed"), target=ACCELERATOR)  # fmt: skip
            em.emit(
                "unpack_nchw", [yp], {"channels": g.values[y].shape[1]}, f"{y}_unpack", output=y
            )
            packed[y] = yp
            continue
        conv = n.op == "qconv2d"
        w, b = g.constants[n.inputs[1]], g.constants[n.inputs[2]]
        strides = n.attrs.get("strides", (1, 1))
        group = n.attrs.get("group", 1) if conv else 1
        dilations = list(n.attrs.get("dilations", (1, 1))) if conv else [1, 1]
        fold = (
            conv
            and group == 1
            and dilations == [1, 1]
            and n.inputs[0] not in packed
            and layout.folds_taps(w.shape[1], w.shape[2:], strides, block)
        )
        if fold:  # the stem: a KH/s x 1 conv over the host's folded rows of the input
            a = {"kernel": list(w.shape[2:]), "strides": strides, "pads": n.attrs["pads"]}
            x = em.emit(
                "pack_fold_taps", [n.inputs[0]], a | {"block": block}, f"{n.inputs[0]}_fold"
            )
            wp = layout.fold_oihw(w, strides[0], block)
        elif group != 1:  # block-diagonal GEMMs, one per block group
            x = pack(n.inputs[0])
            cin = g.values[n.inputs[0]].shape[1]
            _, _, oh, ow = g.values[n.outputs[0]].shape
            # one output pixel: a block group of one output block would have every GEMM
            # micro-op write one ACC row (a hazard); two blocks alternate
            gb = layout.block_groups(cin, w.shape[0], group, block, 2 if oh * ow == 1 else 1)
            wp = layout.pack_group_oihw(w, group, gb, block)
        else:
            x = pack(n.inputs[0])
            wp = layout.pack_oihw(w, block) if conv else layout.pack_oi(w, block)
        ins = [
            x,
            g.add_constant(g.fresh_name(f"{n.inputs[1]}_packed"), wp),
            g.add_constant(g.fresh_name(f"{n.inputs[2]}_packed"), layout.pack_bias(b, block)),
        ]
        if len(n.inputs) == 4:
            ins.append(pack(n.inputs[3]))
        keys = ("shift", "res_shift", "clip_lo", "clip_hi") + (("strides", "pads") if conv else ())
        attrs = {k: n.attrs[k] for k in keys}
        if fold:
            attrs |= {"strides": [1, 1], "pads": [0, 0, 0, 0]}
        if group != 1:
            attrs["block_groups"] = gb
        if dilations != [1, 1]:
            attrs["dilations"] = dilations
        for k in ("shift", "res_shift"):  # per-channel: one per packed output channel
            if isinstance(attrs[k], list):
                attrs[k] = _pad_list(attrs[k], block)
        y = n.outputs[0]
        op = "vta_conv2d" if conv else "vta_dense"
        pool = _pool_after(g, n, readers) if fold else None
        if pool is not None:  # the stem and its max pool: one node (``backend.vta.conv_pool``)
            fused.add(pool.name)
            op, y = "vta_conv2d_max_pool", pool.outputs[0]
        em.names.discard(n.name)  # the vta node keeps the quantized node's name
        yp = em.emit(op, ins, attrs, n.name, output=g.fresh_name(f"{y}_packed"), target=ACCELERATOR)
        unpack = "unpack_nchw" if conv else "unpack_nc"
        em.emit(unpack, [yp], {"channels": g.values[y].shape[1]}, f"{y}_unpack", output=y)
        packed[y] = yp
    g.nodes = nodes
    return g


def _pad_list(values: list[int], block: int) -> list[int]:
    """A per-channel attr padded with zeros to whole channel blocks."""
    return values + [0] * (-len(values) % block)


def _pool_after(g: Graph, conv: Node, readers: dict) -> Node | None:
    """The max pool of ``vta_ops.CONV_POOL_ATTRS`` on the accelerator that is the only reader
    of ``conv``'s output (even output sides), else None."""
    y = conv.outputs[0]
    nxt = readers.get(y, [])
    if len(nxt) != 1 or y in g.outputs:
        return None
    p = nxt[0]
    a = vta_ops.CONV_POOL_ATTRS
    same = (
        p.op == "max_pool"
        and p.target == ACCELERATOR
        and all(tuple(p.attrs[k]) == tuple(v) for k, v in a.items())
    )
    _, _, h, w = g.values[y].shape
    if not same or p.attrs.get("ceil_mode", 0) or h % 2 or w % 2:
        return None
    return p
