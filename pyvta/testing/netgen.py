"""Seeded random ONNX networks of the kinds users bring, for tests and benchmarks.

``random_network(seed)`` draws a small CNN: a stem conv (kernel 3/5/7, stride 1-2, symmetric or
TF-SAME-like asymmetric pads), then 2-5 blocks drawn from plain convs (kernel 1/3/5/7, dilation
1-3), residual pairs (identity or 1x1 projection shortcut), bottlenecks (1x1-3x3-1x1 + add),
two-branch concats, grouped convs (2, 4; with ``narrow_groups``, half of them groups of 2, 4
or 8 channels, as ResNeXt's), depthwise + pointwise pairs and pools (MaxPool,
AveragePool, with asymmetric pads sometimes), then GlobalAveragePool, Flatten and a Gemm
classifier. Channels are 3-200, mostly not multiples of 16; batch 1 or 4; inputs 16-224
(mostly 16-64, and the channel cap shrinks as the input grows, so every network stays small).

Weights are He-initialised. The classifier is normalised on seeded sample inputs (onnxruntime
runs the body once, as the zoo does with its own kernels): its weights are divided by the
pooled features' root-mean standard deviation and its bias cancels their mean, so the logits
vary with the input rather than being a constant plus noise (a cosine against them means
something). Inputs: ``sample_input(model, seed)``, standard normal float32.

``features(model)`` is the set of features a model uses (read back from the ONNX graph, not
from the generator's choices); ``describe(model)`` a one-line summary.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from pyvta.compiler.graph.zoo import float_model

FEATURES = (
    "batch4", "large_input", "k1", "k3", "k5", "k7", "stride2", "asym_pad", "dilation",
    "group", "depthwise", "residual", "bottleneck", "concat", "relu", "max_pool", "avg_pool",
    "global_avg_pool", "gemm", "odd_channels", "narrow_group",
)  # fmt: skip
NARROW_WIDTHS = (2, 4, 8)  # channels a group with ``narrow_groups``: they divide a vector block


def _same_pads(size: int, k: int, stride: int, dil: int) -> list[int]:
    """TF "SAME" pads (the extra one at the end): output ceil(size / stride)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dil + 1 - size, 0)
    lo = total // 2
    return [lo, lo, total - lo, total - lo]


