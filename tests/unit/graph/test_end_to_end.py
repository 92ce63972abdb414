"""Small networks end to end: compile, save/load, bit-exact CPU vs golden VTA, accuracy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine, run_onnxruntime
from pyvta.runtime.compiled_model import CompiledModel, run_model


@pytest.fixture(scope="module")
def resnet_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=24, classes=10, seed=2), path)
    return path


def _calibration():
    return [{"input": x} for x in zoo.sample_inputs(6, 32, seed=31)]


def test_int8_on_cpu_equals_golden_vta_bit_for_bit(resnet_file):
    cal = _calibration()
    on_cpu = compile_model(resnet_file, "cpu-int8", cal)
    # (cpu-int8 keeps the first conv and the last dense float: the legacy partition's split)
    on_vta = compile_model(resnet_file, "vta", cal, vta_partition="legacy")
    assert {n.target for n in on_cpu.graph.nodes} == {"cpu"}
    assert any(n.op == "vta_conv2d" for n in on_vta.graph.nodes)
    for x in zoo.sample_inputs(3, 32, seed=32):
        (a,), _ = run_model(on_cpu, x)
        (b,), _ = run_model(on_vta, x)
        np.testing.assert_array_equal(a, b)


def test_quantized_model_tracks_float(resnet_file):
    compiled = compile_model(resnet_file, "vta", _calibration())
    model = onnx.load(resnet_file)
    xs = zoo.sample_inputs(8, 32, seed=33)
    cos = []
    for x in xs:
        (ref,) = run_onnxruntime(model, {"input": x})
        (out,), table = run_model(compiled, x)
        cos.append(cosine(ref, out))
    print("cosine per input:", np.round(cos, 4))
    print(table.format(top=5))
    assert np.mean(cos) > 0.95


def test_save_and_load_runs_without_recompiling(resnet_file, tmp_path):
    compiled = compile_model(resnet_file, "vta")  # default calibration: seeded normal inputs
    path = compiled.save(tmp_path / "model.npz")
    loaded = CompiledModel.load(path)
    assert loaded.target == "vta" and loaded.input_names == ["input"]
    x = zoo.sample_inputs(1, 32, seed=34)[0]
    np.testing.assert_array_equal(run_model(loaded, x)[0][0], run_model(compiled, x)[0][0])


def test_float_cpu_target_matches_onnxruntime(resnet_file):
    compiled = compile_model(resnet_file, "cpu")
    x = zoo.sample_inputs(1, 32, seed=35)[0]
    (ref,) = run_onnxruntime(onnx.load(resnet_file), {"input": x})
    np.testing.assert_allclose(run_model(compiled, x)[0][0], ref, rtol=1e-4, atol=1e-4)


def test_mobilenet_depthwise_stays_on_cpu(tmp_path):
    path = tmp_path / "mobilenet.onnx"
    onnx.save(zoo.mobilenet(size=64, width=16, classes=10, seed=4), path)
    cal = [{"input": x} for x in zoo.sample_inputs(4, 64, 41)]
    compiled = compile_model(path, "vta", cal, vta_partition="legacy")  # (== cpu-int8's split)
    by_op = {}
    for n in compiled.graph.nodes:
        by_op.setdefault(n.op, set()).add(n.target)
    assert by_op["qconv2d"] == {"cpu"}  # depthwise, quantized, on the cpu
    assert by_op["vta_conv2d"] == {"vta"} and by_op["conv2d"] == {"cpu"}
    on_cpu = compile_model(path, "cpu-int8", cal)
    cos = []
    for x in zoo.sample_inputs(3, 64, seed=42):
        (ref,) = run_onnxruntime(onnx.load(path), {"input": x})
        (out,), _ = run_model(compiled, x)
        np.testing.assert_array_equal(run_model(on_cpu, x)[0][0], out)
        cos.append(cosine(ref, out))
    # 27 narrow layers with per-tensor power-of-two scales: far from float (see the report)
    print("mobilenet cosine vs float:", np.round(cos, 3))
    assert np.mean(cos) > 0.6


def test_unknown_target_is_rejected(resnet_file):
    with pytest.raises(ValueError, match="allowed: cpu, cpu-int8, gpu, vta"):
        compile_model(resnet_file, "tpu")
