"""Model zoo built in code: ResNet-18/34 and a MobileNet-v1-style net as ONNX models.

Weights are seeded (He-initialised convs). Batch-norm statistics are set from seeded sample
inputs: the builder runs the float network layer by layer on the samples (numpy kernels) and
gives every BatchNormalization the per-channel mean/variance of the activations it sees, so
activations stay normalised at any depth. The classifier is made input-dependent the same way:
its weights are divided by the pooled features' (root mean) standard deviation and its bias
cancels their per-feature mean, so the logits are not dominated by a constant (top-1 varies across inputs).
Inputs are ``float32[batch, 3, size, size]`` drawn from a standard normal distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pyvta.runtime import cpu_ops

OPSET = 17
IR_VERSION = 8


def float_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, ...]],
    outputs: dict[str, tuple[int, ...] | None],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = OPSET,
    name: str = "model",
) -> onnx.ModelProto:
    """An ONNX model of ``nodes``: ``inputs`` and ``outputs`` map names to float32 shapes (None:
    unknown), ``inits`` names to initialiser arrays (any dtype)."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return model


class _NetBuilder:
    """Emits ONNX nodes and tracks the float activations of the sample inputs alongside."""

    def __init__(self, name: str, samples: np.ndarray, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.acts: dict[str, np.ndarray] = {"input": samples}
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def _init(self, name: str, a: np.ndarray) -> str:
        self.inits[name] = np.asarray(a)
        return name

    def conv(self, x: str, out_ch: int, k: int, stride: int, group: int = 1) -> str:
        c = self.acts[x].shape[1]
        fan_in = c // group * k * k
        w = self.rng.standard_normal((out_ch, c // group, k, k)) * np.sqrt(2.0 / fan_in)
        w = w.astype(np.float32)
        y = self._name("conv")
        pads = [k // 2] * 4
        self.nodes.append(
            helper.make_node(
                "Conv", [x, self._init(f"{y}.weight", w)], [y], name=y,
                kernel_shape=[k, k], strides=[stride, stride], pads=pads, group=group,
            )
        )  # fmt: skip
        attrs = {"strides": [stride] * 2, "pads": pads, "dilations": [1, 1], "group": group}
        self.acts[y] = cpu_ops.conv2d([self.acts[x], w, np.zeros(out_ch, np.float32)], attrs)
        return y

    def bn(self, x: str, gamma_range: tuple[float, float] = (0.8, 1.2)) -> str:
        a = self.acts[x]
        mean = a.mean(axis=(0, 2, 3)).astype(np.float32)
        var = a.var(axis=(0, 2, 3)).astype(np.float32)
        c = a.shape[1]
        gamma = self.rng.uniform(*gamma_range, c).astype(np.float32)
        beta = (0.1 * self.rng.standard_normal(c)).astype(np.float32)
        y = self._name("bn")
        ins = [x] + [
            self._init(f"{y}.{k}", v)
            for k, v in (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var))
        ]
        self.nodes.append(helper.make_node("BatchNormalization", ins, [y], name=y, epsilon=1e-5))
        self.acts[y] = cpu_ops.batch_norm([a, gamma, beta, mean, var], {"epsilon": 1e-5})
        return y

    def relu(self, x: str) -> str:
        y = self._name("relu")
        self.nodes.append(helper.make_node("Relu", [x], [y], name=y))
        self.acts[y] = np.maximum(self.acts[x], 0)
        return y

    def relu6(self, x: str) -> str:
        y = self._name("relu6")
        lo = self._init(f"{y}.min", np.array(0.0, np.float32))
        hi = self._init(f"{y}.max", np.array(6.0, np.float32))
        self.nodes.append(helper.make_node("Clip", [x, lo, hi], [y], name=y))
        self.acts[y] = np.clip(self.acts[x], 0, 6)
        return y

    def add(self, a: str, b: str) -> str:
        y = self._name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [y], name=y))
        self.acts[y] = self.acts[a] + self.acts[b]
        return y

    def max_pool(self, x: str) -> str:
        y = self._name("maxpool")
        self.nodes.append(
            helper.make_node(
                "MaxPool", [x], [y], name=y, kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
            )
        )
        attrs = {"kernel": [3, 3], "strides": [2, 2], "pads": [1] * 4}
        self.acts[y] = cpu_ops.max_pool([self.acts[x]], attrs)
        return y

    def classifier(self, x: str, classes: int) -> str:
        """GlobalAveragePool -> Flatten -> Gemm, normalised on the sample features."""
        gap, flat, y = "pool", "flatten", "logits"
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], [gap], name=gap))
        self.nodes.append(helper.make_node("Flatten", [gap], [flat], name=flat, axis=1))
        f = self.acts[x].mean(axis=(2, 3))
        mean, std = f.mean(axis=0), float(np.sqrt(f.var(axis=0).mean())) + 1e-6
        w = self.rng.standard_normal((classes, f.shape[1])) / np.sqrt(f.shape[1]) / std
        b = -(w @ mean)
        ins = [flat, self._init("fc.weight", w.astype(np.float32))]
        ins.append(self._init("fc.bias", b.astype(np.float32)))
        self.nodes.append(helper.make_node("Gemm", ins, [y], name="fc", transB=1))
        return y

    def model(self, batch: int, size: int, classes: int) -> onnx.ModelProto:
        inputs, outputs = {"input": (batch, 3, size, size)}, {"logits": (batch, classes)}
        m = float_model(self.nodes, inputs, outputs, self.inits, name=self.name)
        onnx.checker.check_model(m)
        return m


