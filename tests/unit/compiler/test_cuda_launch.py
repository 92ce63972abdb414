"""The driver-API runner (``backend.cuda.launch``) against a fake ``cuda.bindings.driver`` that
records the calls: the launch sequence and the kernel-argument packing are checked here; a real
GPU runs them in ``test_cuda_backend`` (skipped without one) and ``benchmarks/gpu_check.py``."""

import ctypes

import numpy as np
import pytest

from pyvta.compiler.backend.cuda import launch
from pyvta.testing.fake_cuda import EmulatingDriver, Result


class FakeDriver(EmulatingDriver):
    """The emulating driver's memory and call record, with one hand-written 'kernel' in place
    of emulated modules (module loads are recorded, nothing is looked up)."""

    _cuModuleLoadData = _cuModuleGetFunction = None  # recorded, answered CUDA_SUCCESS

    def __init__(self, init_error=Result.CUDA_SUCCESS):
        super().__init__({}, init_error)

    def _cuDeviceGetName(self, n, dev):
        return Result.CUDA_SUCCESS, b"Fake GPU\0\0"

    def _cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        """A 'kernel' that doubles its first float argument's 3 elements into the second."""
        ptrs = (ctypes.c_uint64 * 2).from_address(params)
        src, dst = (ctypes.c_uint64.from_address(p).value for p in ptrs)
        x = (ctypes.c_float * 3).from_address(src)
        y = (ctypes.c_float * 3).from_address(dst)
        for i in range(3):
            y[i] = 2 * x[i]
        return (Result.CUDA_SUCCESS,)


PLAN = {
    "buffers": [
        {"name": "x", "shape": [3], "dtype": "float32"},
        {"name": "y", "shape": [3], "dtype": "float32"},
    ],
    "n_params": 2,
    "kernels": [{"name": "main_k0", "grid": [5, 1, 1], "block": [64, 2, 1], "args": [0, 1]}],
}


def test_plan_upload_launch_download(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(launch, "_driver", lambda: fake)
    gpu = launch.Gpu()
    assert gpu.name == "Fake GPU"
    loaded = gpu.load(".version 7.8\n", PLAN)
    x, y = np.array([1, 2, 3], np.float32), np.zeros(3, np.float32)
    loaded.run([x, y])
    np.testing.assert_array_equal(y, [2, 4, 6])
    names = [n for n, _ in fake.calls]
    assert names[:4] == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"]
    (args,) = [a for n, a in fake.calls if n == "cuLaunchKernel"]
    assert args[1:7] == (5, 1, 1, 64, 2, 1)
    (ptx,) = [a for n, a in fake.calls if n == "cuModuleLoadData"]
    assert ctypes.string_at(ptx[0]) == b".version 7.8\n"  # NUL-terminated image
    assert (
        names.index("cuMemcpyDtoH")
        > names.index("cuCtxSynchronize")
        > names.index("cuLaunchKernel")
    )


def test_a_failing_cuinit_is_gpu_unavailable(monkeypatch):
    monkeypatch.setattr(launch, "_driver", lambda: FakeDriver(Result.CUDA_ERROR_NO_DEVICE))
    with pytest.raises(launch.GpuUnavailable, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        launch.Gpu()
