"""Compile once, run anywhere: the artifact carries every accelerator kernel; loading and running
it lowers nothing, equals the golden integer model, and a damaged or foreign file is refused."""

import json
import re
import zipfile

import numpy as np
import pytest

from pyvta import driver
from pyvta.compiler.backend.vta import conv2d, default, graph_backend, operator
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver import DeviceError
from pyvta.driver.kernel import load_kernel
from pyvta.isa import HwConfig
from pyvta.runtime.compiled_model import ArtifactError, CompiledModel, run_model

SEED = 3


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """A small ResNet-18 of the zoo, compiled for the accelerator and saved."""
    root = tmp_path_factory.mktemp("artifact")
    onnx_path = root / "r18.onnx"
    save_model("resnet18", str(onnx_path), size=32, classes=10, width=16, seed=SEED)
    cm = compile_model(onnx_path, "vta")
    return cm, cm.save(root / "r18.npz")


def _input(cm):
    print(f"seed {SEED}")
    shape = cm.graph.values[cm.input_names[0]].shape
    return np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)


def _forbid_lowering(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a lowering function was called while running an artifact")

    for module, name in (
        (conv2d, "lower_conv2d"),
        (operator, "lower_conv2d"),
        (operator, "build_kernel"),
        (operator, "default_config"),
        (default, "default_config"),
        (graph_backend, "build_kernel"),
        (graph_backend, "compile_kernels"),
    ):
        monkeypatch.setattr(module, name, boom)


def test_artifact_runs_without_lowering_and_equals_golden(artifact, monkeypatch):
    cm, path = artifact
    x = _input(cm)
    (ref,), _ = run_model(cm, x)  # the golden integer model on the CPU
    _forbid_lowering(monkeypatch)
    loaded = CompiledModel.load(path)
    # (a conv + max pool node whose fused schedule does not fit: its pool as "<name>/pool")
    names = {k.split("/")[0] for k in loaded.kernels}
    assert names == {n.name for n in cm.graph.nodes if n.target == "vta"}
    assert loaded.hw == HwConfig()
    vta = loaded.accelerator(driver.open("sim", config=loaded.hw))
    (first,), table = run_model(loaded, x, backends={"vta": vta})
    (second,), _ = run_model(loaded, x, backends={"vta": vta})
    assert np.array_equal(first, ref) and np.array_equal(second, ref)
    assert vta.load_s > 0 and all(r.cycles for r in vta.runs)
    assert any(r.cycles for r in table.rows if r.target == "vta")


def test_cli_run_of_an_artifact_lowers_nothing(artifact, monkeypatch, tmp_path, capsys):
    from pyvta.cli import main

    cm, path = artifact
    _forbid_lowering(monkeypatch)
    out = tmp_path / "y.npy"
    argv = ["run", str(path), "--target", "vta", "--device", "sim", "--runs", "2"]
    assert main([*argv, "--save-output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kernels onto sim in" in text
    assert re.search(r"^inference 2: [\d.]+ (ms|s) wall; accelerator: ", text, re.M)
    assert "the table: inference 2; the first took" in text
    x = np.random.default_rng(0).standard_normal(cm.graph.values[cm.input_names[0]].shape)
    (ref,), _ = run_model(cm, x.astype(np.float32))
    assert np.array_equal(np.load(out), ref)


def test_foreign_hwconfig_is_refused_with_both_tags(artifact):
    cm, path = artifact
    other = HwConfig(LOG_ACC_BUFF_SIZE=16)
    with pytest.raises(ArtifactError, match=f"{cm.hw.tag}.*{other.tag}"):
        CompiledModel.load(path).accelerator(driver.open("sim", config=other))
    kernel = next(iter(cm.kernels.values()))
    with pytest.raises(DeviceError, match=f"{cm.hw.tag}.*{other.tag}"):
        load_kernel(driver.open("sim", config=other), kernel)


def _rewrite(src, dst, change):
    """Copy the .npz ``src`` to ``dst`` with ``change(name, bytes) -> bytes`` applied per member."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, change(item.filename, zin.read(item.filename)))


def test_tampered_blob_is_refused(artifact, tmp_path):
    _, path = artifact
    bad = tmp_path / "bad.npz"

    def flip_weights(name, data):
        if name.startswith("k0_weights"):
            data = bytearray(data)
            data[-1] ^= 1  # one bit of the last weight
        return bytes(data)

    _rewrite(path, bad, flip_weights)
    with pytest.raises(ArtifactError, match="k0_weights.*sha256"):
        CompiledModel.load(bad)


def test_tampered_metadata_is_refused(artifact, tmp_path):
    _, path = artifact
    bad = tmp_path / "bad.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["__graph__"]))
    meta["kernels"][next(iter(meta["kernels"]))]["insn_count"] -= 1
    arrays["__graph__"] = np.array(json.dumps(meta))
    np.savez(bad, **arrays)
    with pytest.raises(ArtifactError, match="digest"):
        CompiledModel.load(bad)


def test_truncated_file_is_refused(artifact, tmp_path):
    _, path = artifact
    data = path.read_bytes()
    for cut in (len(data) // 2, 100, 0):
        bad = tmp_path / f"cut{cut}.npz"
        bad.write_bytes(data[:cut])
        with pytest.raises(
            ArtifactError, match="truncated or corrupt|not a readable|not an .npz archive"
        ):
            CompiledModel.load(bad)


def test_program_bundle_is_named_as_such(tmp_path):
    from pyvta.sim.programs import matmul_program

    rng = np.random.default_rng(SEED)
    a = rng.integers(-8, 8, (16, 16), dtype=np.int8)
    bundle = tmp_path / "bundle.npz"
    matmul_program(a, a).program.save(bundle)
    with pytest.raises(ArtifactError, match="program bundle"):
        CompiledModel.load(bundle)


def test_calibration_data_from_a_folder_and_an_npz(tmp_path):
    from pyvta.compiler.graph.calibrate import CalibrationError

    onnx_path = tmp_path / "m.onnx"
    save_model("resnet18", str(onnx_path), size=32, classes=10, width=16, seed=SEED)
    rng = np.random.default_rng(SEED)
    stack = rng.standard_normal((4, 1, 3, 32, 32)).astype(np.float32)
    folder = tmp_path / "calib"
    folder.mkdir()
    for i, s in enumerate(stack):
        np.save(folder / f"{i}.npy", s)
    np.savez(tmp_path / "calib.npz", input=stack)
    a = compile_model(onnx_path, "cpu-int8", str(folder))
    b = compile_model(onnx_path, "cpu-int8", tmp_path / "calib.npz")
    c = compile_model(onnx_path, "cpu-int8", [{"input": s} for s in stack])
    x = stack[0]
    outs = [run_model(m, x)[0][0] for m in (a, b, c)]
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    np.save(folder / "bad.npy", np.zeros((2, 2), np.float32))
    with pytest.raises(CalibrationError, match=r"shape \[2, 2\].*expected one sample"):
        compile_model(onnx_path, "cpu-int8", str(folder))


def test_nan_input_to_an_int8_model_is_named(artifact):
    from pyvta.runtime.ir import GraphError

    cm, _ = artifact
    x = _input(cm)
    x[0, 0, 0, 0] = np.nan
    with pytest.raises(GraphError, match="input 'input' holds NaN or Inf"):
        run_model(cm, x)
