"""ONNX -> graph IR.

Supported ops: Conv, Gemm, MatMul, Relu, Clip, Add, Mul, BatchNormalization, MaxPool,
AveragePool, GlobalAveragePool, Flatten, Reshape, Concat, Softmax, Identity, Constant.
Tensors must be float32 (int64 only for Reshape's shape) with static shapes. An op, attribute
or attribute value outside what is listed raises :class:`OnnxImportError` naming the node, the
op and what is supported; nothing is silently dropped.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from pyvta.isa.errors import PyvtaError
from pyvta.runtime.ir import Graph, Node, Value
from pyvta.runtime.shapes import record_outputs

MAX_TENSOR_ELEMS = (
    1 << 24
)  # 64 MiB of float32 per tensor: beyond, the CPU kernels run out of memory


class OnnxImportError(PyvtaError, ValueError):
    """The ONNX model uses something the importer does not support."""


class _Importer:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.opset = next(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13
        )
        self.graph = Graph(model.graph.name or "model", [], [], [], {}, {})
        self.node_names: set[str] = set()

    def fail(self, node, what: str) -> OnnxImportError:
        return OnnxImportError(f"node {node.name!r} (op {node.op_type}): {what}")

    def attrs(self, node, allowed: dict) -> dict:
        """Node attributes with defaults; an attribute not in ``allowed`` raises."""
        got = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        extra = sorted(set(got) - set(allowed))
        if extra:
            raise self.fail(
                node, f"attribute(s) {extra} not supported (supported: {sorted(allowed)})"
            )
        out = dict(allowed)
        out.update({k: v.decode() if isinstance(v, bytes) else v for k, v in got.items()})
        return out

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.constants.get(name)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.values[name].shape

    def emit(self, node, op: str, inputs: list[str], attrs: dict, output: str | None = None):
        """Add one IR node; its output is the ONNX node's first output unless given."""
        base = node.name or f"{node.op_type}_{len(self.graph.nodes)}"
        name, i = base, 1
        while name in self.node_names:
            name, i = f"{base}_{i}", i + 1
        self.node_names.add(name)
        out = output or node.output[0]
        n = Node(op, name, list(inputs), [out], attrs)
        self.graph.nodes.append(n)
        record_outputs(self.graph, n)
        return out

    def fresh(self, base: str) -> str:
        return self.graph.fresh_name(base)


def _ints(v) -> list[int]:
    return [int(x) for x in v]


def _window_attrs(imp: _Importer, node, allowed_extra: dict) -> dict:
    a = imp.attrs(
        node,
        {
            "auto_pad": "NOTSET",
            "kernel_shape": None,
            "pads": None,
            "strides": None,
            **allowed_extra,
        },
    )
    if a["auto_pad"] not in ("NOTSET", "VALID"):
        raise imp.fail(node, f"auto_pad={a['auto_pad']!r} not supported (supported: NOTSET, VALID)")
    if (
        a.get("dilations") is not None
        and any(d != 1 for d in a["dilations"])
        and (node.op_type != "Conv")
    ):
        raise imp.fail(node, f"dilations={a['dilations']} not supported (supported: all 1)")
    if a.get("ceil_mode", 0) != 0:
        raise imp.fail(node, "ceil_mode=1 not supported (supported: 0)")
    k = a["kernel_shape"]
    if k is not None and len(k) != 2:
        raise imp.fail(node, f"kernel_shape={k}: only 2-D windows are supported")
    p = _ints(a["pads"]) if a["pads"] is not None else [0, 0, 0, 0]
    if a["auto_pad"] == "VALID":
        p = [0, 0, 0, 0]
    # ONNX pads are [x1_begin, x2_begin, x1_end, x2_end] == our [top, left, bottom, right]
    a["pads"] = p
    a["strides"] = _ints(a["strides"]) if a["strides"] is not None else [1, 1]
    return a


