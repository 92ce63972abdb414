"""What a board runs, on the board's Python: load an artifact, run it on a device with the CPU
layers in numpy; nothing heavy is imported, and a damaged artifact is refused."""

import os
import sys

import numpy as np
import pytest

from pyvta import driver
from pyvta.runtime.compiled_model import ArtifactError, CompiledModel, run_model

HOST_ONLY = ("onnx", "onnxruntime", "llvmlite", "amaranth", "xgboost", "cocotb", "sklearn")


# PYVTA_BOARD_ARCH (scripts/board_test.sh): an emulated ARM userland, Debian's Python and numpy
ARCH = os.environ.get("PYVTA_BOARD_ARCH")
ARM_MACHINES = {"armhf": "armv7l", "arm64": "aarch64"}
# On ARM the float CPU layers (numpy, on Debian's reference BLAS) sum in another order than the
# host's numpy: float32 rounding apart (seen: 7e-7 at outputs of magnitude ~1), not bit for bit.
ARM_FLOAT_TOL = dict(rtol=1e-4, atol=1e-4)


def same_as_host(y: np.ndarray, host: np.ndarray) -> bool:
    """Bit for bit on x86; to ``ARM_FLOAT_TOL`` on an ARM userland (its float CPU layers)."""
    if ARCH is None:
        return np.array_equal(y, host)
    return y.shape == host.shape and np.allclose(y, host, **ARM_FLOAT_TOL)


def test_versions_are_the_boards():
    import platform

    import numpy

    print(f"{platform.machine()} python {sys.version.split()[0]}, numpy {numpy.__version__}")
    assert numpy.__version__.startswith("1.")
    if ARCH is None:
        assert sys.version_info[:2] == (3, 10), "make board-test runs these under Python 3.10"
    else:
        assert platform.machine() == ARM_MACHINES[ARCH], f"{ARCH} runs on {ARM_MACHINES[ARCH]}"
        if ARCH == "armhf":  # the 32-bit ARM: numpy's index type is 32 bits wide
            assert np.dtype(np.intp).itemsize == 4


def test_host_only_packages_are_absent_and_unimported(fixtures):
    CompiledModel.load(fixtures / "vta.npz")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in HOST_ONLY)
    assert not loaded, f"the board runtime imported {loaded}"
    for name in HOST_ONLY:
        with pytest.raises(ImportError):
            __import__(name)


def test_loading_an_artifact_loads_no_compiler(fixtures):
    """A fresh interpreter that loads an artifact has loaded the runtime, not the compiler."""
    import ast
    import subprocess

    code = "import sys; from pyvta.runtime.compiled_model import CompiledModel;"
    code += f" CompiledModel.load({str(fixtures / 'vta.npz')!r});"
    code += " print(sorted(m for m in sys.modules if m.startswith('pyvta.')))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=fixtures
    )
    assert done.returncode == 0, done.stderr
    loaded = ast.literal_eval(done.stdout)  # the printed list of module names
    print(f"{len(loaded)} pyvta modules loaded by CompiledModel.load")
    assert any(m.startswith("pyvta.runtime.") for m in loaded), loaded
    assert not [m for m in loaded if m.startswith("pyvta.compiler")], loaded


def test_vta_artifact_on_the_simulator_equals_the_host(fixtures):
    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta.npz")
    vta = cm.accelerator(driver.open("sim", config=cm.hw))
    (y,), table = run_model(cm, expected["x"], backends={"vta": vta})
    assert same_as_host(y, expected["vta"])
    assert same_as_host(y, expected["golden"])
    (golden,), _ = run_model(cm, expected["x"])  # this machine's golden model: bit for bit
    assert np.array_equal(y, golden)
    assert sum(r.cycles or 0 for r in table.rows) > 0


