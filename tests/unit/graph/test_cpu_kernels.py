"""The float "cpu" target: NCHWc layout plan, fused epilogues, compiled kernels, memory plan."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import helper

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.pipeline import options_for, run_pipeline
from pyvta.compiler.graph.reference import run_onnxruntime
from pyvta.compiler.graph.zoo import float_model
from pyvta.compiler.targets.cpu.kernels import CpuKernels
from pyvta.runtime.compiled_model import CompiledModel, run_model
from pyvta.runtime.cpu_kernels import COMPILED_OPS, VIEW_OPS, plan_memory

MAX_REL_ERR = 1e-4


def _rel_err(a, ref) -> float:
    return float(np.abs(a - ref).max() / np.abs(ref).max())


@pytest.fixture(scope="module")
def resnet_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=2), path)
    return path


@pytest.fixture(scope="module")
def resnet_plan(resnet_file):
    """The layout plan alone (no kernels built)."""
    opts = dataclasses.replace(options_for("cpu"), cpu_build=False)
    return run_pipeline(import_onnx(resnet_file), opts)


def test_layout_plan_keeps_nchwc_between_convs(resnet_plan):
    g = resnet_plan
    producers = g.producers()
    convs = [n for n in g.nodes if n.op == "cpu_conv2d"]
    assert len(convs) == 20
    # the stem reads the NCHW image and blocks it in its own padding copy (no transform)
    assert convs[0].inputs[0] == "input" and convs[0].attrs["in_block"] == 3
    for n in convs[1:]:  # data (and residual) come blocked from the previous layer
        for name in [n.inputs[0]] + n.inputs[3:]:
            src = producers[name]
            assert len(g.values[name].shape) == 5, (n.name, name)
            assert src.op in ("cpu_conv2d", "cpu_max_pool"), (n.name, src.op)
    assert not [n for n in g.nodes if n.op == "layout_transform"]
    # the one exit from NCHW16c: the global pool's [1, C/16, 1, 1, 16] is NCHW byte for byte
    assert [n.op for n in g.nodes[-4:]] == [
        "cpu_global_avg_pool", "reshape", "flatten", "cpu_dense",
    ]  # fmt: skip
    assert {n.attrs["out_block"] for n in convs} == {16}


def test_bias_residual_and_relu_fuse_into_the_conv_epilogue(resnet_plan):
    ops = [n.op for n in resnet_plan.nodes]
    assert "add" not in ops and "relu" not in ops and "cpu_elementwise" not in ops
    convs = [n for n in resnet_plan.nodes if n.op == "cpu_conv2d"]
    with_residual = [n for n in convs if len(n.inputs) == 4]
    assert len(with_residual) == 8  # one per basic block
    assert all(n.attrs["clip"] == [0.0, float("inf")] for n in with_residual)  # relu after add
    assert all(n.attrs["schedule"]["template"] == "direct" for n in convs)  # untuned default


def test_compiled_resnet_matches_onnxruntime_and_runs_no_numpy_kernels(resnet_file, tmp_path):
    cm = compile_model(resnet_file, "cpu")
    assert {n.op for n in cm.graph.nodes} <= set(COMPILED_OPS) | set(VIEW_OPS)
    rng_seed = 35
    x = zoo.sample_inputs(1, 32, seed=rng_seed)[0]
    print("input seed", rng_seed)
    (ref,) = run_onnxruntime(onnx.load(resnet_file), {"input": x})
    (out,), table = run_model(cm, x)
    print(table.format(top=5))
    assert _rel_err(out, ref) < MAX_REL_ERR
    (again,), _ = run_model(cm, x)  # the arena is reused: same answer, output not aliased
    np.testing.assert_array_equal(again, out)
    # the second run called bound kernels; a new input (a new array, or the same one changed
    # in place) still gives its own answer
    x2 = zoo.sample_inputs(1, 32, seed=rng_seed + 1)[0]
    (ref2,) = run_onnxruntime(onnx.load(resnet_file), {"input": x2})
    assert _rel_err(run_model(cm, x2)[0][0], ref2) < MAX_REL_ERR
    x2[...] = x
    np.testing.assert_array_equal(run_model(cm, x2)[0][0], out)
    loaded = CompiledModel.load(cm.save(tmp_path / "r.npz"))
    conv = next(n for n in loaded.graph.nodes if n.op == "cpu_conv2d")
    assert conv.attrs["schedule"]["knobs"]["ow_block"] >= 1  # the artifact holds the schedules
    np.testing.assert_array_equal(run_model(loaded, x)[0][0], out)


def test_winograd_schedules_apply_with_fused_epilogues(resnet_file, resnet_plan):
    from pyvta.compiler.targets.cpu.kernels import node_workload

    schedules = {}
    for n in resnet_plan.nodes:
        if n.op == "cpu_conv2d":
            wl = node_workload(n, resnet_plan.values[n.inputs[0]].shape)
            if wl.winograd_ok:
                schedules[wl.key] = {"template": "winograd", "knobs": {"p_block": 1, "k_block": 16}}
    assert len(schedules) == 4  # the 3x3 stride-1 layer of each stage
    cm = compile_model(resnet_file, "cpu", cpu_schedules=schedules)
    templates = [n.attrs["schedule"]["template"] for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    assert templates.count("winograd") == 13  # 4 + 3 + 3 + 3 per stage
    x = zoo.sample_inputs(1, 32, seed=36)[0]
    (ref,) = run_onnxruntime(onnx.load(resnet_file), {"input": x})
    assert _rel_err(run_model(cm, x)[0][0], ref) < MAX_REL_ERR


def test_wide_3x3_stride_1_convs_default_to_winograd_with_fused_epilogues():
    """Odd sizes: a 31x31 map is 16x16 Winograd tiles, the last row and column of tiles half
    outside; a residual add and relu fuse into the output transform. The first conv has too
    few input channels for Winograd, the last a stride of 2."""
    from pyvta.compiler.targets.cpu.kernels import WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_WIDTH

    rng = np.random.default_rng(8)
    print("seed", 8)
    c, h, k = 16, 31, WINOGRAD_MIN_CHANNELS
    assert h >= WINOGRAD_MIN_WIDTH
    inits = {
        "w1": rng.standard_normal((k, c, 3, 3)).astype(np.float32) * 0.2,
        "b1": rng.standard_normal(k).astype(np.float32),
        "w2": rng.standard_normal((k, k, 3, 3)).astype(np.float32) * 0.03,
        "b2": rng.standard_normal(k).astype(np.float32),
        "w3": rng.standard_normal((32, k, 3, 3)).astype(np.float32) * 0.03,
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4),
        helper.make_node("Add", ["c2", "r1"], ["s2"]),
        helper.make_node("Relu", ["s2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["y"], pads=[1] * 4, strides=[2, 2]),
    ]
    model = float_model(nodes, {"x": (1, c, h, h)}, {"y": None}, inits)
    cm = CompiledModel(run_pipeline(import_onnx(model), options_for("cpu")), "cpu")
    convs = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    assert [n.attrs["schedule"]["template"] for n in convs] == ["direct", "winograd", "direct"]
    assert len(convs[1].inputs) == 4 and convs[1].attrs["clip"] == [0.0, float("inf")]
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    (ref,) = run_onnxruntime(model, {"x": x})
    assert _rel_err(run_model(cm, x)[0][0], ref) < MAX_REL_ERR


def test_depthwise_conv_and_relu6_compile_into_one_kernel_each():
    rng = np.random.default_rng(4)
    print("seed", 4)
    c = 32
    inits = {
        "w1": rng.standard_normal((c, 3, 3, 3)).astype(np.float32) * 0.3,
        "w2": rng.standard_normal((c, 1, 3, 3)).astype(np.float32) * 0.3,
        "b2": rng.standard_normal(c).astype(np.float32),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(6.0, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4, strides=[2, 2]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4, group=c),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["y"]),
    ]
    model = float_model(nodes, {"x": (1, 3, 16, 16)}, {"y": None}, inits)
    cm = CompiledModel(run_pipeline(import_onnx(model), options_for("cpu")), "cpu")
    convs = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    assert [n.attrs["schedule"]["template"] for n in convs] == ["direct", "depthwise"]
    assert all(n.attrs["clip"] == [0.0, 6.0] for n in convs)  # relu6 fused
    # the stem blocks the NCHW image in its padding copy: no transform kernel before it
    assert [n.op for n in cm.graph.nodes] == ["cpu_conv2d", "cpu_conv2d", "layout_transform"]
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    (ref,) = run_onnxruntime(model, {"x": x})
    assert _rel_err(run_model(cm, x)[0][0], ref) < MAX_REL_ERR


@pytest.mark.parametrize("features", [None, "avx2"])
def test_a_conv_reads_a_padded_block_of_few_channels_as_nchw(features):
    """A value of 10 channels (one block of 16, 6 of them padding) is read as NCHW by a direct
    conv that skips enough work so (its 10 channels one block), blocked by a small one (its
    transform would cost more) and by a pointwise conv (NCHW reads are the direct
    template's); all exact."""
    from pyvta.compiler.targets.cpu.alter_cpu_layout import NCHW_READ_MIN_SAVED_FLOPS

    rng = np.random.default_rng(6)
    print("seed", 6)
    h = 16
    assert 2 * 64 * h * h * 9 * 6 >= NCHW_READ_MIN_SAVED_FLOPS > 2 * 4 * h * h * 9 * 6
    inits = {
        "w1": rng.standard_normal((10, 3, 3, 3)).astype(np.float32) * 0.3,
        "w2": rng.standard_normal((64, 10, 3, 3)).astype(np.float32) * 0.3,
        "w3": rng.standard_normal((4, 10, 3, 3)).astype(np.float32) * 0.3,
        "w4": rng.standard_normal((24, 10, 1, 1)).astype(np.float32) * 0.3,
        "b2": rng.standard_normal(64).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1] * 4),
        helper.make_node("Conv", ["r1", "w3"], ["v"], pads=[1] * 4),
        helper.make_node("Conv", ["r1", "w4"], ["z"]),
    ]
    model = float_model(nodes, {"x": (1, 3, h, h)}, {"y": None, "v": None, "z": None}, inits)
    opts = dataclasses.replace(options_for("cpu"), cpu_features=features)
    cm = CompiledModel(run_pipeline(import_onnx(model), opts), "cpu")
    convs = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    templates = [n.attrs["schedule"]["template"] for n in convs]
    assert templates == ["direct", "direct", "direct", "pointwise"]
    assert [n.attrs["in_block"] for n in convs[:2]] == [3, 10]
    ranks = [len(cm.graph.values[n.inputs[0]].shape) for n in convs[1:]]
    assert ranks == [4, 5, 5]  # NCHW, blocked, blocked
    x = rng.standard_normal((1, 3, h, h)).astype(np.float32)
    refs = run_onnxruntime(model, {"x": x})
    kernels = {"cpu": CpuKernels(cm.graph, features=features)}
    for got, ref in zip(run_model(cm, x, backends=kernels)[0], refs, strict=True):
        assert _rel_err(got, ref) < MAX_REL_ERR


