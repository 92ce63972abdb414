"""Shape and dtype inference for every graph op (the single list of ops the IR knows).

Each rule maps the input :class:`Value` records and the node's attrs to a list of
``(shape, dtype)`` pairs, one per output. Layouts: activations NCHW, conv weights OIHW, dense
weights (out, in); packed activations ``(N, C/B, H, W, 1, B)``, packed conv weights
``(O/B, I/B, KH, KW, B, B)``, packed dense inputs ``(N, C/B, 1, B)``, packed biases ``(O/B, B)``,
with ``B`` the block size (16 on the default VTA).
"""

from __future__ import annotations

import math

import numpy as np

from pyvta.runtime import layout, vta_ops
from pyvta.runtime.ir import Graph, GraphError, Node, Value
from pyvta.runtime.vta_ops import FusedParams


def conv_out_hw(h: int, w: int, kernel: tuple, strides: tuple, pads: tuple, dilations=(1, 1)):
    """Output (OH, OW) for pads ``[top, left, bottom, right]`` (floor mode)."""
    kh = (kernel[0] - 1) * dilations[0] + 1
    kw = (kernel[1] - 1) * dilations[1] + 1
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - kw) // strides[1] + 1
    if oh < 1 or ow < 1:
        raise GraphError(f"window {kernel} does not fit input {h}x{w} with pads {pads}")
    return oh, ow


def _need(node: Node, ins: list[Value], counts: tuple[int, ...]) -> None:
    if len(ins) not in counts:
        raise GraphError(f"node {node.name!r} ({node.op}) takes {counts} inputs, got {len(ins)}")


def _conv(node, ins, out_dtype):
    _need(node, ins, (3, 4))
    x, w, b = ins[:3]
    a = node.attrs
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    if ci * a["group"] != c or o % a["group"]:
        raise GraphError(f"node {node.name!r}: weight {w.shape} does not fit input {x.shape}")
    if b.shape != (o,):
        raise GraphError(f"node {node.name!r}: bias shape {b.shape}, expected ({o},)")
    oh, ow = conv_out_hw(h, wd, (kh, kw), a["strides"], a["pads"], a["dilations"])
    out = (n, o, oh, ow)
    if len(ins) == 4 and ins[3].shape != out:
        raise GraphError(f"node {node.name!r}: residual {ins[3].shape} != output {out}")
    return [(out, out_dtype)]


def _dense(node, ins, out_dtype):
    _need(node, ins, (3, 4))
    x, w, b = ins[:3]
    if len(x.shape) != 2 or w.shape[1] != x.shape[1] or b.shape != (w.shape[0],):
        raise GraphError(f"node {node.name!r}: dense shapes x{x.shape} w{w.shape} b{b.shape}")
    out = (x.shape[0], w.shape[0])
    if len(ins) == 4 and ins[3].shape != out:
        raise GraphError(f"node {node.name!r}: residual {ins[3].shape} != output {out}")
    return [(out, out_dtype)]


def _vta_conv(node, ins):
    _need(node, ins, (3, 4))
    x, w, b = ins[:3]
    a = node.attrs
    n, cb, h, wd, bn, blk = x.shape
    ob, ib, kh, kw, bo, bi = w.shape
    g = a.get("block_groups", 1)
    if ib * g != cb or ob % g or bi != blk or bo != blk or b.shape != (ob, blk):
        raise GraphError(
            f"node {node.name!r}: packed shapes x{x.shape} w{w.shape} b{b.shape} (block groups {g})"
        )
    oh, ow = conv_out_hw(h, wd, (kh, kw), a["strides"], a["pads"], a.get("dilations", (1, 1)))
    out = (n, ob, oh, ow, bn, blk)
    if len(ins) == 4 and ins[3].shape != out:
        raise GraphError(f"node {node.name!r}: residual {ins[3].shape} != output {out}")
    return [(out, "int8")]


def _vta_dense(node, ins):
    _need(node, ins, (3, 4))
    x, w, b = ins[:3]
    n, ib, bn, blk = x.shape
    ob, wib, bo, bi = w.shape
    if wib != ib or bi != blk or bo != blk or b.shape != (ob, blk):
        raise GraphError(f"node {node.name!r}: packed shapes x{x.shape} w{w.shape} b{b.shape}")
    out = (n, ob, bn, blk)
    if len(ins) == 4 and ins[3].shape != out:
        raise GraphError(f"node {node.name!r}: residual {ins[3].shape} != output {out}")
    return [(out, "int8")]


