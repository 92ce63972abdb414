"""The GPU backend: PTX structure, ptxas (from the pinned wheel, no GPU needed) over the whole
kernel suite for sm_80 and sm_90 with resource checks, and runs on a GPU when one is present."""

import re

import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler import te
from pyvta.compiler.backend.cuda import LIMITS, prepare
from pyvta.compiler.backend.cuda.codegen import compile_ptx
from pyvta.compiler.backend.cuda.passes import PTX_PASSES
from pyvta.compiler.backend.llvm.codegen import CodegenError
from pyvta.compiler.ir.expr import Call
from pyvta.compiler.ops.cuda import GpuGemmKnobs, gemm
from pyvta.testing.gpu_suite import ATOL, RTOL, SUITE, ptxas_or_skip


@pytest.fixture(scope="module")
def ptxas():
    return ptxas_or_skip()


def test_ptx_of_a_tiled_gemm_has_the_gpu_constructs():
    kn = GpuGemmKnobs(threads_x=16, threads_y=8, reg_m=4, reg_n=2, tile_k=8)
    mod = compiler.build(*gemm(128, 128, 64, kn), target="cuda", arch="sm_80")
    ptx = mod.ptx
    assert ".target sm_80" in ptx and ".visible .entry main_k0(" in ptx
    assert ".maxntid 128" in ptx  # 16 x 8 threads, from nvvm.annotations
    assert re.search(r"\.shared \.align 16 \.b8 main_k0_A_shared\[1024\]", ptx)  # 32 x 8 floats
    for reg in ("%tid.x", "%tid.y", "%ctaid.x", "%ctaid.y"):
        assert reg in ptx
    assert ptx.count("bar.sync") == 2
    assert "ld.global" in ptx and "st.shared" in ptx and "ld.shared" in ptx
    # contract: every multiply-add of the unrolled register tile is one FMA
    assert len(re.findall(r"\bfma\.rn\.f32", ptx)) == 4 * 2 * 8
    assert not re.search(r"\bmul\.rn\.f32", ptx)
    assert mod.plan["kernels"] == [
        {"name": "main_k0", "grid": [4, 4, 1], "block": [16, 8, 1], "args": [0, 1, 2]}
    ]


def test_exp_goes_through_libdevice_and_other_math_is_refused():
    mod = compiler.build(*SUITE["softmax_13x37"].make(), target="cuda")
    assert mod.ptx.count(".entry") == 3 and "ex2.approx" in mod.ptx
    assert "__nv_expf" not in mod.ptx  # linked, inlined, internal symbols gone
    x = te.placeholder((4,), "float32", "x")
    y = te.compute((4,), lambda i: Call("log", [x[i]], "float32"), name="y")
    s2 = compiler.create_schedule(y)
    io, ii = s2[y].split("i", 4)
    s2[y].bind(io, "blockIdx.x")
    s2[y].bind(ii, "threadIdx.x")
    with pytest.raises(CodegenError, match=r"'log' has no GPU implementation \(allowed: sqrt"):
        compiler.build(s2, [x, y], target="cuda")


@pytest.mark.parametrize("name", sorted(SUITE))
def test_every_suite_kernel_assembles_within_the_limits(ptxas, name):
    func, kernels = prepare(compiler.lower(*SUITE[name].make()), "sm_80", None, PTX_PASSES)
    for arch in sorted(LIMITS):
        _check_resources(ptxas, name, arch, kernels, compile_ptx(func, kernels, arch))


def _check_resources(ptxas, name, arch, kernels, ptx):
    res = ptxas.assemble(ptx, arch)
    lim = LIMITS[arch]
    assert sorted(res) == sorted(k.name for k in kernels)
    for k in kernels:
        r = res[k.name]
        print(name, arch, r)
        assert r.registers <= lim.max_registers_per_thread
        assert r.registers * k.threads <= lim.max_registers_per_block
        # ptxas' figure: our buffers, each aligned to 16 bytes
        assert k.shared_bytes <= r.shared_bytes < k.shared_bytes + 16 * len(k.shared) + 1
        assert r.shared_bytes <= lim.max_shared_bytes_per_block
        assert r.spill_bytes == 0
        assert r.barriers == (1 if k.shared else 0)


def test_ptxas_rejects_what_the_limit_check_refuses(ptxas):
    """Past the launch check: 64 KiB of static shared memory is refused by ptxas too."""
    from pyvta.compiler.backend.cuda.kernels import split_kernels
    from pyvta.compiler.backend.cuda.passes import CUDA_PASSES
    from pyvta.compiler.passes import run_passes

    func = run_passes(compiler.lower(*gemm(256, 256, 512, GpuGemmKnobs(tile_k=128))), CUDA_PASSES)
    kernels = split_kernels(func)
    assert kernels[0].shared_bytes == 65536
    with pytest.raises(ptxas.PtxasError, match="shared"):
        ptxas.assemble(compile_ptx(func, kernels, "sm_90"), "sm_90")


@pytest.fixture(scope="module")
def gpu():
    from pyvta.compiler.backend.cuda.launch import Gpu, GpuUnavailable

    try:
        return Gpu()
    except GpuUnavailable as e:
        pytest.skip(f"needs an NVIDIA GPU: {e}")


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_kernel_on_the_gpu(gpu, name):
    k = SUITE[name]
    sch, args = k.make()
    mod = compiler.build(sch, args, target="cuda")
    arrays = k.inputs(args)
    mod(*arrays)
    np.testing.assert_allclose(arrays[-1], k.reference(*arrays[:-1]), rtol=RTOL, atol=ATOL)
