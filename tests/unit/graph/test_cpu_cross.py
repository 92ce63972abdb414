"""CPU kernels cross-compiled into the artifact (``pyvta compile --board``): one shared object for
a board's CPU, loaded with ctypes where that CPU runs. Here (x86) the ARM objects are checked as
ELF files and a shared object for this host runs bit for bit as the JIT's kernels; the ARM ones
run in ``make board-test`` (tests/board, under qemu)."""

import struct

import numpy as np
import pytest

from pyvta import compiler
from pyvta.cli import main
from pyvta.compiler.backend.llvm.shared import for_llvm, shared_object
from pyvta.compiler.backend.llvm.target import BOARD_CPUS, CpuTarget, board_cpu
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.cpu_cross import cross_compile_cpu
from pyvta.compiler.graph.zoo import save_model
from pyvta.compiler.ops.cpu import GemmKnobs, matmul_packed
from pyvta.host_cpu import CpuFeatureError
from pyvta.hw.boards import BOARDS
from pyvta.runtime import cpu_llvm
from pyvta.runtime.compiled_model import ArtifactError, CompiledModel, run_model
from pyvta.runtime.cpu_code import SharedKernel

SEED = 5
ELF_MACHINE = {"armv7a": (1, 40), "aarch64": (2, 183)}  # (EI_CLASS 32/64-bit, e_machine)


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cross") / "r18.onnx"
    save_model("resnet18", str(path), size=32, classes=10, width=16, seed=SEED)
    return path


def _input(cm):
    print(f"seed {SEED}")
    shape = cm.graph.values[cm.input_names[0]].shape
    return np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)


def test_board_cpus_are_data():
    assert {b.ps.cpu for b in BOARDS.values()} <= set(BOARD_CPUS)
    assert board_cpu("aarch64-linux-gnu").cpu == "cortex-a53"
    assert board_cpu("armv7a-linux-gnueabihf").cpu == "cortex-a9"
    assert CpuTarget.cross("cortex-a9").level == "generic"  # not an x86 level
    with pytest.raises(CpuFeatureError, match="allowed: cortex-a9"):
        board_cpu("riscv64-linux-gnu")


@pytest.mark.parametrize("name", sorted(BOARD_CPUS))
def test_shared_object_is_an_elf_for_the_board_cpu(name):
    target = CpuTarget.cross(name)
    sch, args = matmul_packed(3, 16, 5, GemmKnobs(bm=2, bn=16, bk=1))
    funcs = [for_llvm(compiler.lower(sch, args, name=f"k{i}")) for i in range(2)]
    so = shared_object(funcs, target)
    ei_class, e_machine = ELF_MACHINE[target.triple.split("-")[0]]
    assert so[:4] == b"\x7fELF" and so[4] == ei_class
    assert struct.unpack_from("<H", so, 18)[0] == e_machine
    assert struct.unpack_from("<H", so, 16)[0] == 3  # ET_DYN: a shared object
    assert b"k0\0" in so and b"k1\0" in so  # both exported by name
    with pytest.raises(ValueError, match="distinct names"):
        shared_object([funcs[0], funcs[0]], target)


def test_host_shared_object_runs_as_the_jit(onnx_path, tmp_path):
    """The same loop IR as a shared object for this host, through ctypes: the JIT's bits."""
    cm = compile_model(onnx_path, "cpu")
    x = _input(cm)
    (want,), _ = run_model(cm, x)
    cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.host(1))
    loaded = CompiledModel.load(cm.save(tmp_path / "host.npz"))
    assert loaded.cpu_code.kernels == cm.cpu_code.kernels
    (got,), _ = run_model(loaded, x)
    backend = loaded.cpu_backend()
    assert backend.modules and all(isinstance(m, SharedKernel) for m in backend.modules.values())
    assert np.array_equal(got, want)