def _conv(imp: _Importer, node) -> None:
    a = _window_attrs(imp, node, {"dilations": None, "group": 1})
    x, w = node.input[0], node.input[1]
    wshape = imp.shape(w)
    if len(wshape) != 4:
        raise imp.fail(node, f"weight shape {wshape}: only 2-D convolution is supported")
    if a["kernel_shape"] is not None and _ints(a["kernel_shape"]) != list(wshape[2:]):
        raise imp.fail(node, f"kernel_shape {a['kernel_shape']} != weight shape {wshape}")
    if len(node.input) > 2 and node.input[2]:
        b = node.input[2]
    else:
        b = imp.graph.add_constant(imp.fresh(f"{w}_bias"), np.zeros(wshape[0], np.float32))
    attrs = {
        "strides": a["strides"],
        "pads": a["pads"],
        "dilations": _ints(a["dilations"]) if a["dilations"] is not None else [1, 1],
        "group": int(a["group"]),
        "clip": None,
    }
    imp.emit(node, "conv2d", [x, w, b], attrs)


def _gemm(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
    if a["transA"]:
        raise imp.fail(node, "transA=1 not supported (supported: 0)")
    bmat = imp.const(node.input[1])
    if bmat is None:
        raise imp.fail(node, "B must be a constant (initializer); a computed B is not supported")
    w = (bmat if a["transB"] else bmat.T) * np.float32(a["alpha"])
    out_elems = w.shape[0]
    if len(node.input) > 2 and node.input[2]:
        c = imp.const(node.input[2])
        if c is None or c.size not in (1, out_elems):
            raise imp.fail(node, "C must be a constant of shape (N,) or a scalar")
        bias = np.broadcast_to(c.reshape(-1) * np.float32(a["beta"]), (out_elems,))
    else:
        bias = np.zeros(out_elems, np.float32)
    wn = imp.graph.add_constant(imp.fresh(f"{node.input[1]}_w"), w.astype(np.float32))
    bn = imp.graph.add_constant(imp.fresh(f"{node.input[1]}_b"), bias.astype(np.float32))
    imp.emit(node, "dense", [node.input[0], wn, bn], {"clip": None})


def _matmul(imp: _Importer, node) -> None:
    imp.attrs(node, {})
    a, b = node.input
    bmat = imp.const(b)
    if bmat is not None and bmat.ndim == 2 and len(imp.shape(a)) == 2:
        wn = imp.graph.add_constant(imp.fresh(f"{b}_w"), np.ascontiguousarray(bmat.T))
        bn = imp.graph.add_constant(imp.fresh(f"{b}_b"), np.zeros(bmat.shape[1], np.float32))
        imp.emit(node, "dense", [a, wn, bn], {"clip": None})
    else:
        imp.emit(node, "matmul", [a, b], {})


def _clip(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"min": None, "max": None})
    lo, hi = a["min"], a["max"]
    for idx in (1, 2):
        if len(node.input) > idx and node.input[idx]:
            v = imp.const(node.input[idx])
            if v is None:
                raise imp.fail(node, "min/max must be constants; computed bounds are not supported")
            if idx == 1:
                lo = float(v)
            else:
                hi = float(v)
    lo = float("-inf") if lo is None else float(lo)
    hi = float("inf") if hi is None else float(hi)
    imp.emit(node, "clip", [node.input[0]], {"min": lo, "max": hi})


def _batch_norm(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1})
    if a["training_mode"] or a["spatial"] != 1 or len(node.output) > 1:
        raise imp.fail(node, "only inference mode (training_mode=0, spatial=1, 1 output)")
    if any(imp.const(i) is None for i in node.input[1:]):
        raise imp.fail(node, "scale, B, mean and var must be constants")
    x_shape = imp.shape(node.input[0])
    channels = x_shape[1] if len(x_shape) > 1 else None
    shapes = [imp.const(i).shape for i in node.input[1:]]
    if any(s != (channels,) for s in shapes):
        raise imp.fail(
            node, f"scale, B, mean, var have shapes {shapes} (allowed: ({channels},) each)"
        )
    imp.emit(node, "batch_norm", list(node.input), {"epsilon": float(a["epsilon"])})