def sample_inputs(count: int, size: int, seed: int, batch: int = 1) -> list[np.ndarray]:
    """``count`` seeded standard-normal inputs of shape ``(batch, 3, size, size)``."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, 3, size, size)).astype(np.float32) for _ in range(count)]


def _stat_samples(size: int, seed: int, count: int) -> np.ndarray:
    return np.concatenate(sample_inputs(count, size, seed + 1_000_003))


def resnet(
    depth: int = 18,
    size: int = 224,
    classes: int = 1000,
    width: int = 64,
    seed: int = 0,
    stat_samples: int = 8,
    residual_gamma: tuple[float, float] = (0.2, 0.5),
) -> onnx.ModelProto:
    """ResNet-18 (``depth=18``) or ResNet-34 (``depth=34``) with basic blocks.

    ``width`` is the first stage's channel count (64 in the paper; stages double it). The last
    batch norm of each residual branch draws its scale from ``residual_gamma`` (small, as in
    trained ResNets and zero-gamma initialisation), so the identity path dominates and the
    random network is not chaotic (tiny input changes do not flip its output)."""
    blocks = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}
    if depth not in blocks:
        raise ValueError(f"depth {depth} is not supported (allowed: 18, 34)")
    nb = _NetBuilder(f"resnet{depth}", _stat_samples(size, seed, stat_samples), seed)

    def basic(x: str, stage: int, stride: int) -> str:
        ch = width * 2**stage
        h = nb.relu(nb.bn(nb.conv(x, ch, 3, stride)))
        return nb.bn(nb.conv(h, ch, 3, 1), residual_gamma)

    x = _residual_stages(nb, _resnet_stem(nb, width), blocks[depth], lambda s: width * 2**s, basic)
    nb.classifier(x, classes)
    return nb.model(1, size, classes)


def _resnet_stem(nb: _NetBuilder, width: int) -> str:
    """7x7 stride-2 conv of ``width`` channels, batch norm, relu, 3x3 stride-2 max pool."""
    return nb.max_pool(nb.relu(nb.bn(nb.conv("input", width, 7, 2))))


def _residual_stages(nb: _NetBuilder, x: str, blocks, out_of, branch, first_stride: int = 1) -> str:
    """A residual network's stages after its stem: ``blocks[stage]`` blocks of ``out_of(stage)``
    channels, the first of each stage of stride 2 (of the first stage ``first_stride``), each
    the sum of ``branch(x, stage, stride)`` and the input (through a 1x1 conv and batch norm
    where the shape changes), then relu."""
    for stage, count in enumerate(blocks):
        out = out_of(stage)
        for i in range(count):
            stride = (2 if stage > 0 else first_stride) if i == 0 else 1
            shortcut = x
            if stride != 1 or nb.acts[x].shape[1] != out:
                shortcut = nb.bn(nb.conv(x, out, 1, stride))
            x = nb.relu(nb.add(branch(x, stage, stride), shortcut))
    return x


def mobilenet(
    size: int = 224, classes: int = 1000, width: int = 32, seed: int = 0, stat_samples: int = 8
) -> onnx.ModelProto:
    """MobileNet-v1 style: 3x3 stem, 13 (depthwise 3x3 + pointwise 1x1) blocks, relu6 (Clip).

    On VTA (whole partition) the depthwise convs run as block-diagonal GEMMs, the pointwise ones
    as GEMMs; ``--partition legacy`` keeps the depthwise convs on the CPU."""
    nb = _NetBuilder("mobilenet", _stat_samples(size, seed, stat_samples), seed)
    x = nb.relu6(nb.bn(nb.conv("input", width, 3, 2)))
    plan = [(2, 1), (4, 2), (4, 1), (8, 2), (8, 1), (16, 2)] + [(16, 1)] * 5 + [(32, 2), (32, 1)]
    for mult, stride in plan:
        c = nb.acts[x].shape[1]
        x = nb.relu6(nb.bn(nb.conv(x, c, 3, stride, group=c)))
        x = nb.relu6(nb.bn(nb.conv(x, width * mult, 1, 1)))
    nb.classifier(x, classes)
    return nb.model(1, size, classes)


# MobileNetV2 (Sandler et al., 2018): per stage of inverted residuals its expansion, output
# channels, blocks and the first block's stride
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip


def mobilenet_v2(
    size: int = 224,
    classes: int = 1000,
    seed: int = 0,
    stat_samples: int = 8,
    residual_gamma: tuple[float, float] = (0.2, 0.5),
) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): a 3x3 stride-2 stem of 32 channels, then ``MOBILENET_V2``'s
    inverted residuals (1x1 expansion, 3x3 depthwise with the stride, relu6 after both, a linear
    1x1 projection; the input added where the shape stays), a 1x1 conv to 1280 channels and the
    classifier. Its channel counts (24, 144, 96, 576, 160, 960, 320) are not powers of two. Where
    the input is added, the projection's batch norm draws its scale from ``residual_gamma`` (as
    :func:`resnet`'s)."""
    nb = _NetBuilder("mobilenet_v2", _stat_samples(size, seed, stat_samples), seed)
    x = nb.relu6(nb.bn(nb.conv("input", 32, 3, 2)))
    for expand, out, count, first_stride in MOBILENET_V2:
        for i in range(count):
            stride = first_stride if i == 0 else 1
            c = nb.acts[x].shape[1]
            h = x if expand == 1 else nb.relu6(nb.bn(nb.conv(x, c * expand, 1, 1)))
            h = nb.relu6(nb.bn(nb.conv(h, c * expand, 3, stride, group=c * expand)))
            keep = stride == 1 and c == out
            h = nb.bn(nb.conv(h, out, 1, 1), residual_gamma if keep else (0.8, 1.2))
            x = nb.add(h, x) if keep else h
    x = nb.relu6(nb.bn(nb.conv(x, 1280, 1, 1)))
    nb.classifier(x, classes)
    return nb.model(1, size, classes)


