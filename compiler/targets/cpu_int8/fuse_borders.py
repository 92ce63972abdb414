"""Fold the float layers' layout changes into the int8 borders of a ``cpu-int8`` graph.

``alter_cpu_layout`` keeps the float layers in NCHW{c}c and emits a ``layout_transform`` to NCHW
before each ``quantize`` and from NCHW after each ``dequantize`` (the int8 kernels read and write
NCHW). This pass makes the (de)quantize read or write the blocked form itself (attrs
``src_block``/``channels`` of a ``quantize``, ``dst_block`` of a ``dequantize``: one compiled
kernel, :func:`compiler.ops.cpu.int8.quantize_nchw` / ``dequantize_nchw``, instead of a
transform and a numpy pass over the tensor). A transform whose NCHW value has other readers, or
is a graph output, stays.
"""

from __future__ import annotations

from pyvta.runtime.ir import HOST, Graph


def fuse_int8_borders(graph: Graph, options) -> Graph:
    """The pipeline pass (a no-op unless the target builds both float and int8 CPU kernels)."""
    if not (options.int8_kernels and options.cpu_kernels):
        return graph
    g = graph.copy()
    producers, consumers = g.producers(), g.consumers()
    keep = set(g.outputs)
    dropped = set()
    for n in g.nodes:
        if n.target != HOST:
            continue
        if n.op == "quantize":
            src = producers.get(n.inputs[0])
            if (
                src is not None
                and src.op == "layout_transform"
                and src.attrs["dst_block"] is None
                and src.attrs["src_block"]
                and len(consumers[n.inputs[0]]) == 1
                and n.inputs[0] not in keep
            ):
                n.inputs = [src.inputs[0]]
                n.attrs = {
                    **n.attrs,
                    "src_block": src.attrs["src_block"],
                    "channels": src.attrs["channels"],
                }
                dropped.add(src.name)
                g.values.pop(src.outputs[0])
        elif n.op == "dequantize":
            readers = consumers.get(n.outputs[0], [])
            if len(readers) != 1 or n.outputs[0] in keep:
                continue
            dst = readers[0]
            if (
                dst.op == "layout_transform"
                and dst.attrs["src_block"] is None
                and dst.attrs["dst_block"]
            ):
                g.values.pop(n.outputs[0])
                n.outputs = list(dst.outputs)
                n.attrs = {**n.attrs, "dst_block": dst.attrs["dst_block"]}
                dropped.add(dst.name)
    g.nodes = [n for n in g.nodes if n.name not in dropped]
    return g