def test_float_cpu_layers_in_numpy(fixtures):
    """The float CPU layers of a vta artifact (first conv, pooling, dense) run in numpy here;
    an artifact compiled for the cpu target (compiled kernels) is refused with a clear error."""
    from pyvta.runtime.ir import GraphError

    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta.npz")
    cpu_nodes = {n.op for n in cm.graph.nodes if n.target == "cpu"}
    assert {"conv2d", "max_pool", "dense"} <= cpu_nodes, cpu_nodes
    (y,), _ = run_model(cm, expected["x"])
    assert same_as_host(y, expected["golden"])
    with pytest.raises(GraphError, match="need llvmlite"):
        run_model(CompiledModel.load(fixtures / "cpu.npz"), expected["x"])


def test_whole_network_artifact_runs_on_the_accelerator(fixtures):
    """The default vta artifact (the whole network on the accelerator): the board's CPU only
    quantizes, folds the stem's input, unpacks and dequantizes; on the simulator device the
    output is the host's."""
    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta-whole.npz")
    cpu_ops = {n.op for n in cm.graph.nodes if n.target == "cpu"}
    assert cpu_ops <= {"quantize", "pack_fold_taps", "packed_flatten", "unpack_nc", "dequantize"}, (
        cpu_ops
    )
    (y,), _ = run_model(cm, expected["x"], device=driver.open("sim", config=cm.hw))
    assert same_as_host(y, expected["whole"])


def test_damaged_artifact_is_refused(fixtures, tmp_path):
    data = (fixtures / "vta.npz").read_bytes()
    bad = tmp_path / "cut.npz"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(ArtifactError):
        CompiledModel.load(bad)


def test_pynq_device_on_the_model_board_equals_the_host(fixtures):
    """PynqDevice and the launch routine, as the board runs them, against the model board."""
    from pyvta.testing.board_model import ModelBoard

    expected = np.load(fixtures / "expected.npz")
    cm = CompiledModel.load(fixtures / "vta.npz")
    board = ModelBoard()
    dev = driver.open("pynq", bitstream=fixtures / "bitstream", pynq=board.pynq, config=cm.hw)
    (y,), _ = run_model(cm, expected["x"], device=dev)
    assert same_as_host(y, expected["vta"])
    (sim,), _ = run_model(cm, expected["x"], device=driver.open("sim", config=cm.hw))
    assert np.array_equal(y, sim)


