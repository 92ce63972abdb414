"""``target="cuda-emulated"``: every GPU template against numpy at odd sizes, threads run in
forward and reverse order (MCUDA phases); a missing barrier is caught."""

import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler.backend.cuda import CUDA_PASSES, LaunchError
from pyvta.compiler.backend.cuda_emulated import RaceError
from pyvta.compiler.ops.cuda import (
    GpuConv2dKnobs,
    GpuGemmKnobs,
    conv2d_gpu,
    conv2d_implicit_gemm,
    gemm,
)
from pyvta.compiler.workloads import RESNET18_LAYERS
from pyvta.testing.gpu_suite import ATOL, RTOL, SUITE, conv2d_reference

SEED = 20261201


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_kernel_matches_numpy_in_both_thread_orders(name):
    k = SUITE[name]
    sch, args = k.make()
    mod = compiler.build(sch, args, target="cuda-emulated")
    print(f"seed {SEED}")
    arrays = k.inputs(args, SEED)
    mod(*arrays)  # raises RaceError if the orders disagree
    np.testing.assert_allclose(arrays[-1], k.reference(*arrays[:-1]), rtol=RTOL, atol=ATOL)


def test_a_missing_barrier_is_caught():
    sch, args = gemm(40, 40, 24, GpuGemmKnobs(threads_x=4, threads_y=4, reg_m=2, reg_n=2))
    no_sync = [p for p in CUDA_PASSES if p[0] != "insert_barriers"]
    arrays = SUITE["gemm_37x45x29"].inputs(args, SEED)
    ok = compiler.build(sch, args, target="cuda-emulated")
    ok(*[a.copy() for a in arrays])
    bad = compiler.build(sch, args, target="cuda-emulated", passes=no_sync)
    with pytest.raises(RaceError, match="C differs in .* forward and reverse thread order"):
        bad(*arrays)


def test_emulator_refuses_a_thread_dependent_loop_around_a_barrier():
    from pyvta.compiler.backend.cuda.emulate import _Emulator
    from pyvta.compiler.backend.cuda.passes import sync_threads
    from pyvta.compiler.ir import For, IntImm

    sch, args = gemm(8, 8, 8, GpuGemmKnobs(threads_x=2, threads_y=2, reg_m=1, reg_n=1))
    mod = compiler.build(sch, args, target="cuda-emulated")
    emu = _Emulator(mod.kernels[0], reverse=False)
    loop = For(emu.tv["x"], IntImm(0), IntImm(2), "serial", sync_threads())
    inner = For(type(emu.tv["x"])("j"), IntImm(0), emu.tv["x"], "serial", sync_threads())
    with pytest.raises(LaunchError, match="loop j around a barrier depends on the thread index"):
        emu.split(For(loop.var, IntImm(0), IntImm(2), "serial", inner))


def test_gemm_1024_and_resnet_c2_through_emulation_equal_numpy():
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    sch, args = gemm(1024, 1024, 1024)
    a, b = (rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(2))
    c = np.zeros((1024, 1024), np.float32)
    compiler.build(sch, args, target="cuda-emulated")(a, b, c)
    ref = a.astype(np.float64) @ b
    print("gemm 1024^3 max |err| / max |ref|", np.abs(c - ref).max() / np.abs(ref).max())
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
    L = RESNET18_LAYERS["C2"]
    sch, args = conv2d_gpu(
        L.in_channels,
        L.height,
        L.width,
        L.out_channels,
        L.kernel,
        L.stride,
        L.pad,
        GpuConv2dKnobs(),
    )
    x = rng.standard_normal(args[0].shape, dtype=np.float32)
    w = rng.standard_normal(args[1].shape, dtype=np.float32)
    y = np.zeros(args[2].shape, np.float32)
    compiler.build(sch, args, target="cuda-emulated")(x, w, y)
    ref = conv2d_reference(x, w, L.stride, L.pad)
    print("conv C2 max |err| / max |ref|", np.abs(y - ref).max() / np.abs(ref).max())
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    sch, args = conv2d_implicit_gemm(
        L.in_channels, L.height, L.width, L.out_channels, L.kernel, L.stride, L.pad
    )
    y = np.zeros(args[2].shape, np.float32)
    compiler.build(sch, args, target="cuda-emulated")(x, w, y)
    y = y.reshape(ref.shape)
    print("conv C2 implicit GEMM max |err| / max |ref|", np.abs(y - ref).max() / np.abs(ref).max())
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