def _pool(imp: _Importer, node, op: str) -> None:
    extra = {"ceil_mode": 0, "dilations": None}
    if op == "max_pool":
        extra["storage_order"] = 0
    else:
        extra["count_include_pad"] = 0
    a = _window_attrs(imp, node, extra)
    if len(node.output) > 1 and node.output[1]:
        raise imp.fail(node, "the Indices output is not supported")
    if a.get("storage_order", 0):
        raise imp.fail(node, "storage_order=1 not supported (supported: 0)")
    attrs = {"kernel": _ints(a["kernel_shape"]), "strides": a["strides"], "pads": a["pads"]}
    if op == "avg_pool":
        attrs["count_include_pad"] = int(a["count_include_pad"])
    imp.emit(node, op, [node.input[0]], attrs)


def _axis(imp, node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank + (node.op_type == "Flatten"):
        raise imp.fail(node, f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _flatten(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"axis": 1})
    rank = len(imp.shape(node.input[0]))
    imp.emit(node, "flatten", [node.input[0]], {"axis": _axis(imp, node, a["axis"], rank)})


def _reshape(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"allowzero": 0})
    shape = imp.const(node.input[1])
    if shape is None:
        raise imp.fail(node, "the shape input must be a constant")
    if a["allowzero"]:
        raise imp.fail(node, "allowzero=1 not supported (supported: 0)")
    src = imp.shape(node.input[0])
    dims = [src[i] if d == 0 else int(d) for i, d in enumerate(shape.reshape(-1))]
    if dims.count(-1) > 1:
        raise imp.fail(node, f"shape {dims} has more than one -1")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = int(np.prod(src)) // known
    imp.emit(node, "reshape", [node.input[0]], {"shape": dims})


def _concat(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"axis": None})
    rank = len(imp.shape(node.input[0]))
    imp.emit(node, "concat", list(node.input), {"axis": _axis(imp, node, a["axis"], rank)})


def _softmax(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"axis": -1 if imp.opset >= 13 else 1})
    rank = len(imp.shape(node.input[0]))
    axis = _axis(imp, node, a["axis"], rank)
    if imp.opset < 13 and axis != rank - 1:
        raise imp.fail(node, f"opset {imp.opset} softmax over axes {axis}.. (supported: last axis)")
    imp.emit(node, "softmax", [node.input[0]], {"axis": axis})


def _simple(op: str):
    def convert(imp: _Importer, node) -> None:
        imp.attrs(node, {})
        imp.emit(node, op, list(node.input), {})

    return convert


def _constant(imp: _Importer, node) -> None:
    a = imp.attrs(node, {"value": None})
    if a["value"] is None:
        raise imp.fail(node, "only the 'value' attribute is supported")
    imp.graph.add_constant(node.output[0], numpy_helper.to_array(a["value"]))


CONVERTERS = {
    "Conv": _conv,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Relu": _simple("relu"),
    "Clip": _clip,
    "Add": _simple("add"),
    "Mul": _simple("mul"),
    "BatchNormalization": _batch_norm,
    "MaxPool": lambda imp, n: _pool(imp, n, "max_pool"),
    "AveragePool": lambda imp, n: _pool(imp, n, "avg_pool"),
    "GlobalAveragePool": _simple("global_avg_pool"),
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Concat": _concat,
    "Softmax": _softmax,
    "Identity": _simple("identity"),
    "Constant": _constant,
}
SUPPORTED_OPS = tuple(sorted(CONVERTERS))
# (fewest, most) inputs of each op; None: any number
ARITY = {
    "Conv": (2, 3), "Gemm": (2, 3), "MatMul": (2, 2), "Relu": (1, 1), "Clip": (1, 3),
    "Add": (2, 2), "Mul": (2, 2), "BatchNormalization": (5, 5), "MaxPool": (1, 1),
    "AveragePool": (1, 1), "GlobalAveragePool": (1, 1), "Flatten": (1, 1), "Reshape": (2, 2),
    "Concat": (1, None), "Softmax": (1, 1), "Identity": (1, 1), "Constant": (0, 0),
}  # fmt: skip


def _static_shape(vi, overrides: dict) -> tuple[int, ...]:
    if vi.name in overrides:
        return tuple(overrides[vi.name])
    dims = vi.type.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        raise OnnxImportError(
            f"input {vi.name!r} has a symbolic shape {[d.dim_param or d.dim_value for d in dims]};"
            f" give it fixed dimensions (pyvta run/compile --input-shape {vi.name}=1,3,224,224;"
            f" import_onnx(..., input_shapes={{{vi.name!r}: (1, 3, 224, 224)}}))"
        )
    shape = tuple(int(d.dim_value) for d in dims)
    if any(d < 1 for d in shape):
        raise OnnxImportError(f"input {vi.name!r} has shape {shape} (every dimension must be >= 1)")
    return shape