def resnext(
    depth: int = 50,
    size: int = 224,
    classes: int = 1000,
    width: int = 64,
    groups: int = 32,
    group_width: int = 4,
    seed: int = 0,
    stat_samples: int = 8,
    residual_gamma: tuple[float, float] = (0.2, 0.5),
) -> onnx.ModelProto:
    """ResNeXt-50 (``depth=50``, 32x4d) or ResNeXt-26 (``depth=26``): bottleneck blocks whose
    3x3 conv is grouped, ``groups`` groups of ``group_width`` channels in the first stage (128
    channels), doubling each stage; the stride on the 3x3 conv; blocks widen ``width`` x 4 x
    2^stage. The residual branch's last batch norm as in :func:`resnet`."""
    blocks = {26: (2, 2, 2, 2), 50: (3, 4, 6, 3)}
    if depth not in blocks:
        raise ValueError(f"depth {depth} is not supported (allowed: 26, 50)")
    nb = _NetBuilder(f"resnext{depth}", _stat_samples(size, seed, stat_samples), seed)

    def bottleneck(x: str, stage: int, stride: int) -> str:
        mid = groups * group_width * 2**stage
        h = nb.relu(nb.bn(nb.conv(x, mid, 1, 1)))
        h = nb.relu(nb.bn(nb.conv(h, mid, 3, stride, group=groups)))
        return nb.bn(nb.conv(h, width * 4 * 2**stage, 1, 1), residual_gamma)

    stages = blocks[depth]
    x = _residual_stages(
        nb, _resnet_stem(nb, width), stages, lambda s: width * 4 * 2**s, bottleneck
    )
    nb.classifier(x, classes)
    return nb.model(1, size, classes)