def test_elementwise_ops_and_max_pool_on_nchw_inputs_are_compiled():
    nodes = [
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Add", ["r", "b"], ["s"]),
        helper.make_node(
            "MaxPool", ["s"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
        ),
    ]
    shape = (1, 8, 9, 9)
    model = float_model(nodes, {"a": shape, "b": shape}, {"y": None})
    cm = CompiledModel(run_pipeline(import_onnx(model), options_for("cpu")), "cpu")
    ops = [n.op for n in cm.graph.nodes]
    # an NCHW pool input is blocked first: no numpy op is left
    assert ops == ["cpu_elementwise", "cpu_elementwise", "layout_transform", "cpu_max_pool",
                   "layout_transform"]  # fmt: skip
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    (ref,) = run_onnxruntime(model, {"a": a, "b": b})
    np.testing.assert_allclose(run_model(cm, {"a": a, "b": b})[0][0], ref, rtol=1e-6)


@pytest.mark.parametrize("n", [12, 67])
def test_dense_and_softmax_are_compiled(n):
    """(67 outputs: panels of one vector, the last padded with zero weights.)"""
    rng = np.random.default_rng(5)
    print("seed", 5)
    inits = {
        "w": rng.standard_normal((n, 20)).astype(np.float32),
        "b": rng.standard_normal(n).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["z"], transB=1),
        helper.make_node("Softmax", ["z"], ["y"], axis=-1),
    ]
    model = float_model(nodes, {"x": (3, 20)}, {"y": None}, inits)
    cm = CompiledModel(run_pipeline(import_onnx(model), options_for("cpu")), "cpu")
    assert [n.op for n in cm.graph.nodes] == ["cpu_dense", "cpu_softmax"]
    x = rng.standard_normal((3, 20)).astype(np.float32)
    (ref,) = run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(run_model(cm, x)[0][0], ref, rtol=1e-5, atol=1e-7)


