"""A stand-in for ``cuda.bindings.driver`` that runs kernels through ``cuda-emulated``, so the
real-GPU path (``backend.cuda.launch``, ``targets.gpu.kernels.DeviceGpu``) runs in CI end to end:
device memory is host memory, ``cuModuleLoadData`` finds the module whose PTX it was given
among ``modules`` (PTX text -> the emulated build of the same function), and launching a
function runs that module on the arrays its pointer arguments address.

Only one-kernel functions whose launch passes every parameter can run (a launch of one kernel
of several cannot be emulated alone); anything else raises. ``calls`` records every driver
call, for tests of the launch sequence. Events time the host's wall clock (the emulation's
time, nothing about a GPU's).
"""

from __future__ import annotations

import ctypes
import enum
import time

import numpy as np


class Result(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100


class EmulatingDriver:
    CUresult = Result

    def __init__(self, modules: dict, init_error: Result = Result.CUDA_SUCCESS) -> None:
        self.modules, self.init_error = modules, init_error
        self.calls: list[tuple[str, tuple]] = []
        self.memory: dict[int, np.ndarray] = {}
        self._loaded: dict[int, object] = {}
        self._functions: dict[int, tuple[object, str]] = {}
        self._events: dict[int, float] = {}

    def __getattr__(self, name):
        impl = getattr(type(self), f"_{name}", None)

        def call(*args):
            self.calls.append((name, args))
            return impl(self, *args) if impl else (Result.CUDA_SUCCESS, None)

        return call

    def _cuInit(self, flags):
        return (self.init_error,)

    def _cuGetErrorName(self, err):
        return Result.CUDA_SUCCESS, err.name.encode()

    def _cuDeviceGetName(self, n, dev):
        return Result.CUDA_SUCCESS, b"Emulated GPU\0"

    def _cuMemAlloc(self, nbytes):
        buf = np.zeros(nbytes, np.uint8)
        self.memory[buf.ctypes.data] = buf
        return Result.CUDA_SUCCESS, buf.ctypes.data

    def _cuMemFree(self, ptr):
        del self.memory[int(ptr)]
        return (Result.CUDA_SUCCESS,)

    def _cuMemcpyHtoD(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return (Result.CUDA_SUCCESS,)

    def _cuMemcpyDtoH(self, dst, src, n):
        ctypes.memmove(dst, src, n)
        return (Result.CUDA_SUCCESS,)

    def _cuModuleLoadData(self, image):
        ptx = ctypes.string_at(image).decode()
        handle = len(self._loaded) + 1
        self._loaded[handle] = self.modules[ptx]
        return Result.CUDA_SUCCESS, handle

    def _cuModuleGetFunction(self, module, name):
        handle = len(self._functions) + 1
        self._functions[handle] = (self._loaded[module], name.decode())
        return Result.CUDA_SUCCESS, handle

    def _cuEventCreate(self, flags):
        handle = len(self._events) + 1
        self._events[handle] = 0.0
        return Result.CUDA_SUCCESS, handle

    def _cuEventRecord(self, event, stream):
        self._events[event] = time.perf_counter()
        return (Result.CUDA_SUCCESS,)

    def _cuEventElapsedTime(self, start, end):
        return Result.CUDA_SUCCESS, 1e3 * (self._events[end] - self._events[start])

    def _cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        mod, name = self._functions[f]
        if len(mod.kernels) != 1 or len(mod.kernels[0].params) != len(mod.func.params):
            raise NotImplementedError(f"{name}: only one-kernel functions are emulated here")
        ptrs = (ctypes.c_uint64 * len(mod.func.params)).from_address(params)
        arrays = []
        for p, buf in zip(ptrs, mod.func.params, strict=True):
            addr = ctypes.c_uint64.from_address(p).value
            mem = self.memory[addr]
            arrays.append(mem.view(buf.dtype)[: int(np.prod(buf.shape))].reshape(buf.shape))
        mod(*arrays)
        return (Result.CUDA_SUCCESS,)