class _Gen:
    def __init__(self, seed: int, batch: int, size: int, max_ch: int, narrow: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        # its own stream: without narrow groups, the networks are those of before
        self.narrow = np.random.default_rng([seed, 2]) if narrow else None
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.shape = {"input": (batch, 3, size, size)}
        self.max_ch = max_ch
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def channels(self, lo: int = 3) -> int:
        """3..max_ch, a multiple of 16 one time in five."""
        c = int(self.rng.integers(max(lo, 3), self.max_ch + 1))
        if self.rng.random() < 0.2:
            c = max(16, c // 16 * 16)
        return c

    def conv(
        self, x: str, out_ch: int, k: int, stride: int = 1, dil: int = 1, group: int = 1,
        same: bool | None = None, gain: float = 1.0,
    ) -> str:  # fmt: skip
        n, c, h, w = self.shape[x]
        if same is None:
            same = stride > 1 and self.rng.random() < 0.5
        pads = _same_pads(h, k, stride, dil) if same else [dil * (k - 1) // 2] * 4
        fan_in = c // group * k * k
        wt = self.rng.standard_normal((out_ch, c // group, k, k)) * gain * np.sqrt(2.0 / fan_in)
        b = 0.1 * self.rng.standard_normal(out_ch)
        y = self._name("conv")
        self.inits[f"{y}.weight"] = wt.astype(np.float32)
        self.inits[f"{y}.bias"] = b.astype(np.float32)
        self.nodes.append(
            helper.make_node(
                "Conv", [x, f"{y}.weight", f"{y}.bias"], [y], name=y, kernel_shape=[k, k],
                strides=[stride] * 2, pads=pads, dilations=[dil] * 2, group=group,
            )
        )  # fmt: skip
        span = dil * (k - 1) + 1
        oh = (h + pads[0] + pads[2] - span) // stride + 1
        ow = (w + pads[1] + pads[3] - span) // stride + 1
        self.shape[y] = (n, out_ch, oh, ow)
        return y

    def op(self, kind: str, inputs: list[str], shape: tuple[int, ...], **attrs) -> str:
        y = self._name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [y], name=y, **attrs))
        self.shape[y] = shape
        return y

    def relu(self, x: str) -> str:
        return self.op("Relu", [x], self.shape[x])

    def pool(self, x: str) -> str:
        n, c, h, w = self.shape[x]
        kind = "MaxPool" if self.rng.random() < 0.6 else "AveragePool"
        k = int(self.rng.choice([2, 3]))
        stride = 2 if h >= 8 else 1
        same = self.rng.random() < 0.5
        pads = _same_pads(h, k, stride, 1) if same else [(k - 1) // 2] * 4
        oh = (h + pads[0] + pads[2] - k) // stride + 1
        ow = (w + pads[1] + pads[3] - k) // stride + 1
        attrs = {"kernel_shape": [k, k], "strides": [stride] * 2, "pads": pads}
        if kind == "AveragePool":
            attrs["count_include_pad"] = int(self.rng.integers(0, 2))
        return self.op(kind, [x], (n, c, oh, ow), **attrs)

    # blocks: each takes and returns one tensor name
    def plain(self, x: str) -> str:
        k = int(self.rng.choice([1, 3, 5, 7], p=[0.25, 0.45, 0.2, 0.1]))
        dil = int(self.rng.choice([1, 2, 3], p=[0.6, 0.25, 0.15])) if k > 1 else 1
        stride = int(self.rng.choice([1, 2])) if self.shape[x][2] >= 8 and dil == 1 else 1
        return self.relu(self.conv(x, self.channels(), k, stride, dil))

    def residual(self, x: str) -> str:
        c = self.shape[x][1]
        stride = 2 if self.shape[x][2] >= 8 and self.rng.random() < 0.4 else 1
        out = c if stride == 1 and self.rng.random() < 0.5 else self.channels()
        h = self.relu(self.conv(x, out, 3, stride))
        h = self.conv(h, out, 3, 1, gain=0.5)
        short = x if (out == c and stride == 1) else self.conv(x, out, 1, stride, same=False)
        return self.relu(self.op("Add", [h, short], self.shape[h]))

    def bottleneck(self, x: str) -> str:
        c = self.shape[x][1]
        mid = max(3, int(self.rng.integers(max(3, c // 4), max(4, c // 2 + 1))))
        h = self.relu(self.conv(x, mid, 1))
        h = self.relu(self.conv(h, mid, 3))
        h = self.conv(h, c, 1, gain=0.5)
        return self.relu(self.op("Add", [h, x], self.shape[x]))

    def concat(self, x: str) -> str:
        a = self.relu(self.conv(x, self.channels(), 1))
        b = self.relu(self.conv(x, self.channels(), int(self.rng.choice([3, 5]))))
        n, ca, h, w = self.shape[a]
        return self.op("Concat", [a, b], (n, ca + self.shape[b][1], h, w), axis=1)

    def grouped(self, x: str) -> str:
        if self.narrow is not None and self.narrow.random() < 0.5:
            return self.narrow_grouped(x)
        group = int(self.rng.choice([2, 4]))
        c = self.shape[x][1]
        if c % group:  # a 1x1 conv to a channel count the groups divide (at least 4)
            x = self.relu(self.conv(x, max(4, c // group * group), 1))
        out = group * int(self.rng.integers(4 // group, max(3, self.max_ch // group + 1)))
        return self.relu(self.conv(x, out, 3, 1, group=group))

    def narrow_grouped(self, x: str) -> str:
        """A 3x3 conv of groups ``NARROW_WIDTHS`` wide, as many channels out as in (after a
        1x1 conv to a count they divide: a multiple of 16 one time in two)."""
        width = int(self.narrow.choice(NARROW_WIDTHS))
        c = self.shape[x][1]
        step = 16 if self.narrow.random() < 0.5 else width
        cn = max(2 * step, c // step * step)
        if cn != c:
            x = self.relu(self.conv(x, cn, 1))
        stride = 2 if self.shape[x][2] >= 8 and self.narrow.random() < 0.3 else 1
        return self.relu(self.conv(x, cn, 3, stride, group=cn // width))

    def depthwise(self, x: str) -> str:
        c = self.shape[x][1]
        stride = 2 if self.shape[x][2] >= 8 and self.rng.random() < 0.4 else 1
        h = self.relu(self.conv(x, c, 3, stride, group=c))
        return self.relu(self.conv(h, self.channels(), 1))


BLOCKS = ("plain", "residual", "bottleneck", "concat", "grouped", "depthwise", "pool")


def _size_and_cap(rng: np.random.Generator) -> tuple[int, int]:
    r = rng.random()
    if r < 0.85:
        size = int(rng.integers(16, 65))
        return size, 200 if size <= 32 else 96
    size = int(rng.integers(65, 225))
    return size, 48 if size <= 128 else 24


def random_network(
    seed: int,
    batch: int | None = None,
    size: int | None = None,
    blocks: int | None = None,
    narrow_groups: bool = False,
) -> onnx.ModelProto:
    """A seeded random CNN (see the module docstring): input ``"input"`` float32
    ``[batch, 3, size, size]``, output ``"logits"`` ``[batch, classes]``. ``batch`` (1 or 4),
    ``size`` and ``blocks`` (count) are drawn from the seed unless given; giving one leaves the
    other draws as they were (``batch=1`` keeps a batch-4 network's layers). ``narrow_groups``:
    half the grouped blocks have groups of ``NARROW_WIDTHS`` channels (drawn from a stream of
    their own: without it, each seed's network is the one it always was)."""
    rng = np.random.default_rng(seed)
    drawn_size, cap = _size_and_cap(rng)
    drawn_batch, drawn_blocks = (4 if rng.random() < 0.25 else 1), int(rng.integers(2, 6))
    size, batch, nblocks = size or drawn_size, batch or drawn_batch, blocks or drawn_blocks
    g = _Gen(seed + 7919, batch, size, cap, narrow_groups)
    k = int(rng.choice([3, 5, 7]))
    x = g.relu(g.conv("input", g.channels(8), k, 2 if size > 32 else int(rng.integers(1, 3))))
    if size > 64:
        x = g.pool(x)
    for _ in range(nblocks):
        kind = str(rng.choice(BLOCKS, p=[0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.1]))
        if kind == "pool" and g.shape[x][2] < 4:
            kind = "plain"
        x = getattr(g, kind)(x)
    classes = int(rng.integers(5, 101))
    n, c = g.shape[x][:2]
    gap = g.op("GlobalAveragePool", [x], (n, c, 1, 1))
    flat = g.op("Flatten", [gap], (n, c), axis=1)
    w, b = _classifier(g, flat, classes, seed)
    g.inits["fc.weight"], g.inits["fc.bias"] = w, b
    g.nodes.append(
        helper.make_node("Gemm", [flat, "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1)
    )
    m = float_model(
        g.nodes, {"input": g.shape["input"]}, {"logits": (n, classes)}, g.inits,
        name=f"netgen{seed}",
    )  # fmt: skip
    onnx.checker.check_model(m)
    return m


def _classifier(g: _Gen, flat: str, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gemm weights ``(classes, features)`` and bias normalised on the features of 4 seeded
    samples (onnxruntime runs the body up to ``flat``)."""
    from pyvta.compiler.graph.reference import run_onnxruntime

    body = float_model(g.nodes, {"input": g.shape["input"]}, {flat: g.shape[flat]}, g.inits)
    feats = np.concatenate(
        [run_onnxruntime(body, {"input": sample_input(body, seed + 1 + i)})[0] for i in range(4)]
    )
    mean, std = feats.mean(axis=0), float(np.sqrt(feats.var(axis=0).mean())) + 1e-6
    w = g.rng.standard_normal((classes, feats.shape[1])) / np.sqrt(feats.shape[1]) / std
    return w.astype(np.float32), (-(w @ mean)).astype(np.float32)


def sample_input(model: onnx.ModelProto, seed: int) -> np.ndarray:
    """A seeded standard-normal input of the model's input shape (float32)."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = tuple(d.dim_value for d in dims)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _attr(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _conv_stats(model: onnx.ModelProto) -> tuple[list[onnx.NodeProto], dict[str, tuple]]:
    shapes = {i.name: i.dims for i in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "Conv"], shapes


def narrow_group_convs(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The model's grouped convs whose groups (as wide in as out) are narrower than a vector
    block of 16 and divide it: 2, 4 or 8 channels (``NARROW_WIDTHS``)."""
    convs, shapes = _conv_stats(model)
    out = []
    for n in convs:
        o, cg = shapes[n.input[1]][:2]
        group = _attr(n, "group", 1)
        if group > 1 and cg in NARROW_WIDTHS and o == group * cg:
            out.append(n)
    return out


def features(model: onnx.ModelProto) -> set[str]:
    """The features (names in ``FEATURES``) the model's graph uses."""
    convs, shapes = _conv_stats(model)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    out = set()
    if dims[0] > 1:
        out.add("batch4")
    if dims[2] > 64:
        out.add("large_input")
    ops = {n.op_type for n in model.graph.node}
    names = {"Relu": "relu", "MaxPool": "max_pool", "AveragePool": "avg_pool", "Gemm": "gemm"}
    names |= {"GlobalAveragePool": "global_avg_pool", "Concat": "concat"}
    out |= {v for k, v in names.items() if k in ops}
    if "Add" in ops:
        out.add("residual")
    for n in model.graph.node:
        pads = list(_attr(n, "pads", [0, 0, 0, 0]))
        if n.op_type in ("Conv", "MaxPool", "AveragePool") and pads[:2] != pads[2:]:
            out.add("asym_pad")
        if n.op_type in ("Conv", "MaxPool", "AveragePool") and max(_attr(n, "strides", [1])) > 1:
            out.add("stride2")
    for i, n in enumerate(convs):
        o, cg, k = shapes[n.input[1]][:3]
        out.add(f"k{k}")
        if max(_attr(n, "dilations", [1])) > 1:
            out.add("dilation")
        group = _attr(n, "group", 1)
        if group > 1:
            out.add("depthwise" if cg == 1 and group == o else "group")
        if n in narrow_group_convs(model):
            out.add("narrow_group")
        if o % 16:
            out.add("odd_channels")
        later = convs[i + 1 : i + 3]
        if k == 1 and len(later) == 2:
            k2, k3 = (shapes[c.input[1]][2] for c in later)
            if (k2, k3) == (3, 1) and any(
                m.op_type == "Add" and later[1].output[0] in m.input for m in model.graph.node
            ):
                out.add("bottleneck")
    return out


def describe(model: onnx.ModelProto) -> str:
    """One line: name, input shape, layer and conv counts, conv channels, features."""
    convs, shapes = _conv_stats(model)
    dims = "x".join(str(d.dim_value) for d in model.graph.input[0].type.tensor_type.shape.dim)
    chans = [int(shapes[n.input[1]][0]) for n in convs]
    span = f"ch {min(chans)}-{max(chans)}" if chans else "no convs"
    feats = ",".join(f for f in FEATURES if f in features(model))
    return (
        f"{model.graph.name}: input {dims}, {len(model.graph.node)} nodes, {len(convs)} convs,"
        f" {span}; {feats}"
    )