def test_memory_plan_reuses_buffers_without_overlapping_lifetimes(resnet_plan):
    g = resnet_plan
    compiled = {n.name for n in g.nodes if n.op in COMPILED_OPS}
    slots, arena = plan_memory(g, compiled)
    assert 0 < len(arena) < len(slots)  # buffers are shared
    index = {o: i for i, n in enumerate(g.nodes) for o in n.outputs}
    last = {}
    for i, n in enumerate(g.nodes):
        for name in n.inputs:
            last[name] = i
    for name in ("reshape", "flatten"):  # views extend the life of what they view
        for n in g.nodes:
            if n.op == name:
                last[n.inputs[0]] = max(last[n.inputs[0]], last.get(n.outputs[0], 0))
    spans: dict[int, list[tuple[int, int]]] = {}
    for name, slot in slots.items():
        spans.setdefault(slot, []).append((index[name], last.get(name, index[name])))
    for slot, ss in spans.items():
        ss.sort()
        for (_, end), (start, _) in zip(ss, ss[1:], strict=False):
            assert end < start, f"slot {slot} holds two live values"
    assert not set(slots) & set(g.outputs)


def test_compile_builds_every_kernel_so_running_builds_none(resnet_file, monkeypatch):
    from pyvta import compiler

    cm = compile_model(resnet_file, "cpu")  # builds every kernel (the pipeline's last pass)
    built = []
    real_build = compiler.build
    monkeypatch.setattr(compiler, "build", lambda *a, **k: built.append(1) or real_build(*a, **k))
    backend = CpuKernels(cm.graph)
    assert len(backend.modules) == sum(n.op in COMPILED_OPS for n in cm.graph.nodes)
    assert built == []


def test_an_inference_on_the_pool_binds_its_caller_to_a_cpu(resnet_file):
    """While a network runs on 2 threads (a plan binding launches of 2), each node runs with
    the calling thread bound to the plan's CPU for it (its CPUs given back after, a failing
    node too); on 1 thread, or with no plan, the thread keeps its CPUs."""
    import dataclasses
    import os

    from pyvta.compiler.backend.llvm import runtime

    allowed = os.sched_getaffinity(0)
    plan = runtime.cpu_plan(allowed)
    if plan.caller is None:
        pytest.skip(f"binding threads to CPUs needs 2 CPUs or more; this process has {allowed}")
    cm = compile_model(resnet_file, "cpu")
    x = zoo.sample_inputs(1, 32, seed=4)[0]
    seen: list[frozenset] = []

    class Probe(CpuKernels):
        fail_at = None

        def run(self, node, args):
            seen.append(frozenset(os.sched_getaffinity(0)))
            if len(seen) == self.fail_at:
                raise RuntimeError("probe failure")
            return super().run(node, args)

    prev = runtime.set_cpu_plan(dataclasses.replace(plan, min_threads=2))
    try:
        for threads, want in ((2, {plan.caller}), (1, allowed)):
            seen.clear()
            run_model(cm, x, backends={"cpu": Probe(cm.graph, threads)})
            assert len(seen) == len(cm.graph.nodes) and set(seen) == {frozenset(want)}
            assert os.sched_getaffinity(0) == allowed
        failing = Probe(cm.graph, 2)
        failing.fail_at = len(seen) + 3
        with pytest.raises(RuntimeError, match="probe failure"):
            run_model(cm, x, backends={"cpu": failing})
        assert os.sched_getaffinity(0) == allowed
        runtime.set_cpu_plan(runtime.NO_PLAN)
        seen.clear()
        run_model(cm, x, backends={"cpu": Probe(cm.graph, 2)})
        assert set(seen) == {frozenset(allowed)}
    finally:
        runtime.set_cpu_plan(prev)


