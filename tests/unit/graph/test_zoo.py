"""Zoo models are valid ONNX, match onnxruntime when imported, and are not degenerate."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.reference import run_onnxruntime
from pyvta.runtime.executor import Executor

MODELS = {
    "resnet18": lambda: zoo.resnet(18, size=32, width=16, classes=10, seed=1),
    "resnet34": lambda: zoo.resnet(34, size=32, width=16, classes=10, seed=1),
    "mobilenet": lambda: zoo.mobilenet(size=32, width=8, classes=10, seed=1),
    "resnext26": lambda: zoo.resnext(26, size=32, width=16, groups=4, classes=10, seed=1),
    "regnetx600mf": lambda: zoo.regnetx("600mf", size=32, classes=10, seed=1),
    "mobilenet_v2": lambda: zoo.mobilenet_v2(size=32, classes=10, seed=1),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_top1_varies_and_import_matches_onnxruntime(name):
    model = MODELS[name]()
    xs = zoo.sample_inputs(12, 32, seed=21)
    refs = [run_onnxruntime(model, {"input": x})[0][0] for x in xs]
    top1 = [int(r.argmax()) for r in refs]
    print(name, "top-1 over 12 inputs:", top1)
    assert len(set(top1)) >= 3
    spread = np.std(refs, axis=0).mean() / (np.abs(np.mean(refs, axis=0)).mean() + 1e-9)
    assert spread > 0.5  # logits vary with the input at least as much as their mean offset
    g = import_onnx(model)
    (out,), _ = Executor(g).run({"input": xs[0]})
    np.testing.assert_allclose(out[0], refs[0], rtol=1e-4, atol=1e-4)


def test_full_size_resnet18_shapes():
    g = import_onnx(zoo.resnet(18, stat_samples=1))
    assert g.values["input"].shape == (1, 3, 224, 224)
    assert g.values["logits"].shape == (1, 1000)
    convs = [n for n in g.nodes if n.op == "conv2d"]
    assert len(convs) == 20  # 17 3x3/7x7 + 3 downsampling 1x1
    w = g.constants[convs[1].inputs[1]]
    assert w.shape == (64, 64, 3, 3)
    assert abs(w.std() - np.sqrt(2 / (64 * 9))) < 0.01  # He initialisation


def test_full_size_resnext50_shapes():
    """ResNeXt-50 32x4d: 53 convs (the stem, 16 bottlenecks of three, 4 projections), the 3x3
    ones in 32 groups of 4 channels in the first stage (doubling per stage), 2048 features."""
    g = import_onnx(zoo.resnext(50, stat_samples=1))
    assert g.values["logits"].shape == (1, 1000)
    convs = [n for n in g.nodes if n.op == "conv2d"]
    assert len(convs) == 53
    grouped = [n for n in convs if n.attrs.get("group", 1) > 1]
    assert len(grouped) == 16 and {n.attrs["group"] for n in grouped} == {32}
    assert [g.constants[n.inputs[1]].shape for n in grouped[::5]] == [
        (128, 4, 3, 3), (256, 8, 3, 3), (512, 16, 3, 3), (1024, 32, 3, 3)
    ]  # fmt: skip
    assert g.values[g.nodes[-3].inputs[0]].shape == (1, 2048, 7, 7)


@pytest.mark.parametrize(
    "flops,convs,groups,multiply_adds",
    [
        ("400mf", 71, {2, 4, 10, 24}, 398e6),
        ("600mf", 53, {2, 4, 10, 22}, 601e6),
        ("4.0gf", 74, {2, 6, 14, 34}, 3.96e9),
    ],
)
def test_full_size_regnetx_shapes(flops, convs, groups, multiply_adds):
    """RegNetX-400MF, -600MF and -4.0GF as pycls builds them: a 32-channel stem, X blocks whose
    3x3 convs run groups of 16, 24 or 40 channels, stage widths 32-384, 48-528 and 80-1360,
    about 400 and 600 M and 4 G multiply-adds at 224 x 224."""
    g = import_onnx(zoo.regnetx(flops, stat_samples=1))
    assert g.values["logits"].shape == (1, 1000)
    nodes = [n for n in g.nodes if n.op == "conv2d"]
    assert len(nodes) == convs
    grouped = [n for n in nodes if n.attrs.get("group", 1) > 1]
    assert {n.attrs["group"] for n in grouped} == groups
    width = {"400mf": 16, "600mf": 24, "4.0gf": 40}[flops]
    assert all(g.constants[n.inputs[1]].shape[1] == width for n in grouped)
    macs = 0
    for n in nodes:
        w = g.constants[n.inputs[1]].shape
        out = g.values[n.outputs[0]].shape
        macs += int(np.prod(out[1:])) * int(np.prod(w[1:]))
    macs += 1000 * g.values[g.nodes[-3].inputs[0]].shape[1]
    assert abs(macs / multiply_adds - 1) < 0.01, macs


def test_full_size_mobilenet_v2_shapes():
    """MobileNetV2: 52 convs (the stem, 17 inverted residuals, the 1280-channel 1x1), 17
    depthwise, 10 residual adds, about 300 M multiply-adds at 224 x 224."""
    g = import_onnx(zoo.mobilenet_v2(stat_samples=1))
    assert g.values["logits"].shape == (1, 1000)
    nodes = [n for n in g.nodes if n.op == "conv2d"]
    assert len(nodes) == 52
    depthwise = [n for n in nodes if n.attrs.get("group", 1) > 1]
    assert len(depthwise) == 17
    assert all(g.constants[n.inputs[1]].shape[1] == 1 for n in depthwise)
    assert sum(n.op == "add" for n in g.nodes) == 10
    macs = sum(
        int(np.prod(g.values[n.outputs[0]].shape[1:]))
        * int(np.prod(g.constants[n.inputs[1]].shape[1:]))
        for n in nodes
    )
    assert abs((macs + 1280 * 1000) / 300.8e6 - 1) < 0.01, macs


def test_resnext_compiles_for_the_cpu_with_grouped_kernels(tmp_path):
    """A small ResNeXt on the float CPU target: the grouped convs of stages 2-4 run compiled
    grouped kernels (groups narrower than the channel block on the depthwise template, the
    others on the direct template's groups; stage 1's 16 channels are one block, which every
    group reads: a plain conv over the block-diagonal weights) and the network agrees with
    onnxruntime."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.ops.cpu.depthwise import group_tile_fits
    from pyvta.runtime.compiled_model import run_model

    model = MODELS["resnext26"]()
    path = tmp_path / "resnext26.onnx"
    onnx.save(model, path)
    cm = compile_model(path, "cpu")
    convs = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    grouped = [n for n in convs if n.attrs.get("groups")]
    host = CpuTarget.host()
    assert len(convs) == 29 and len(grouped) == 6  # 1 + 8 x 3 + 4 projections
    for n in grouped:
        (_, width, _), block = n.attrs["groups"], n.attrs["out_block"]
        narrow = width < block and block % width == 0
        narrow = narrow and group_tile_fits(host, block, width)
        assert n.attrs["schedule"]["template"] == ("depthwise" if narrow else "direct")
    templates = {n.attrs["schedule"]["template"] for n in grouped}
    # groups of 8 in blocks of 16 (stage 2): depthwise where 8 weight vectors leave room
    assert templates == ({"depthwise", "direct"} if group_tile_fits(host, 16, 8) else {"direct"})
    x = zoo.sample_inputs(1, 32, seed=22)[0]
    (ref,) = run_onnxruntime(model, {"input": x})
    out = run_model(cm, x)[0][0]
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) < 1e-4


