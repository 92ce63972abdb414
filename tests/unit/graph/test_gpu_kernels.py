"""The ``gpu`` target: whole zoo networks (ResNet-18, the MobileNet-style model, small inputs)
with every node a GPU kernel, run through ``cuda-emulated`` against the float CPU backend and
onnxruntime; every kernel they use assembled by ptxas for sm_80 and sm_90 within the limits;
the real-GPU path (``DeviceGpu`` over ``launch.LoadedNetwork``) run end to end on a driver
stand-in that emulates the kernels, and on a GPU when ``cuInit`` succeeds."""

import numpy as np
import pytest

from pyvta.compiler.backend.cuda import LIMITS, launch
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import cosine, run_onnxruntime
from pyvta.compiler.graph.zoo import sample_inputs, save_model
from pyvta.compiler.targets.gpu import kernels as gpu_kernels
from pyvta.runtime.compiled_model import CompiledModel, run_model
from pyvta.runtime.ir import GraphError, Node
from pyvta.testing.fake_cuda import EmulatingDriver, Result
from pyvta.testing.gpu_suite import ptxas_or_skip

SIZE, CLASSES = 32, 10  # small inputs: emulation runs every thread of every block on the CPU
# float32 kernels with other summation orders than the CPU backend / onnxruntime: agreement to
# TOL of the output's largest magnitude, and the same top-1 class
TOL = 1e-4


@pytest.fixture(scope="module", params=["resnet18", "mobilenet"])
def model(request, tmp_path_factory):
    path = save_model(
        request.param, str(tmp_path_factory.mktemp("gpu") / "m.onnx"), size=SIZE, classes=CLASSES
    )
    x = sample_inputs(1, SIZE, seed=7)[0]
    return request.param, path, compile_model(path, "gpu"), x


def _close(name, got, ref, what):
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"{name} vs {what}: max |err| / max |ref| {err:.2e}, cosine {cosine(got, ref):.9f}")
    assert err <= TOL
    assert np.argmax(got) == np.argmax(ref)


def test_network_emulated_equals_cpu_backend_and_onnxruntime(model, monkeypatch):
    name, path, cm, x = model
    (cpu_out,), _ = run_model(compile_model(path, "cpu"), x)
    from pyvta.runtime import cpu_llvm, cpu_ops

    def no_fallback(*a, **k):
        raise AssertionError("a gpu node fell back to a CPU kernel")

    monkeypatch.setattr(cpu_ops, "run_cpu_op", no_fallback)
    monkeypatch.setattr(cpu_llvm, "gemm", no_fallback)
    (out,), table = run_model(cm, x, gpu="cuda-emulated")
    assert {r.target for r in table.rows} == {"gpu"}
    assert len(table.rows) == len(cm.graph.nodes)
    (ort,) = run_onnxruntime(path, {"input": x})
    _close(name, out, cpu_out, "cpu")
    _close(name, out, ort, "onnxruntime")


def test_every_node_has_a_kernel_or_is_a_view(model):
    _, _, cm, _ = model
    for n in cm.graph.nodes:
        assert n.target == "gpu"
        if n.op in gpu_kernels.VIEW_OPS:
            assert n.name not in cm.gpu_kernels
        else:
            assert n.attrs["gpu_schedule"]["template"]
            assert ".entry main_k0" in cm.gpu_kernels[n.name].ptx


@pytest.fixture(scope="module")
def ptxas():
    return ptxas_or_skip()


def test_every_network_kernel_assembles_for_sm80_and_sm90_within_limits(model, ptxas):
    name, _, cm, _ = model
    _assemble_within_limits(ptxas, name, cm)


def _assemble_within_limits(ptxas, name, cm) -> None:
    for arch in sorted(LIMITS):
        kernels = cm.gpu_kernels if arch == "sm_90" else gpu_kernels.compile_gpu_kernels(
            cm.graph, arch
        )  # fmt: skip
        lim, unique = LIMITS[arch], {k.ptx: k for k in kernels.values()}
        count = 0
        for k in unique.values():
            assert f".target {arch}" in k.ptx
            res = ptxas.assemble(k.ptx, arch)
            assert sorted(res) == sorted(e["name"] for e in k.plan["kernels"])
            for e in k.plan["kernels"]:
                r, threads = res[e["name"]], int(np.prod(e["block"]))
                assert r.registers <= lim.max_registers_per_thread
                assert r.registers * threads <= lim.max_registers_per_block
                assert r.shared_bytes <= lim.max_shared_bytes_per_block
                assert r.spill_bytes == 0, (e, r)
                count += 1
        print(
            f"{name} {arch}: {len(kernels)} nodes, {len(unique)} distinct modules, {count} kernels"
        )