def test_board_artifact_on_another_cpu(onnx_path, tmp_path, capsys):
    """``pyvta compile --board pynq-z2``: Cortex-A9 code in the artifact. Here (not ARM) the JIT
    runs the CPU nodes and a warning says so; without llvmlite (a board of another CPU) the
    artifact is refused, naming the CPU it is for."""
    out = tmp_path / "z2.npz"
    assert main(["compile", str(onnx_path), "--target", "cpu", "--board", "pynq-z2"] + ["-o", str(out)]) == 0  # fmt: skip
    assert "CPU kernels for armv7a" in capsys.readouterr().out
    cm = CompiledModel.load(out)
    assert cm.cpu_code.cpu == "cortex-a9" and not cm.cpu_code.runs_here()
    n_compiled = sum(1 for n in cm.graph.nodes if n.op.startswith(("cpu_", "layout_")))
    assert len(cm.cpu_code.kernels) == n_compiled
    x = _input(cm)
    with pytest.warns(UserWarning, match="cortex-a9"):
        (y,), _ = run_model(cm, x)
    (want,), _ = run_model(compile_model(onnx_path, "cpu"), x)
    assert np.array_equal(y, want)
    with cpu_llvm.numpy_only(), pytest.raises(ArtifactError, match="cortex-a9.*--board"):
        CompiledModel.load(out).cpu_backend()


def test_compile_refuses_unknown_board_before_compiling(onnx_path, tmp_path, capsys):
    out = tmp_path / "x.npz"
    assert main(["compile", str(onnx_path), "--board", "pynq-z9", "-o", str(out)]) != 0
    err = capsys.readouterr()
    assert "pynq-z2" in err.err and "compiling" not in err.out
    assert main(["compile", str(onnx_path), "--cpu-target", "mips-linux-gnu", "-o", str(out)]) != 0
    assert not out.exists()


def test_vta_artifact_float_layers_from_the_shared_object(onnx_path, tmp_path):
    """A ``vta`` model's float CPU layers (first conv, classifier) compute their products with the
    shared object's GEMMs (one per shape) where it runs: for this host, the JIT's bits. (The
    legacy partition: the whole-network default leaves no float layer on the CPU.)"""
    from pyvta import driver
    from pyvta.compiler.graph.cpu_cross import gemm_shapes
    from pyvta.runtime.cpu_code import WithGemms

    cm = compile_model(onnx_path, "vta", vta_partition="legacy")
    x = _input(cm)
    (want,), _ = run_model(cm, x, device=driver.open("sim", config=cm.hw))
    shapes = gemm_shapes(cm.graph)
    assert not gemm_shapes(compile_model(onnx_path, "vta").graph)  # the whole network
    assert len(shapes) == 2, shapes  # the 7x7 stem conv and the dense
    cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.host(1))
    assert (
        not cm.cpu_code.kernels
        and {tuple(map(int, g.split())) for g in cm.cpu_code.gemms} == shapes
    )
    loaded = CompiledModel.load(cm.save(tmp_path / "vta.npz"))
    (got,), _ = run_model(loaded, x, device=driver.open("sim", config=loaded.hw))
    assert isinstance(loaded.cpu_backend(), WithGemms)
    assert np.array_equal(got, want)
    with cpu_llvm.numpy_only():  # the products are the shared object's only inside a run
        assert cpu_llvm.gemm(
            np.ones((1, 128), np.float32), np.ones((128, 10), np.float32)
        ).shape == (1, 10)
    assert not cpu_llvm._SHARED


@pytest.mark.slow
def test_int8_artifact_shared_object_runs_as_the_jit(onnx_path, tmp_path):
    """A ``cpu-int8`` model's int8 kernels (with weights packed for the target's tile) and its
    blocked float layers' kernels from a shared object for this host: the JIT's bits (slow: ~30 s
    of code generation on a shared 2-core machine). Its float layers are compiled kernels, so
    the shared object needs no GEMMs for float products."""
    from pyvta.runtime.int8_kernels import CpuInt8Kernels

    cm = compile_model(onnx_path, "cpu-int8")
    x = _input(cm)
    (want,), _ = run_model(cm, x)
    cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.host(1))
    assert cm.cpu_code.consts and not cm.cpu_code.gemms
    loaded = CompiledModel.load(cm.save(tmp_path / "int8.npz"))
    (got,), _ = run_model(loaded, x)
    backend = loaded.cpu_backend()
    assert isinstance(backend, CpuInt8Kernels)
    assert all(isinstance(k.module, SharedKernel) for k in backend.kernels.values())
    assert backend.fallback.modules  # the float layers
    assert all(isinstance(m, SharedKernel) for m in backend.fallback.modules.values())
    assert np.array_equal(got, want)