def _fresh_process(monkeypatch):
    """Forget every kernel built in this process (what a fresh ``pyvta run`` starts from)."""
    from pyvta.compiler.backend.llvm import entry
    from pyvta.compiler.targets.cpu import builds

    monkeypatch.setattr(builds, "_MODULES", {})
    monkeypatch.setattr(entry, "_CACHES", {})


def test_a_fresh_run_neither_lowers_nor_generates_code(resnet_file, tmp_path, monkeypatch):
    """After ``compile_model``, a new process finds each node's lowered function and code on
    disk; a damaged lowered-function file is lowered again, not trusted."""
    from pyvta.compiler.targets.cpu import kernels as cpu_kernels

    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    _fresh_process(monkeypatch)
    cm = compile_model(resnet_file, "cpu")
    x = zoo.sample_inputs(1, 32, seed=4)[0]
    (ref,), _ = run_model(cm, x)
    real = cpu_kernels.node_schedule
    lowered = []
    monkeypatch.setattr(
        cpu_kernels, "node_schedule", lambda *a: lowered.append(a[0].name) or real(*a)
    )
    _fresh_process(monkeypatch)
    (out,), _ = run_model(cm, x, backends={"cpu": CpuKernels(cm.graph)})
    assert lowered == [] and np.array_equal(out, ref)
    funcs = sorted((tmp_path / "llvm").glob("*.func"))
    assert funcs
    funcs[0].write_bytes(b"not a pickle")
    _fresh_process(monkeypatch)
    (out,), _ = run_model(cm, x, backends={"cpu": CpuKernels(cm.graph)})
    assert len(lowered) == 1 and np.array_equal(out, ref)


def test_graph_outputs_are_fresh_arrays_each_run(resnet_file):
    """The classifier's output comes from a buffer its kernel is bound to once; each run
    returns a copy, so an earlier result is not overwritten by a later run."""
    cm = compile_model(resnet_file, "cpu")
    x1, x2 = zoo.sample_inputs(2, 32, seed=36)
    print("input seed", 36)
    (a,), _ = run_model(cm, x1)
    keep = a.copy()
    (b,), _ = run_model(cm, x2)
    (c,), _ = run_model(cm, x1)
    assert a is not b and not np.shares_memory(a, b)
    np.testing.assert_array_equal(a, keep)
    np.testing.assert_array_equal(c, keep)  # the bound call, run again
    assert not np.array_equal(a, b)


def test_a_new_input_array_rebinds_only_the_nodes_that_read_it(resnet_file):
    """Every other node keeps its bound call (and its output buffer) across runs on new input
    arrays, and the results equal those of a fresh backend."""
    cm = compile_model(resnet_file, "cpu")
    xs = zoo.sample_inputs(2, 32, seed=37)
    print("input seed", 37)
    backend = CpuKernels(cm.graph, 1)
    run_model(cm, xs[0].copy(), backends={"cpu": backend})
    calls = {name: hit[1] for name, hit in backend._bound.items()}
    (got,), _ = run_model(cm, xs[1].copy(), backends={"cpu": backend})
    readers = {n.name for n in cm.graph.nodes if cm.input_names[0] in n.inputs}
    assert readers and set(calls) - readers
    for name, hit in backend._bound.items():
        assert (hit[1] is calls[name]) == (name not in readers), name
    (want,), _ = run_model(cm, xs[1], backends={"cpu": CpuKernels(cm.graph, 1)})
    np.testing.assert_array_equal(got, want)


def test_run_model_reuses_its_executor_for_the_same_backends(resnet_file):
    cm = compile_model(resnet_file, "cpu")
    backend = CpuKernels(cm.graph, 1)
    assert cm.executor(backends={"cpu": backend}) is cm.executor(backends={"cpu": backend})
    other = CpuKernels(cm.graph, 1)
    assert cm.executor(backends={"cpu": other}).backends["cpu"] is other
    assert cm.executor() is not cm.executor(backends={"cpu": other})


