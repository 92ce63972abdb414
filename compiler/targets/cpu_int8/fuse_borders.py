"""Fold the float layers' layout changes into the int8 borders of a ``cpu-int8`` graph.

``alter_cpu_layout`` keeps the float layers in NCHW{c}c and emits a ``layout_transform`` to NCHW
before each ``quantize`` and from NCHW after each ``dequantize`` (the int8 kernels read and write
NCHW). This pass makes the (de)quantize read or write the blocked form itself (attrs
``src_block``/``channels`` of a ``quantize``, ``dst_block`` of a ``dequantize``: one compiled
kernel, :func:`compiler.ops.cpu.int8_scale.quantize_nchw` / ``dequantize_nchw``, instead of a
transform and a numpy pass over the tensor). A transform whose NCHW value has other readers, or
is a graph output, stays.

A channel concat of int8 values between int8 layers (each part ``dequantize``d, the float
concat read only by a ``quantize``) becomes a ``concat`` of the int8 NCHW values themselves
(:func:`int8_concat`): a part at the quantize's scale as it is (a dequantize and a quantize
at one scale give back each code), a part at another scale through an NCHW ``dequantize`` and
``quantize`` of its own (the same two roundings as before, on that part only). The same bits;
one copy of the bytes instead of (de)quantize passes over every part, a blocked float concat
and a quantize of the whole.
"""

from __future__ import annotations

from pyvta.runtime.ir import HOST, Graph, Node, Value


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
    (``cpu_concat``, or ``concat`` on axis 1) whose parts are all ``dequantize``d replaced by a
    ``concat`` (axis 1) of the parts' int8 values, under the concat's name; a part at another
    frac bits than the quantize's is requantized first (``dequantize`` + ``quantize`` on NCHW);
    a part's ``dequantize`` read by that concat only goes."""
    producers, consumers = g.producers(), g.consumers()
    keep = set(g.outputs)
    dropped: set[str] = set()
    replaced: dict[str, list[Node]] = {}
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
        if not all(d is not None and d.op == "dequantize" and d.target == HOST for d in parts):
            continue
        nodes, ins = [], []
        for d in parts:
            if d.outputs[0] not in keep and all(r is cat for r in consumers[d.outputs[0]]):
                dropped.add(d.name)
            ins.append(d.inputs[0])
            if d.attrs["frac_bits"] != q.attrs["frac_bits"]:
                nodes += _requantize(g, d, q.attrs["frac_bits"])
                ins[-1] = nodes[-1].outputs[0]
        dropped.add(cat.name)
        replaced[q.name] = [*nodes, Node("concat", cat.name, ins, list(q.outputs), {"axis": 1})]
    for name in dropped:
        for o in next(n for n in g.nodes if n.name == name).outputs:
            g.values.pop(o, None)
    g.nodes = [m for n in g.nodes if n.name not in dropped for m in replaced.get(n.name, [n])]
    return g


def _requantize(g: Graph, d: Node, frac_bits: int) -> list[Node]:
    """A ``dequantize`` (NCHW) at ``d``'s frac bits and a ``quantize`` to ``frac_bits`` of
    ``d``'s int8 input: ``[dequantize, quantize]``, their values added to ``g``."""
    src = g.values[d.inputs[0]]
    fl = _fresh(g, f"{d.inputs[0]}_float")
    out = _fresh(g, f"{d.inputs[0]}_at{frac_bits}")
    g.values[fl] = Value(fl, src.shape, "float32")
    g.values[out] = Value(out, src.shape, "int8")
    return [
        Node("dequantize", fl, [d.inputs[0]], [fl], {"frac_bits": d.attrs["frac_bits"]}),
        Node("quantize", out, [fl], [out], {"frac_bits": frac_bits}),
    ]


def _fresh(g: Graph, base: str) -> str:
    """``base`` or ``base_1``, ``base_2``... whichever names no value and no node of ``g``."""
    taken = {n.name for n in g.nodes}
    name, i = base, 0
    while name in g.values or name in taken:
        i += 1
        name = f"{base}_{i}"
    return name