def test_the_cli_runs_an_artifact_on_the_board_python(fixtures, tmp_path):
    import subprocess

    expected = np.load(fixtures / "expected.npz")
    np.save(tmp_path / "x.npy", expected["x"])
    out = tmp_path / "y.npy"
    cmd = [sys.executable, "-m", "pyvta.cli", "run", str(fixtures / "vta.npz"), "--target"]
    cmd += ["vta", "--device", "sim", "--input", str(tmp_path / "x.npy"), "--save-output", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "kernels onto sim" in proc.stdout
    assert same_as_host(np.load(out), expected["vta"])


@pytest.mark.parametrize("stem", ["cpu", "cpu-grouped"])
def test_cpu_artifact_with_kernels_for_the_boards_cpu(fixtures, stem):
    """``pyvta compile --target cpu --board ...``: on the board's CPU the artifact's shared
    object runs every compiled CPU node (ctypes, no llvmlite), to float32 tolerance of the host's
    JIT (Cortex-A9 has no fused multiply-add); on another CPU it is refused, naming its CPU.
    ``cpu-grouped``: a ResNeXt's grouped convs, groups narrower than the block on the depthwise
    template (lane permutations as a row load and shuffles)."""
    from pyvta.runtime.cpu_code import SharedKernel

    expected = np.load(fixtures / "expected.npz")
    if ARCH is None:
        with pytest.raises(ArtifactError, match="cortex-a9.*no llvmlite"):
            run_model(CompiledModel.load(fixtures / f"{stem}-armhf.npz"), expected["x"])
        return
    cm = CompiledModel.load(fixtures / f"{stem}-{ARCH}.npz")
    assert cm.cpu_code.runs_here(), cm.cpu_code.description
    (y,), table = run_model(cm, expected["x"])
    modules = cm.cpu_backend().modules
    assert len(modules) == len(cm.cpu_code.kernels) > 0
    assert all(isinstance(m, SharedKernel) for m in modules.values())
    want = expected[stem.replace("-", "_")]
    print(f"{ARCH} {stem}: {cm.cpu_code.description}, max |y - host| {np.abs(y - want).max():.3g}")
    assert np.allclose(y, want, **ARM_FLOAT_TOL)
    other = fixtures / f"{stem}-{'arm64' if ARCH == 'armhf' else 'armhf'}.npz"
    if other.exists():  # (make test builds the armhf fixtures only: x86's leg checks the refusal)
        with pytest.raises(ArtifactError, match="no llvmlite"):
            run_model(CompiledModel.load(other), expected["x"])


def test_int8_artifact_with_kernels_for_the_boards_cpu(fixtures):
    """``pyvta compile --target cpu-int8 --board ...``: on the board's CPU its kernels (the int8
    convs and the blocked float layers around them) come from the shared object and give the
    host's outputs; on another CPU without llvmlite the artifact is refused, naming the CPU its
    kernels are for (its blocked float layers have no numpy version, as a ``cpu`` artifact's)."""
    from pyvta.runtime.cpu_code import SharedKernel

    expected = np.load(fixtures / "expected.npz")
    if ARCH is None:
        with pytest.raises(ArtifactError, match="cortex-a9"):
            run_model(CompiledModel.load(fixtures / "cpu-int8-armhf.npz"), expected["x"])
        return
    cm = CompiledModel.load(fixtures / f"cpu-int8-{ARCH}.npz")
    (y,), _ = run_model(cm, expected["x"])
    kernels = cm.cpu_backend().kernels
    floats = cm.cpu_backend().fallback.modules  # the blocked float layers' kernels
    assert kernels and floats and len(kernels) + len(floats) == len(cm.cpu_code.kernels)
    assert all(isinstance(k.module, SharedKernel) for k in kernels.values())
    assert all(isinstance(m, SharedKernel) for m in floats.values())
    assert same_as_host(y, expected["int8"])


def test_all_int8_artifact_is_bit_identical_with_the_host(fixtures):
    """``pyvta compile --target cpu-int8 --keep-float none --board ...``: every conv and dense
    int8, so no float rounding feeds a quantize: the board's CPU (the Cortex-A9 without fused
    multiply-add included) gives the host JIT's outputs bit for bit, where the default artifact
    (float first conv) differs after requantization."""
    expected = np.load(fixtures / "expected.npz")
    if ARCH is None:  # x86's leg: the armhf artifact is refused here, naming its CPU
        with pytest.raises(ArtifactError, match="cortex-a9"):
            run_model(CompiledModel.load(fixtures / "cpu-int8-all-armhf.npz"), expected["x"])
        return
    cm = CompiledModel.load(fixtures / f"cpu-int8-all-{ARCH}.npz")
    assert not [n.name for n in cm.graph.nodes if n.op in ("cpu_conv2d", "cpu_dense")]
    (y,), _ = run_model(cm, expected["x"])
    print(f"{ARCH}: max |y - host| {np.abs(y - expected['int8_all']).max():.3g}")
    assert np.array_equal(y, expected["int8_all"])


def test_vta_artifact_with_arm_cpu_layers(fixtures):
    """``pyvta compile --target vta --board ...``: the float CPU layers' products (first conv,
    classifier) from the shared object, the accelerator's on the simulator; on the board's CPU
    bit for bit the same artifact's numpy fallback here (seen on both ARMs for this model), on
    another CPU numpy runs them and a warning says so."""
    from pyvta.runtime.cpu_code import WithGemms

    expected = np.load(fixtures / "expected.npz")
    sim = driver.open("sim", config=CompiledModel.load(fixtures / "vta.npz").hw)
    if ARCH is None:
        with pytest.warns(UserWarning, match="cortex-a9.*numpy"):
            (y,), _ = run_model(
                CompiledModel.load(fixtures / "vta-armhf.npz"), expected["x"], device=sim
            )
        assert np.array_equal(y, expected["vta"])
        return
    cm = CompiledModel.load(fixtures / f"vta-{ARCH}.npz")
    (y,), _ = run_model(cm, expected["x"], device=sim)
    backend = cm.cpu_backend()
    assert isinstance(backend, WithGemms) and len(backend.gemms) == len(cm.cpu_code.gemms) == 2
    (fallback,), _ = run_model(CompiledModel.load(fixtures / "vta.npz"), expected["x"], device=sim)
    assert np.array_equal(y, fallback)
    assert same_as_host(y, expected["vta"])


def _serve_cpu(tmp_path):
    """``pyvta serve --device cpu`` on this Python (``-X importtime``: its imports on stderr),
    on a free loopback port; (process, port, stderr file)."""
    import subprocess
    import time

    err = tmp_path / "serve.err"
    cmd = [sys.executable, "-X", "importtime", "-m", "pyvta.cli", "serve", "--device", "cpu"]
    cmd += ["--listen", "127.0.0.1:0"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # importtime's lines reach the file at once
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=err.open("w"), text=True, cwd=tmp_path, env=env
    )
    t0 = time.monotonic()
    line = proc.stdout.readline()  # "listening on HOST:PORT" once it serves
    assert line.startswith("listening on"), (line, err.read_text()[-2000:])
    print(f"server up in {time.monotonic() - t0:.1f} s")
    return proc, int(line.rsplit(":", 1)[1]), err


def test_serve_cpu_measures_a_kernel_cross_compiled_for_this_cpu(fixtures, tmp_path):
    """``pyvta serve --device cpu`` here (the board's side of ``pyvta tune --target arm-a9
    --device tcp://BOARD``): a GEMM kernel the host cross-compiled for this CPU is loaded and
    timed, its product comes back and equals the host's (to float32 rounding); the server
    imported the runtime and the driver, no module of the compiler. Another CPU's kernel is
    refused, naming it. (The times are emulated under qemu: only checked to be positive.)"""
    import json

    from pyvta.driver.device import DeviceError
    from pyvta.runtime.cpu_code import KernelSig

    d = np.load(fixtures / f"kernel-{ARCH or 'x86_64'}.npz")
    sig = KernelSig.from_json(json.loads(str(d["sig"])))
    out = np.zeros(sig.params[2].shape, np.float32)
    proc, port, err = _serve_cpu(tmp_path)
    try:
        with driver.open(f"tcp://127.0.0.1:{port}") as dev:
            costs, number, (c,) = dev.measure_cpu(
                str(d["triple"]), d["shared"].tobytes(), sig, [d["a"], d["b"], out], 3
            )
            assert len(costs) == 3 and all(t > 0 for t in costs) and number >= 1
            print(f"{ARCH or 'x86_64'}: {number} calls per repeat; max |C - host| "
                  f"{np.abs(c - d['want']).max():.3g}")  # fmt: skip
            assert np.allclose(c, d["want"], rtol=1e-5, atol=1e-5)
            other = "aarch64-unknown-linux-gnu" if ARCH != "arm64" else "x86_64-unknown-linux-gnu"
            with pytest.raises(DeviceError, match=f"{other}.*do not run here"):
                dev.measure_cpu(other, d["shared"].tobytes(), sig, [d["a"], d["b"], out], 1)
    finally:
        proc.terminate()  # (SIGINT is ignored where the tests run in the background)
        proc.wait(60)
    imported = [line.split("|")[-1].strip() for line in err.read_text().splitlines()]
    assert "pyvta.driver.remote.server" in imported and "pyvta.runtime.cpu_measure" in imported
    assert not [m for m in imported if m.startswith("pyvta.compiler")]