def test_channel_block_follows_the_vector_width():
    from pyvta.compiler.targets.cpu.alter_cpu_layout import channel_block

    counts = (3, 8, 12, 20, 24, 32, 40, 44, 72, 74)
    # AVX2: two vectors of 8 unless padding to 16 costs a third more channels or more
    assert [channel_block(c, 8, "znver4") for c in counts] == [8, 8, 16, 8, 8, 16, 16, 16, 16, 16]
    assert [channel_block(c, 8, "znver5") for c in counts] == [8, 8, 16, 8, 8, 16, 16, 16, 16, 16]
    # AVX-512: one vector of 16 unless half a vector (8) pads at least 10% less (a Zen 4: its
    # 256-bit ops at twice the rate of 512-bit ones), on a Zen 5 at least a third less
    assert [channel_block(c, 16, "znver4") for c in counts] == [8, 8, 16, 8, 8, 16, 8, 16, 8, 16]
    assert [channel_block(c, 16, "znver5") for c in counts] == [
        8,
        8,
        16,
        16,
        16,
        16,
        16,
        16,
        16,
        16,
    ]


@pytest.mark.parametrize("c,o,group", [(96, 36, 4), (48, 40, 2), (64, 74, 2)])
def test_grouped_conv_reads_only_its_groups(c, o, group):
    """A grouped conv on the direct template: block-diagonal weights packed to the input
    blocks each output block reads (fewer than all where the groups allow), against numpy."""
    from pyvta import compiler
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload, conv_schedule, conv_weights
    from pyvta.runtime.cpu_ops import conv2d
    from pyvta.runtime.layout import dense_group_oihw

    rng = np.random.default_rng(11)
    print("seed", 11)
    h, blk = 7, 16
    cp, op = -(-c // blk) * blk, -(-o // blk) * blk
    w = rng.standard_normal((o, c // group, 3, 3)).astype(np.float32)
    full = np.pad(dense_group_oihw(w, group), [(0, op - o), (0, cp - c), (0, 0), (0, 0)])
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    xb = np.pad(x, [(0, 0), (0, cp - c), (0, 0), (0, 0)])
    xb = np.ascontiguousarray(xb.reshape(1, cp // blk, blk, h, h).transpose(0, 1, 3, 4, 2))
    attrs = {"group": group, "strides": [1, 1], "pads": [1] * 4, "dilations": [1, 1]}
    ref = conv2d([x, w, np.zeros(o, np.float32)], attrs)
    span = GroupSpan(group, c // group, o // group)
    wl = ConvWorkload(cp, h, h, op, (3, 3), (1, 1), (1, 1, 1, 1), blk, blk, groups=span)
    schedule = {"template": "direct", "knobs": {"ow_block": 7}}
    wt = conv_weights(schedule, full, blk, blk, span)
    if (c, o) == (96, 36):  # output blocks of 16 channels span at most 2 of 4 groups
        assert wt.shape[1] < cp // blk
    s, args = conv_schedule(wl, schedule)
    out = np.zeros(args[-1].shape, np.float32)
    compiler.build(s, args)(xb, wt, np.zeros(op, np.float32), out)
    got = out.transpose(0, 1, 4, 2, 3).reshape(1, op, h, h)[:, :o]
    assert _rel_err(got, ref) < MAX_REL_ERR


@pytest.mark.parametrize(
    "c,group,stride,dilation",
    [(64, 16, 1, 1), (72, 18, 1, 1), (48, 24, 2, 1), (64, 8, 1, 2), (96, 4, 1, 1)],
)
def test_narrow_groups_run_on_the_depthwise_template(tmp_path, c, group, stride, dilation):
    """A grouped conv (bias, relu; a residual add) whose groups are narrower than the channel
    block runs the depthwise template, each output lane reading its group's lanes (72 channels
    in groups of 4: blocks of 8 at AVX-512, padded to 80 in blocks of 16 at AVX2); groups as
    wide as the block or wider (96 in groups of 24) stay on the direct template; the network
    agrees with onnxruntime."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.depthwise import group_tile_fits

    rng = np.random.default_rng(12)
    print("seed", 12)
    h = 13
    w = rng.standard_normal((c, c // group, 3, 3)) * np.sqrt(2 / (c // group * 9))
    oh = (h + 2 * dilation - 2 * dilation - 1) // stride + 1
    nodes = [
        helper.make_node("Conv", ["input", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3],
                         pads=[dilation] * 4, strides=[stride] * 2, dilations=[dilation] * 2,
                         group=group),
        helper.make_node("Relu", ["y"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "skip"], ["out"], name="add"),
    ]  # fmt: skip
    inits = {
        "w": w.astype(np.float32),
        "b": rng.standard_normal(c).astype(np.float32),
        "skip": rng.standard_normal((1, c, oh, oh)).astype(np.float32),
    }
    model = float_model(nodes, {"input": (1, c, h, h)}, {"out": (1, c, oh, oh)}, inits)
    path = tmp_path / "grouped.onnx"
    onnx.save(model, path)
    cm = compile_model(path, "cpu")
    (conv,) = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    width, block = c // group, conv.attrs["out_block"]
    narrow = width < block and block % width == 0
    narrow = narrow and group_tile_fits(CpuTarget.host(), block, width)
    assert conv.attrs["schedule"]["template"] == ("depthwise" if narrow else "direct")
    assert (c, group) != (64, 16) or narrow  # groups of 4 in blocks of 8 or 16
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    (ref,) = run_onnxruntime(model, {"input": x})
    assert _rel_err(run_model(cm, x)[0][0], ref) < MAX_REL_ERR


@pytest.mark.parametrize("level", ["avx2", "avx512"])
def test_narrow_groups_stay_direct_where_their_weights_fill_the_registers(level):
    """Groups narrower than the block run the depthwise template untuned where a tile has room
    for 2 columns beside the groups' weight vectors: not AVX2's groups of 8 in blocks of 16
    (two vectors a block: 16 weight registers of 16), which stay direct; groups of 4 there, and
    of 8 with AVX-512's 32 registers, do."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.depthwise import group_tile_fits
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload, default_conv_schedule
    from pyvta.host_cpu import CpuFeatureError

    try:
        target = CpuTarget.host(1, level)
    except CpuFeatureError as e:
        pytest.skip(f"the host cannot run {level}: {e}")
    avx2 = target.vector_registers == 16
    for width, block, fits in ((4, 16, True), (8, 16, not avx2), (2, 8, True), (4, 8, True)):
        assert group_tile_fits(target, block, width) == fits, (width, block)
        wl = ConvWorkload(
            64, 14, 14, 64, (3, 3), (1, 1), (1, 1, 1, 1), block, block,
            groups=GroupSpan(64 // width, width, width),
        )  # fmt: skip
        assert wl.group_width == width
        got = default_conv_schedule(wl, level)["template"]
        assert got == ("depthwise" if fits else "direct"), (width, block)


def test_winograd_k_block_is_a_vector_width_dividing_the_channels():
    from pyvta.compiler.targets.cpu.kernels import winograd_k_block

    # two vectors, one, half a vector (never below 8), else no Winograd by default
    assert [winograd_k_block(o, 16) for o in (96, 80, 72, 36)] == [32, 16, 8, None]
    assert [winograd_k_block(o, 8) for o in (96, 80, 72, 36)] == [16, 16, 8, None]


@pytest.mark.parametrize("o", [24, 40, 72, 80, 96])
def test_winograd_takes_odd_output_channels_in_tiles_that_divide_them(o):
    """A 3x3 layer whose padded output channels two vectors do not divide runs Winograd in
    tiles of one or half a vector (the host's), against onnxruntime."""
    from pyvta.compiler.targets.cpu.alter_cpu_layout import channel_block
    from pyvta.compiler.targets.cpu.kernels import (
        WINOGRAD_MIN_CHANNELS,
        host_lanes,
        winograd_k_block,
    )

    seed = 40 + o
    rng = np.random.default_rng(seed)
    print("seed", seed)
    c, h = WINOGRAD_MIN_CHANNELS, 9
    inits = {
        "w": rng.standard_normal((o, c, 3, 3)).astype(np.float32) * 0.05,
        "b": rng.standard_normal(o).astype(np.float32),
    }
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["y"])]  # fmt: skip
    model = float_model(nodes, {"x": (1, c, h, h)}, {"y": None}, inits)
    cm = CompiledModel(run_pipeline(import_onnx(model), options_for("cpu")), "cpu")
    (conv,) = [n for n in cm.graph.nodes if n.op == "cpu_conv2d"]
    ob = channel_block(o)
    assert conv.attrs["out_block"] == ob
    assert conv.attrs["schedule"]["template"] == "winograd"
    k_block = conv.attrs["schedule"]["knobs"]["k_block"]
    # AVX-512: 24, 40, 72 (blocks of 8) tiles of 8, 80 of 16, 96 of 32; AVX2: 24 of 8, others 16
    assert k_block == winograd_k_block(-(-o // ob) * ob, host_lanes())
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    (ref,) = run_onnxruntime(model, {"x": x})
    assert _rel_err(run_model(cm, x)[0][0], ref) < MAX_REL_ERR


@pytest.mark.parametrize(
    "c,o,k,stride,pad,dil,group,h,oc_blocks,ow_block,flat",
    [
        (32, 56, 3, 1, 3, 3, 1, 12, 2, 6, False),  # 7 blocks of 8 in tiles of 2: the last short
        (16, 24, 5, 2, 2, 1, 1, 13, 3, 4, False),  # 3 blocks in one tile, stride 2, 7 = 4 + 3
        (48, 40, 3, 1, 2, 2, 2, 7, 2, 5, True),  # grouped, dilated, flat: 49 = 9 x 5 + 4
        (24, 40, 3, 1, 1, 1, 1, 9, 3, 9, False),  # 5 blocks as 3 + 2 (one computed twice)
    ],
)
def test_direct_conv_tiles_span_several_output_blocks(
    c, o, k, stride, pad, dil, group, h, oc_blocks, ow_block, flat
):
    """``oc_blocks`` output blocks per register tile (whole blocks, the last tile of the
    blocks maybe short), dilated and grouped too, against numpy; the output starts as NaN."""
    from pyvta import compiler
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload, conv_schedule, conv_weights
    from pyvta.runtime.cpu_ops import conv2d
    from pyvta.runtime.layout import dense_group_oihw

    seed = 60 + c + o
    rng = np.random.default_rng(seed)
    print("seed", seed)
    blk = 8
    w = rng.standard_normal((o, c // group, k, k)).astype(np.float32)
    full = dense_group_oihw(w, group) if group > 1 else w
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, c // blk, blk, h, h).transpose(0, 1, 3, 4, 2))
    attrs = {"group": group, "strides": [stride] * 2, "pads": [pad] * 4, "dilations": [dil] * 2}
    ref = conv2d([x, w, bias], attrs)
    span = GroupSpan(group, c // group, o // group) if group > 1 else None
    wl = ConvWorkload(
        c, h, h, o, (k, k), (stride,) * 2, (pad,) * 4, blk, blk, dilations=(dil, dil), groups=span
    )
    knobs = {"ow_block": ow_block, "flat": flat, "oc_blocks": oc_blocks}
    schedule = {"template": "direct", "knobs": knobs}
    s, args = conv_schedule(wl, schedule)
    out = np.full(args[-1].shape, np.nan, np.float32)
    compiler.build(s, args)(xb, conv_weights(schedule, full, blk, blk, span), bias, out)
    oh, ow = wl.out_hw
    got = out.reshape(1, o // blk, oh, ow, blk).transpose(0, 1, 4, 2, 3).reshape(1, o, oh, ow)
    assert _rel_err(got, ref) < MAX_REL_ERR


@pytest.mark.parametrize(
    "c,o,group,blk,k,stride,dil,h,knobs",
    [
        (96, 96, 4, 16, 3, 1, 1, 9, {"ow_block": 7}),  # groups of 24 in 16s: tiles of 3 blocks
        (48, 48, 2, 16, 3, 2, 1, 13, {"ow_block": 5, "unroll_rci": 8}),  # stride 2, 3 blocks
        (48, 96, 2, 16, 3, 1, 1, 8, {"ow_block": 4}),  # 24 in, 48 out: a group a tile
        (48, 48, 4, 8, 3, 1, 2, 11, {"ow_block": 4, "flat": True}),  # 12s in 8s, dilated, flat
    ],
)
def test_grouped_conv_of_straddling_groups_reads_exactly_its_channels(
    c, o, group, blk, k, stride, dil, h, knobs
):
    """Where groups straddle the channel blocks, a tile of their repeat's blocks
    (``GroupSpan.exact_tile``) reads each output channel's own group's channels from a
    channels-last copy, its weights ``[O/ob, group_in, KH, KW, ob]`` (no zeros); the
    untuned schedule takes that tile; against numpy, the output starting as NaN."""
    from pyvta import compiler
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import (
        ConvWorkload,
        conv_schedule,
        conv_weights,
        default_direct_knobs,
    )
    from pyvta.runtime.cpu_ops import conv2d
    from pyvta.runtime.layout import dense_group_oihw

    seed = 300 + c + o + blk
    rng = np.random.default_rng(seed)
    print("seed", seed)
    span = GroupSpan(group, c // group, o // group)
    tile = span.exact_tile(blk, blk, o // blk)
    assert tile == 3
    w = rng.standard_normal((o, c // group, k, k)).astype(np.float32)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, c // blk, blk, h, h).transpose(0, 1, 3, 4, 2))
    attrs = {"group": group, "strides": [stride] * 2, "pads": [1] * 4, "dilations": [dil] * 2}
    ref = conv2d([x, w, bias], attrs)
    wl = ConvWorkload(
        c, h, h, o, (k, k), (stride,) * 2, (1,) * 4, blk, blk, dilations=(dil, dil), groups=span
    )
    if blk == 16:
        assert default_direct_knobs(wl, "avx512")["oc_blocks"] == tile
    schedule = {"template": "direct", "knobs": {**knobs, "oc_blocks": tile}}
    wt = conv_weights(schedule, dense_group_oihw(w, group), blk, blk, span)
    assert wt.shape == (o // blk, c // group, k, k, blk)
    s, args = conv_schedule(wl, schedule)
    out = np.full(args[-1].shape, np.nan, np.float32)
    compiler.build(s, args)(xb, wt, bias, out)
    oh, ow = wl.out_hw
    got = out.reshape(1, o // blk, oh, ow, blk).transpose(0, 1, 4, 2, 3).reshape(1, o, oh, ow)
    assert _rel_err(got, ref) < MAX_REL_ERR


def test_exact_group_weights_unpack_to_the_block_diagonal_weights():
    """``GroupSpan.pack_exact`` and ``unpack_exact`` are inverse on block-diagonal weights,
    padded output channels (past the groups) included; groups of whole blocks, groups
    narrower than the block and repeats longer than ``MAX_EXACT_TILE`` have no exact tile."""
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.runtime.layout import dense_group_oihw

    rng = np.random.default_rng(5)
    print("seed", 5)
    span = GroupSpan(2, 24, 24)  # 48 channels, padded to 64 outputs
    w = np.zeros((64, 48, 3, 3), np.float32)
    w[:48] = dense_group_oihw(rng.standard_normal((48, 24, 3, 3)).astype(np.float32), 2)
    packed = span.pack_exact(w, 16)
    assert packed.shape == (4, 24, 3, 3, 16)
    np.testing.assert_array_equal(span.unpack_exact(packed, 48), w)
    assert GroupSpan(4, 32, 32).exact_tile(16, 16, 8) is None  # whole blocks
    assert GroupSpan(8, 12, 12).exact_tile(16, 16, 6) is None  # narrower than the block
    assert GroupSpan(2, 56, 56).exact_tile(16, 16, 7) is None  # repeats every 7 blocks
    assert GroupSpan(4, 24, 24).exact_tile(16, 16, 5) is None  # 3 does not divide 5
    assert GroupSpan(4, 24, 24).exact_tile(16, 16, 6) == 3
    assert GroupSpan(6, 40, 40).exact_tile(16, 16, 15) == 5  # RegNetX-4.0GF's


def test_untuned_direct_tiles_span_blocks_of_one_vector_on_avx2_only():
    """On a 16-register target (AVX2) a block of one vector (8) gets tiles of 2 or 3 blocks
    (the fewest computed past the layer's) whose weights fit TILE_WEIGHT_MAX_BYTES; blocks of
    two vectors, and 32 registers, keep 1."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.nchwc_direct import (
        TILE_WEIGHT_MAX_BYTES,
        NchwcConvKnobs,
        register_tiles,
    )

    avx2 = CpuTarget.host(None, "avx2")
    for blocks, want in ((7, 2), (3, 3), (2, 2), (5, 2), (1, 1)):
        k = NchwcConvKnobs.for_target(avx2, 12, 8, 12, blocks)
        assert k.oc_blocks == want, blocks
        assert k.ow_block * want <= avx2.vector_registers - 4
        assert (k.ow_block, 8) in register_tiles(avx2, 12, 8, want)
    assert NchwcConvKnobs.for_target(avx2, 12, 16, 12, 4).oc_blocks == 1
    big = TILE_WEIGHT_MAX_BYTES // 3 + 1  # 3 blocks' weights too big, 2 fit
    assert NchwcConvKnobs.for_target(avx2, 12, 8, 12, 3, big).oc_blocks == 2
    assert NchwcConvKnobs.for_target(avx2, 12, 8, 12, 3, TILE_WEIGHT_MAX_BYTES).oc_blocks == 1
    host = CpuTarget.host()
    if host.vector_registers >= 32:
        assert NchwcConvKnobs.for_target(host, 12, 8, 12, 7).oc_blocks == 1


@pytest.mark.parametrize("level", ["avx2", "avx512"])
def test_an_untuned_grouped_conv_tile_takes_one_block_with_32_registers(level):
    """A grouped conv's blocks read different input blocks, so with 32 registers its untuned
    direct tile of rows takes one block (where a dense conv's takes two), with the dense tile's
    columns; a flat tile (rows narrower than 8), and with 16 registers (AVX2) any tile, is the
    dense conv's."""
    from dataclasses import replace

    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.ops.cpu.groups import GroupSpan
    from pyvta.compiler.targets.cpu.kernels import (
        ConvWorkload,
        default_conv_schedule,
        default_direct_knobs,
    )
    from pyvta.host_cpu import CpuFeatureError

    try:
        wide = CpuTarget.host(1, level).vector_registers >= 32
    except CpuFeatureError as e:
        pytest.skip(f"the host cannot run {level}: {e}")
    hits = 0
    cases = ((64, 56, 4, 16), (128, 28, 8, 16), (128, 28, 4, 16), (48, 20, 3, 8), (1024, 7, 32, 16))
    for c, hw, group, block in cases:
        grouped = ConvWorkload(
            c, hw, hw, c, (3, 3), (1, 1), (1, 1, 1, 1), block, block,
            groups=GroupSpan(group, c // group, c // group),
        )  # fmt: skip
        assert default_conv_schedule(grouped, level)["template"] == "direct"
        dense = default_direct_knobs(replace(grouped, groups=None), level)
        got = default_direct_knobs(grouped, level)
        if dense["oc_blocks"] == 1 or not wide or dense["flat"]:  # 7 x 7: flat, as dense
            assert got == dense
        else:
            assert got == {**dense, "oc_blocks": 1}
            hits += 1
    assert hits == (3 if wide else 0)  # the first three: blocks of one AVX-512 vector


@pytest.mark.parametrize("level", ["avx2", "avx512"])
def test_untuned_schedules_follow_the_host_model(level):
    """The untuned choice per layer kind (``default_conv_schedule``) at two feature levels the
    host may be limited to: F(4x4, 3x3) from 28 columns, F(2x2, 3x3) below; 7-wide 3x3 layers
    direct with 32 registers (a tile of two one-vector blocks), Winograd with 16; pointwise
    and direct tiles span two blocks where a block is one vector (AVX-512's 16 channels)."""
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.compiler.targets.cpu.kernels import ConvWorkload, default_conv_schedule
    from pyvta.host_cpu import CpuFeatureError

    try:
        wide = CpuTarget.host(1, level).vector_registers >= 32
    except CpuFeatureError as e:
        pytest.skip(f"the host cannot run {level}: {e}")

    def conv(c, hw, o, k, s=1):
        p = k // 2
        return default_conv_schedule(
            ConvWorkload(c, hw, hw, o, (k, k), (s, s), (p,) * 4, 16, 16), level
        )

    for hw, tile in ((56, 4), (28, 4), (14, 2)):
        sch = conv(64, hw, 64, 3)
        assert (sch["template"], sch["knobs"]["out_tile"]) == ("winograd", tile), hw
    seven = conv(512, 7, 512, 3)
    assert seven["template"] == ("direct" if wide else "winograd")
    if wide:
        assert seven["knobs"]["oc_blocks"] == 2
        assert conv(256, 14, 512, 3, 2)["knobs"]["oc_blocks"] == 2  # 32 blocks: two per tile
        assert conv(256, 14, 48, 3, 2)["knobs"]["oc_blocks"] == 1  # 3 blocks: two do not divide
    pw = conv(256, 14, 512, 1)
    assert pw["template"] == "pointwise"
    assert pw["knobs"]["oc_blocks"] == (2 if wide else 1)