def test_artifact_keeps_the_ptx(model, tmp_path):
    _, _, cm, x = model
    loaded = CompiledModel.load(cm.save(tmp_path / "m.gpu.npz"))
    assert loaded.target == "gpu"
    assert loaded.gpu_kernels == cm.gpu_kernels
    assert [n.attrs for n in loaded.graph.nodes] == [n.attrs for n in cm.graph.nodes]


def _emulating_driver(cm, init_error=Result.CUDA_SUCCESS):
    emulated = gpu_kernels.EmulatedGpu(cm.graph)
    modules = {cm.gpu_kernels[n].ptx: m for n, m in emulated.modules.items()}
    return EmulatingDriver(modules, init_error)


def test_real_gpu_path_on_an_emulating_driver(model, monkeypatch):
    """``DeviceGpu`` / ``LoadedNetwork`` with the artifact's PTX: weights uploaded once, values
    stay on the device between nodes, a view shares its source's buffer."""
    name, path, cm, x = model
    fake = _emulating_driver(cm)
    monkeypatch.setattr(launch, "_driver", lambda: fake)
    backend = gpu_kernels.gpu_backend(cm.graph, "cuda", cm.gpu_kernels)
    ((out,), _), ((again,), _) = (run_model(cm, x, backends={"gpu": backend}) for _ in range(2))
    (emu,), _ = run_model(cm, x, gpu="cuda-emulated")
    np.testing.assert_array_equal(out, emu)
    np.testing.assert_array_equal(again, emu)
    names = [c[0] for c in fake.calls]
    n_const, n_kernels = len(cm.graph.constants), len(cm.gpu_kernels)
    assert names.count("cuModuleLoadData") == n_kernels
    # constants once, then per inference: the graph input once
    assert names.count("cuMemcpyHtoD") == n_const + 2
    assert names.count("cuLaunchKernel") == 2 * n_kernels
    net = backend.net
    flat = next(n for n in cm.graph.nodes if n.op == "flatten")
    assert net.dptrs[flat.outputs[0]] == net.dptrs[flat.inputs[0]]
    assert net.run({"input": x})[cm.output_names[0]].tobytes() == out.tobytes()


def test_gpu_without_a_gpu_is_a_pyvta_error_naming_cuinit(model, monkeypatch):
    _, _, cm, _ = model
    monkeypatch.setattr(launch, "_driver", lambda: EmulatingDriver({}, Result.CUDA_ERROR_NO_DEVICE))
    with pytest.raises(gpu_kernels.GpuUnavailableError, match="cuInit failed: CUDA_ERROR_NO_DEV"):
        CompiledModel(cm.graph, "gpu", gpu_kernels=cm.gpu_kernels).gpu_backend("cuda")


def test_the_gpu_devices_are_one_table(monkeypatch):
    """Every place that names a GPU device asks ``targets.gpu.devices``: the target's devices, the
    tuner's GPU template targets and backends, and the runtime's default (the first); only a
    device ``on_gpu`` is probed for a GPU before compiling, and needs an artifact's PTX."""
    from pyvta.compiler.targets import get_target
    from pyvta.compiler.targets.gpu import devices
    from pyvta.runtime.compiled_model import ArtifactError
    from pyvta.tuner import cuda
    from pyvta.tuner.tune import TASK_BACKENDS

    names = tuple(d.name for d in devices.DEVICES)
    assert get_target("gpu").devices == names == cuda.TARGETS
    assert set(names) <= set(TASK_BACKENDS)
    assert devices.gpu_device(None) == devices.DEVICES[0] and devices.DEVICES[0].on_gpu
    with pytest.raises(devices.GpuDeviceError, match=r"'cuda-x' \(allowed: cuda, cuda-emulated\)"):
        devices.gpu_device("cuda-x")
    opened = []
    monkeypatch.setattr(gpu_kernels, "open_gpu", lambda: opened.append(1))
    for d in devices.DEVICES:
        get_target("gpu").probe(d.name)
    assert len(opened) == sum(d.on_gpu for d in devices.DEVICES) == 1
    from pyvta.runtime.ir import Graph

    graph = Graph(name="empty", inputs=[], outputs=[], nodes=[], constants={}, values={})
    with pytest.raises(ArtifactError, match="has no GPU kernels"):
        CompiledModel(graph, "gpu").gpu_backend()  # the default device is the GPU