def load_onnx(path: str | Path) -> onnx.ModelProto:
    """Read an ONNX file; a missing, empty or unparsable file raises :class:`OnnxImportError`."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise OnnxImportError(f"{path}: {what} (expected an ONNX model file)")
    if path.stat().st_size == 0:
        raise OnnxImportError(f"{path}: the file is empty (0 bytes), not an ONNX model")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf DecodeError, external-data OSError, ...
        raise OnnxImportError(
            f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})"
        ) from exc
    if not model.graph.node or not model.graph.output:
        raise OnnxImportError(
            f"{path}: the ONNX graph has {len(model.graph.node)} nodes and"
            f" {len(model.graph.output)} outputs (a model needs at least one of each)"
        )
    return model


def import_onnx(model: onnx.ModelProto | str | Path, input_shapes: dict | None = None) -> Graph:
    """Convert an ONNX model (or a path to one) to a graph IR (float32, NCHW)."""
    if not isinstance(model, onnx.ModelProto):
        model = load_onnx(model)
    imp = _Importer(model)
    g = imp.graph
    for init in model.graph.initializer:
        g.add_constant(init.name, _initializer(init))
    for vi in model.graph.input:
        if vi.name in g.constants:
            continue
        if vi.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise OnnxImportError(f"input {vi.name!r} is not float32 (supported: float32)")
        g.inputs.append(vi.name)
        g.values[vi.name] = Value(vi.name, _static_shape(vi, input_shapes or {}), "float32")
    for node in model.graph.node:
        _convert_node(imp, node)
    g.outputs = [o.name for o in model.graph.output]
    undefined = [o for o in g.outputs if o not in g.values]
    if undefined:
        raise OnnxImportError(f"graph outputs {undefined} are not produced by any node or input")
    huge = next((v for v in g.values.values() if math.prod(v.shape) > MAX_TENSOR_ELEMS), None)
    if huge is not None:
        raise OnnxImportError(
            f"tensor {huge.name!r} of shape {list(huge.shape)} has {math.prod(huge.shape)}"
            f" elements (supported: up to {MAX_TENSOR_ELEMS} = 2**{MAX_TENSOR_ELEMS.bit_length() - 1})"
        )
    return g


def _initializer(init) -> np.ndarray:
    try:
        arr = numpy_helper.to_array(init)
    except Exception as exc:  # truncated raw_data, unknown data_type, ...
        raise OnnxImportError(f"initializer {init.name!r} is malformed: {exc}") from exc
    if arr.dtype not in (np.float32, np.int64):
        raise OnnxImportError(f"initializer {init.name!r} has dtype {arr.dtype} (float32/int64)")
    return arr


def _convert_node(imp: _Importer, node) -> None:
    g = imp.graph
    if node.domain not in ("", "ai.onnx"):
        raise OnnxImportError(f"node {node.name!r}: domain {node.domain!r} (supported: ai.onnx)")
    convert = CONVERTERS.get(node.op_type)
    if convert is None:
        raise OnnxImportError(
            f"node {node.name!r}: op {node.op_type!r} is not supported "
            f"(supported: {', '.join(SUPPORTED_OPS)})"
        )
    lo, hi = ARITY[node.op_type]
    if not lo <= len(node.input) <= (hi if hi is not None else len(node.input)):
        allowed = f"{lo}" if lo == hi else f"{lo} to {hi if hi is not None else 'any'}"
        raise imp.fail(node, f"{len(node.input)} inputs (allowed: {allowed})")
    for name in node.input:
        if name and name not in g.values:
            raise imp.fail(node, f"input {name!r} is not defined")
    if not node.output:
        raise imp.fail(node, "the node has no outputs")
    try:
        convert(imp, node)
    except PyvtaError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
        # a malformed node (missing inputs, wrong attribute types, inconsistent shapes)
        raise imp.fail(node, f"malformed node ({type(exc).__name__}: {exc})") from exc