# RegNetX (Radosavovic et al., 2020; pycls's RegNetX-400MF and -600MF): blocks per stage,
# each stage's width and the width of one group of its 3x3 convs
REGNETX = {
    "400mf": ((1, 2, 7, 12), (32, 64, 160, 384), 16),
    "600mf": ((1, 3, 5, 7), (48, 96, 240, 528), 24),
    "4.0gf": ((2, 5, 14, 2), (80, 240, 560, 1360), 40),
}


def regnetx(
    flops: str = "600mf",
    size: int = 224,
    classes: int = 1000,
    seed: int = 0,
    stat_samples: int = 8,
    residual_gamma: tuple[float, float] = (0.2, 0.5),
    stem: int = 32,
) -> onnx.ModelProto:
    """RegNetX (``flops``: a key of ``REGNETX``): a 3x3 stride-2 stem of ``stem`` channels, then
    stages of X blocks (1x1 conv, 3x3 conv in groups of the stage's group width with the stride,
    1x1 conv; bottleneck ratio 1), the first block of each stage of stride 2. Its stage widths
    are not powers of two (RegNetX-600MF: 48, 96, 240, 528 channels in groups of 24, which
    straddle channel blocks of 16). The residual branch's last batch norm as in :func:`resnet`."""
    if flops not in REGNETX:
        raise ValueError(f"RegNetX-{flops} is not supported (allowed: {', '.join(REGNETX)})")
    depths, widths, group_width = REGNETX[flops]
    nb = _NetBuilder(f"regnetx{flops}", _stat_samples(size, seed, stat_samples), seed)

    def block(x: str, stage: int, stride: int) -> str:
        w = widths[stage]
        h = nb.relu(nb.bn(nb.conv(x, w, 1, 1)))
        h = nb.relu(nb.bn(nb.conv(h, w, 3, stride, group=w // group_width)))
        return nb.bn(nb.conv(h, w, 1, 1), residual_gamma)

    x = nb.relu(nb.bn(nb.conv("input", stem, 3, 2)))
    x = _residual_stages(nb, x, depths, lambda s: widths[s], block, first_stride=2)
    nb.classifier(x, classes)
    return nb.model(1, size, classes)


@dataclass(frozen=True)
class ZooModel:
    build: Callable[..., onnx.ModelProto]  # keyword arguments: size, classes, seed, ...
    summary: str


ZOO = {
    "resnet18": ZooModel(
        lambda **kw: resnet(18, **kw), "ResNet-18, basic blocks (the main demo's network)"
    ),
    "resnet34": ZooModel(lambda **kw: resnet(34, **kw), "ResNet-34, basic blocks"),
    "mobilenet": ZooModel(mobilenet, "MobileNet-v1 style: depthwise 3x3 + pointwise 1x1, relu6"),
    "mobilenet_v2": ZooModel(
        mobilenet_v2, "MobileNetV2: inverted residuals, linear bottlenecks, relu6"
    ),
    "resnext26": ZooModel(
        lambda **kw: resnext(26, **kw), "ResNeXt-26 32x4d: bottlenecks, grouped 3x3 convs"
    ),
    "resnext50": ZooModel(
        lambda **kw: resnext(50, **kw), "ResNeXt-50 32x4d: bottlenecks, grouped 3x3 convs"
    ),
    "regnetx400mf": ZooModel(
        lambda **kw: regnetx("400mf", **kw), "RegNetX-400MF: X blocks, groups of 16 channels"
    ),
    "regnetx600mf": ZooModel(
        lambda **kw: regnetx("600mf", **kw),
        "RegNetX-600MF: X blocks, groups of 24 channels (straddling blocks of 16)",
    ),
    "regnetx4gf": ZooModel(
        lambda **kw: regnetx("4.0gf", **kw),
        "RegNetX-4.0GF: X blocks, groups of 40 channels (straddling blocks of 16)",
    ),
}


def build_model(name: str, **kwargs) -> onnx.ModelProto:
    """A zoo model by name (a key of ``ZOO``: ``resnet18``, ``mobilenet``, ``regnetx600mf``,
    ...)."""
    if name not in ZOO:
        raise ValueError(f"model {name!r} is not in the zoo (allowed: {', '.join(sorted(ZOO))})")
    return ZOO[name].build(**kwargs)


def save_model(name: str, path: str, **kwargs) -> str:
    """Build a zoo model and write it as an ONNX file; returns the path."""
    onnx.save(build_model(name, **kwargs), path)
    return path