def test_cli_compile_and_run_gpu_emulated(model, tmp_path, capsys, monkeypatch):
    from pyvta.cli import main

    name, path, cm, x = model
    if name != "resnet18":
        pytest.skip("one network is enough for the CLI")
    art = tmp_path / "r.npz"
    assert main(["compile", path, "--target", "gpu", "-o", str(art)]) == 0
    assert f"{len(cm.gpu_kernels)} GPU kernels" in capsys.readouterr().out
    y = tmp_path / "y.npy"
    argv = ["run", str(art), "--target", "gpu", "--device", "cuda-emulated"]
    assert main([*argv, "--save-output", str(y)]) == 0
    text = capsys.readouterr().out
    assert " gpu " in text and "cpu " not in text.split("device time")[0]
    seeded = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    (ref,), _ = run_model(cm, seeded, gpu="cuda-emulated")
    np.testing.assert_array_equal(np.load(y), ref)
    monkeypatch.setattr(launch, "_driver", lambda: EmulatingDriver({}, Result.CUDA_ERROR_NO_DEVICE))
    assert main(["run", str(art), "--target", "gpu"]) != 0
    assert "cuInit failed" in capsys.readouterr().err


def test_an_op_without_a_gpu_template_is_refused_naming_those_that_run():
    node = Node("concat", "cat", ["a", "b"], ["c"], {"axis": 1})
    with pytest.raises(GraphError, match=r"no GPU template \(the gpu target runs: add, avg_pool"):
        gpu_kernels.default_schedule(node, [(1, 2, 3, 3)] * 2, (1, 4, 3, 3))
    grouped = Node("conv2d", "g", ["x", "w", "b"], ["y"],
                   {"group": 2, "dilations": [1, 1], "strides": [1, 1], "pads": [0] * 4})  # fmt: skip
    with pytest.raises(GraphError, match="group 2 of 8 channels"):
        gpu_kernels.default_schedule(grouped, [(1, 8, 5, 5), (8, 4, 1, 1), (8,)], (1, 8, 5, 5))


@pytest.fixture(scope="module")
def real_gpu():
    try:
        return launch.Gpu()
    except launch.GpuUnavailable as e:
        pytest.skip(f"needs an NVIDIA GPU: {e}")


def test_network_on_a_real_gpu(real_gpu, model):
    name, path, cm, x = model
    (out,), _ = run_model(cm, x, gpu="cuda")
    (ort,) = run_onnxruntime(path, {"input": x})
    _close(name, out, ort, "onnxruntime")


@pytest.mark.slow
def test_resnet18_224_assembles_and_emulated_with_race_check_equals_onnxruntime(tmp_path, ptxas):
    path = save_model("resnet18", str(tmp_path / "r.onnx"), size=224, classes=1000)
    cm = compile_model(path, "gpu")
    _assemble_within_limits(ptxas, "resnet18@224", cm)
    x = sample_inputs(1, 224, seed=7)[0]
    (out,), _ = run_model(cm, x, backends={"gpu": cm.gpu_backend("cuda-emulated", True)})
    (ort,) = run_onnxruntime(path, {"input": x})
    _close("resnet18@224", out, ort, "onnxruntime")


def test_gpu_check_network_prepared_here_runs_on_an_emulating_driver(model, tmp_path, capsys):
    """``benchmarks/gpu_check.py``'s network step: prepared here, then its runner (the copied
    ``launch.py``, loaded by path as on the GPU machine) on the driver stand-in."""
    import importlib.util
    import shutil

    name, _, cm, _ = model
    if name != "resnet18":
        pytest.skip("gpu_check runs ResNet-18")
    spec = importlib.util.spec_from_file_location("gpu_check", "benchmarks/gpu_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    entry = check.prepare_network(tmp_path / "network", "sm_90", SIZE, CLASSES)
    shutil.copy(launch.__file__, tmp_path / "launch.py")
    runner = check._load_launch(tmp_path)
    runner._driver = lambda: _emulating_driver(cm)  # same model, seed and size: same PTX
    rel, ms, *_ = check.network_on_gpu(runner.Gpu(), runner, tmp_path, {"network": entry})
    assert rel <= check.NETWORK_RTOL
    assert ms > 0
    assert "rel err vs onnxruntime" in capsys.readouterr().out
