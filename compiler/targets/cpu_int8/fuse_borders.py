"""Fold the float layers' layout changes into the int8 borders of a ``cpu-int8`` graph.

``alter_cpu_layout`` keeps the float layers in NCHW{c}c and emits a ``layout_transform`` to NCHW
before each ``quantize`` and from NCHW after each ``dequantize`` (the int8 kernels read and write
NCHW). This pass makes the (de)quantize read or write the blocked form itself (attrs
``src_block``/``channels`` of a ``quantize``, ``dst_block`` of a ``dequantize``: one compiled
kernel, :func:`compiler.ops.cpu.int8.quantize_nchw` / ``dequantize_nchw``, instead of a
transform and a numpy pass over the tensor). A transform whose NCHW value has other readers, or
is a graph output, stays.

A channel concat of int8 values between int8 layers (each part ``dequantize``d at the frac
bits the concat's ``quantize`` uses, the float concat read by that ``quantize`` only) becomes
a ``concat`` of the int8 NCHW values themselves (:func:`int8_concat`): the same bits (a
dequantize and quantize at one scale give back each code), one copy of the bytes instead of
two (de)quantize passes of each part, a blocked float concat and a quantize of the whole.
"""

from __future__ import annotations

from pyvta.runtime.ir import HOST, Graph, Node


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
    return int8_concat(g)


def int8_concat(g: Graph) -> Graph:
    """``g`` (changed in place) with each ``quantize`` of a float channel concat
    (``cpu_concat``, or ``concat`` on axis 1) whose parts are all ``dequantize``d at the
    quantize's frac bits replaced by a ``concat`` (axis 1) of the parts' int8 values, under the
    concat's name; a part's ``dequantize`` read by that concat only goes too."""
    producers, consumers = g.producers(), g.consumers()
    keep = set(g.outputs)
    dropped: set[str] = set()
    replaced: dict[str, Node] = {}
    for q in g.nodes:
        cat = producers.get(q.inputs[0]) if q.op == "quantize" and q.target == HOST else None
        if (
            cat is None
            or cat.target != HOST
            or not (cat.op == "cpu_concat" or (cat.op == "concat" and cat.attrs["axis"] == 1))
            or len(consumers[q.inputs[0]]) != 1
            or q.inputs[0] in keep
        ):
            continue
        parts = [producers.get(v) for v in cat.inputs]
        if not all(
            d is not None
            and d.op == "dequantize"
            and d.target == HOST
            and d.attrs["frac_bits"] == q.attrs["frac_bits"]
            for d in parts
        ):
            continue
        for d in parts:
            if d.outputs[0] not in keep and all(r is cat for r in consumers[d.outputs[0]]):
                dropped.add(d.name)
        dropped.add(cat.name)
        replaced[q.name] = Node(
            "concat", cat.name, [d.inputs[0] for d in parts], list(q.outputs), {"axis": 1}
        )
    for name in dropped:
        for o in next(n for n in g.nodes if n.name == name).outputs:
            g.values.pop(o, None)
    g.nodes = [replaced.get(n.name, n) for n in g.nodes if n.name not in dropped]
    return g