def _pool(node, ins):
    _need(node, ins, (1,))
    n, c, h, w = ins[0].shape
    a = node.attrs
    oh, ow = conv_out_hw(h, w, a["kernel"], a["strides"], a["pads"])
    return [((n, c, oh, ow), ins[0].dtype)]


def _flatten(node, ins):
    s = ins[0].shape
    ax = node.attrs["axis"]
    return [((math.prod(s[:ax]), math.prod(s[ax:])), ins[0].dtype)]


def _reshape(node, ins):
    shape = tuple(node.attrs["shape"])
    if math.prod(shape) != math.prod(ins[0].shape):
        raise GraphError(f"node {node.name!r}: cannot reshape {ins[0].shape} to {shape}")
    return [(shape, ins[0].dtype)]


def _concat(node, ins):
    ax = node.attrs["axis"]
    first = list(ins[0].shape)
    for v in ins[1:]:
        if len(v.shape) != len(first) or any(
            d != e for i, (d, e) in enumerate(zip(v.shape, first, strict=True)) if i != ax
        ):
            raise GraphError(f"node {node.name!r}: concat shapes {[v.shape for v in ins]}")
    first[ax] = sum(v.shape[ax] for v in ins)
    return [(tuple(first), ins[0].dtype)]


def _matmul(node, ins):
    a, b = ins
    if len(a.shape) < 2 or len(b.shape) < 2 or a.shape[-1] != b.shape[-2]:
        raise GraphError(f"node {node.name!r}: matmul shapes {a.shape} x {b.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return [((*batch, a.shape[-2], b.shape[-1]), a.dtype)]


def _broadcast(node, ins):
    try:
        shape = np.broadcast_shapes(*(v.shape for v in ins))
    except ValueError as e:
        raise GraphError(f"node {node.name!r} ({node.op}): {e}") from None
    return [(tuple(shape), ins[0].dtype)]


def _packed_pool(node, ins):
    n, cb, h, w, bn, blk = ins[0].shape
    a = node.attrs
    oh, ow = conv_out_hw(h, w, a["kernel"], a["strides"], a["pads"])
    return [((n, cb, oh, ow, bn, blk), ins[0].dtype)]


def _vta_conv_max_pool(node, ins):
    """``vta_conv2d`` then the 3x3, stride-2, pad-1 max pool (``vta_ops.CONV_POOL_ATTRS``)."""
    (((n, cb, h, w, bn, blk), dtype),) = _vta_conv(node, ins)
    a = vta_ops.CONV_POOL_ATTRS
    oh, ow = conv_out_hw(h, w, a["kernel"], a["strides"], a["pads"])
    return [((n, cb, oh, ow, bn, blk), dtype)]


def _packed_flatten(node, ins):
    n, cb, h, w, bn, blk = ins[0].shape
    if (h, w, bn) != (1, 1, 1):
        raise GraphError(
            f"node {node.name!r}: a packed flatten needs 1x1 pixels, got {ins[0].shape}"
        )
    return [((n, cb, 1, blk), ins[0].dtype)]


def _pack_fold_taps(node, ins):
    n, c, h, w = ins[0].shape
    a = node.attrs
    oh, ow = conv_out_hw(h, w, a["kernel"], a["strides"], a["pads"])
    taps, kb = layout.fold_taps_blocks(c, a["kernel"], a["strides"][0], a["block"])
    return [((n, kb, oh + taps - 1, ow, 1, a["block"]), ins[0].dtype)]


def _pack_nchw(node, ins):
    n, c, h, w = ins[0].shape
    blk = node.attrs["block"]
    return [((n, -(-c // blk), h, w, 1, blk), ins[0].dtype)]


def _unpack_nchw(node, ins):
    n, cb, h, w, bn, blk = ins[0].shape
    if not cb * blk - blk < node.attrs["channels"] <= cb * blk:
        raise GraphError(f"node {node.name!r}: {node.attrs['channels']} channels from {cb} blocks")
    return [((n * bn, node.attrs["channels"], h, w), ins[0].dtype)]


def _pack_nc(node, ins):
    n, c = ins[0].shape
    blk = node.attrs["block"]
    return [((n, -(-c // blk), 1, blk), ins[0].dtype)]


def _unpack_nc(node, ins):
    n, cb, bn, blk = ins[0].shape
    return [((n * bn, node.attrs["channels"]), ins[0].dtype)]


def _blocked_channels(node, v: Value) -> int:
    if len(v.shape) != 5:
        raise GraphError(
            f"node {node.name!r} ({node.op}) needs NCHW{{c}}c [N, C/c, H, W, c], got {v}"
        )
    return v.shape[1] * v.shape[4]


def _cpu_conv2d(node, ins):
    """``cpu_conv2d``: NCHW{in_block}c data (or NCHW data of one ``in_block``, which the
    kernel blocks itself) -> NCHW{out_block}c (``channels`` outputs, rounded up to the block:
    the bias has a zero for each padded channel)."""
    _need(node, ins, (3, 4))
    a = node.attrs
    x = ins[0]
    if not (len(x.shape) == 4 and x.shape[1] == a["in_block"]):
        _blocked_channels(node, x)
    ob, o = a["out_block"], a["channels"]
    o_pad = -(-o // ob) * ob
    if ins[2].shape != (o_pad,):
        raise GraphError(
            f"node {node.name!r}: {o} channels, out block {ob}: bias {ins[2].shape} != ({o_pad},)"
        )
    dil = a.get("dilations", (1, 1))
    oh, ow = conv_out_hw(*ins[0].shape[2:4], a["kernel"], a["strides"], a["pads"], dil)
    out = (x.shape[0], o_pad // ob, oh, ow, ob)
    if len(ins) == 4 and ins[3].shape != out:
        raise GraphError(f"node {node.name!r}: residual {ins[3].shape} != output {out}")
    return [(out, "float32")]


def _cpu_max_pool(node, ins):
    _need(node, ins, (1,))
    _blocked_channels(node, ins[0])
    n, cb, h, w, blk = ins[0].shape
    a = node.attrs
    oh, ow = conv_out_hw(h, w, a["kernel"], a["strides"], a["pads"])
    return [((n, cb, oh, ow, blk), ins[0].dtype)]


def _cpu_global_avg_pool(node, ins):
    _need(node, ins, (1,))
    _blocked_channels(node, ins[0])
    n, cb, _, _, blk = ins[0].shape
    return [((n, cb, 1, 1, blk), ins[0].dtype)]


def _cpu_concat(node, ins):
    """``cpu_concat``: NCHW{c}c inputs of ``parts`` channels (each its own block) -> the
    channel concat in NCHW{block}c."""
    a = node.attrs
    if len(ins) != len(a["parts"]) or len(ins) < 1:
        raise GraphError(f"node {node.name!r}: {len(ins)} inputs for parts {a['parts']}")
    n, _, h, w, _ = ins[0].shape
    for v, c in zip(ins, a["parts"], strict=True):
        if len(v.shape) != 5 or (v.shape[0], *v.shape[2:4]) != (n, h, w):
            raise GraphError(f"node {node.name!r}: concat input {v} of {c} channels")
        if v.shape[1] != -(-c // v.shape[4]):
            raise GraphError(f"node {node.name!r}: input {v} does not hold {c} channels")
    b = a["block"]
    return [((n, -(-sum(a["parts"]) // b), h, w, b), ins[0].dtype)]


def _cpu_dense(node, ins):
    _need(node, ins, (3, 4))
    x, w, b = ins[:3]
    if len(x.shape) != 2 or len(w.shape) != 3 or w.shape[1] != x.shape[1]:
        raise GraphError(f"node {node.name!r}: cpu_dense shapes x{x.shape} w{w.shape}")
    out = (x.shape[0], b.shape[0] if len(b.shape) == 1 else -1)
    panels = -(-out[1] // w.shape[2]) if out[1] > 0 else -1
    if panels != w.shape[0] or (len(ins) == 4 and ins[3].shape != out):
        raise GraphError(f"node {node.name!r}: bias {b.shape} / residual for output {out}")
    return [(out, "float32")]


def _layout_transform(node, ins):
    """NCHW (block None) <-> NCHW{c}c of ``channels`` channels."""
    _need(node, ins, (1,))
    a = node.attrs
    c, src, dst = a["channels"], a["src_block"], a["dst_block"]
    shape = ins[0].shape
    n, h, w = shape[0], shape[2], shape[3]

    def blocked(b):
        return (n, c, h, w) if b is None else (n, -(-c // b), h, w, b)

    if shape != blocked(src):
        raise GraphError(
            f"node {node.name!r}: input {shape}, expected {blocked(src)} (block {src})"
        )
    return [(blocked(dst), ins[0].dtype)]


def _same(node, ins):
    return [(ins[0].shape, ins[0].dtype)]


def _scaled(node, ins, dtype):
    """(De)quantize: same shape, ``dtype``; ``frac_bits`` (the kernel's scale) must be an int.
    A ``quantize`` with ``src_block`` reads the NCHW{src_block}c form of ``channels`` channels
    (the float layers' blocked layout), a ``dequantize`` with ``dst_block`` writes that form."""
    a = node.attrs
    if not isinstance(a["frac_bits"], int | np.integer):
        raise GraphError(f"node {node.name!r}: frac_bits {a['frac_bits']!r} is not an int")
    shape = ins[0].shape
    if a.get("src_block"):
        blk, c = a["src_block"], a["channels"]
        n, cb, h, w, b = shape if len(shape) == 5 else (None,) * 5
        if b != blk or cb != -(-c // blk):
            raise GraphError(
                f"node {node.name!r}: input {shape}, expected [N, {-(-c // blk)}, H, W, {blk}]"
                f" ({c} channels in blocks of {blk})"
            )
        shape = (n, c, h, w)
    if a.get("dst_block"):
        if len(shape) != 4:
            raise GraphError(f"node {node.name!r}: dst_block needs an NCHW input, got {shape}")
        n, c, h, w = shape
        shape = (n, -(-c // a["dst_block"]), h, w, a["dst_block"])
    return [(shape, dtype)]


def _fused(rule):
    """``rule`` for an int8 op whose kernel reads ``FusedParams`` from its attrs: they are
    checked here, so a graph (or a loaded artifact) without them fails its check, not its run."""

    def checked(node, ins):
        FusedParams.from_attrs(node.attrs)  # KeyError / ValueError: GraphError in infer_node
        return rule(node, ins)

    return checked


RULES = {
    "conv2d": lambda n, i: _conv(n, i, "float32"),
    "qconv2d": _fused(lambda n, i: _conv(n, i, "int8")),
    "dense": lambda n, i: _dense(n, i, "float32"),
    "qdense": _fused(lambda n, i: _dense(n, i, "int8")),
    "vta_conv2d": _fused(_vta_conv),
    "vta_dense": _fused(_vta_dense),
    "matmul": _matmul,
    "add": _broadcast,
    "mul": _broadcast,
    "relu": _same,
    "clip": _same,
    "identity": _same,
    "softmax": _same,
    "batch_norm": _same,
    "max_pool": _pool,
    "avg_pool": _pool,
    "global_avg_pool": lambda n, i: [((*i[0].shape[:2], 1, 1), i[0].dtype)],
    "qglobal_avg_pool": lambda n, i: [((*i[0].shape[:2], 1, 1), "int8")],
    "vta_max_pool": _packed_pool,
    "vta_conv2d_max_pool": _fused(_vta_conv_max_pool),
    "vta_global_avg_pool": lambda n, i: [((*i[0].shape[:2], 1, 1, *i[0].shape[4:]), "int8")],
    "packed_flatten": _packed_flatten,
    "pack_fold_taps": _pack_fold_taps,
    "flatten": _flatten,
    "reshape": _reshape,
    "concat": _concat,
    "quantize": lambda n, i: _scaled(n, i, "int8"),
    "dequantize": lambda n, i: _scaled(n, i, "float32"),
    "pack_nchw": _pack_nchw,
    "unpack_nchw": _unpack_nchw,
    "pack_nc": _pack_nc,
    "unpack_nc": _unpack_nc,
    "cpu_conv2d": _cpu_conv2d,
    "cpu_max_pool": _cpu_max_pool,
    "cpu_avg_pool": _cpu_max_pool,
    "cpu_global_avg_pool": _cpu_global_avg_pool,
    "cpu_concat": _cpu_concat,
    "cpu_dense": _cpu_dense,
    "cpu_elementwise": _same,
    "cpu_softmax": _same,
    "layout_transform": _layout_transform,
}
OPS = tuple(sorted(RULES))


def infer_node(node: Node, ins: list[Value]) -> list[tuple[tuple[int, ...], str]]:
    """Output ``(shape, dtype)`` pairs of ``node`` given its input value records."""
    rule = RULES.get(node.op)
    if rule is None:
        raise GraphError(f"node {node.name!r} has unknown op {node.op!r} (known: {OPS})")
    try:
        return [(tuple(int(d) for d in s), t) for s, t in rule(node, ins)]
    except GraphError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        # wrong input count, missing or mistyped attribute: a malformed node, named
        raise GraphError(
            f"node {node.name!r} ({node.op}) is malformed: {type(exc).__name__}: {exc}"
        ) from exc


def record_outputs(graph: Graph, node: Node) -> Node:
    """Infer ``node``'s output values and record them in ``graph.values``; returns the node."""
    ins = [graph.values[i] for i in node.inputs]
    for out, (shape, dtype) in zip(node.outputs, infer_node(node, ins), strict=True):
        graph.values[out] = Value(out, shape, dtype)
    return node