@pytest.mark.parametrize("flops,repeat", [("600mf", 3), ("4.0gf", 5)])
def test_regnetx_groups_straddling_the_blocks_run_exact_tiles(tmp_path, flops, repeat):
    """RegNetX's groups of 24 and 40 channels straddle blocks of 16: on the float CPU target
    their untuned tiles span the groups' repeat of ``repeat`` blocks and read exactly their
    channels (``GroupSpan.exact_tile``, weights ``[O/ob, group_in, KH, KW, ob]``) where the
    blocks are 16 channels and the tile's columns fit the registers; the network agrees with
    onnxruntime."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.runtime.compiled_model import run_model

    model = zoo.regnetx(flops, size=32, classes=10, seed=1)
    path = tmp_path / f"regnetx{flops}.onnx"
    onnx.save(model, path)
    cm = compile_model(path, "cpu")
    exact = 0
    for n in cm.graph.nodes:
        if n.op != "cpu_conv2d" or not n.attrs.get("groups"):
            continue
        span, block = GroupSpan(*n.attrs["groups"]), n.attrs["out_block"]
        knobs = n.attrs["schedule"]["knobs"]
        tile = span.exact_tile(n.attrs["in_block"], block, -(-n.attrs["channels"] // block))
        if knobs.get("oc_blocks") == tile:
            exact += 1
            assert tile == repeat and cm.graph.constants[n.inputs[1]].ndim == 5
    host = CpuTarget.host()
    print(f"{flops}: {exact} exact grouped layers, {host.vector_lanes('float32')} lanes")
    if host.vector_lanes("float32") == 16:  # AVX-512: blocks of 16, 32 registers
        assert exact >= 4  # each stage's
    else:  # AVX2: groups of 24 and 40 fill blocks of 8; blocks of 16 leave too few columns
        assert exact == 0
    x = zoo.sample_inputs(1, 32, seed=23)[0]
    (ref,) = run_onnxruntime(model, {"input": x})
    out = run_model(cm, x)[0][0]
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) < 1e-4


def test_unknown_model_name():
    with pytest.raises(ValueError, match="allowed"):
        zoo.build_model("vgg16")
