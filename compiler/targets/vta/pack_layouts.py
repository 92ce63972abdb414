"""Rewrite ``vta`` nodes to the packed block layout, with pack/unpack nodes at the borders.

``qconv2d@vta`` becomes ``vta_conv2d`` on ``(N, C/B, H, W, 1, B)`` activations with
``(O/B, I/B, KH, KW, B, B)`` weights and ``(O/B, B)`` bias; ``qdense@vta`` becomes ``vta_dense``.
Channels are zero-padded to the block (padded outputs stay 0: zero weights and bias). Every vta
output is unpacked right away under its original name; a later vta reader takes the packed
value directly, and ``remove_dead_code`` drops unpacks nobody reads.
"""

from __future__ import annotations

from pyvta.compiler.graph import layout
from pyvta.compiler.graph.ir import Graph, Node
from pyvta.compiler.graph.passes.rewrite import NodeEmitter


def pack_layouts(graph: Graph, options) -> Graph:
    block = getattr(options, "block", layout.BLOCK_ELEMS)
    g = graph.copy()
    nodes: list[Node] = []
    em = NodeEmitter(g, nodes)
    packed: dict[str, str] = {}  # NCHW / NC name -> packed name

    def pack(name: str) -> str:
        if name not in packed:
            op = "pack_nchw" if len(g.values[name].shape) == 4 else "pack_nc"
            packed[name] = em.emit(op, [name], {"block": block}, f"{name}_pack")
        return packed[name]

    for n in g.nodes:
        if n.target != "vta":
            nodes.append(n)
            continue
        conv = n.op == "qconv2d"
        w, b = g.constants[n.inputs[1]], g.constants[n.inputs[2]]
        wp = layout.pack_oihw(w, block) if conv else layout.pack_oi(w, block)
        ins = [
            pack(n.inputs[0]),
            g.add_constant(g.fresh_name(f"{n.inputs[1]}_packed"), wp),
            g.add_constant(g.fresh_name(f"{n.inputs[2]}_packed"), layout.pack_bias(b, block)),
        ]
        if len(n.inputs) == 4:
            ins.append(pack(n.inputs[3]))
        keys = ("shift", "res_shift", "clip_lo", "clip_hi") + (("strides", "pads") if conv else ())
        attrs = {k: n.attrs[k] for k in keys}
        y = n.outputs[0]
        op = "vta_conv2d" if conv else "vta_dense"
        em.names.discard(n.name)  # the vta node keeps the quantized node's name
        yp = em.emit(op, ins, attrs, n.name, output=g.fresh_name(f"{y}_packed"), target="vta")
        unpack = "unpack_nchw" if conv else "unpack_nc"
        em.emit(unpack, [yp], {"channels": g.values[y].shape[1]}, f"{y}_unpack", output=y)
        packed[y] = yp
    g.nodes = nodes
    return g
