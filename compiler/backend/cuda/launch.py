"""Run PTX kernels on an NVIDIA GPU through the CUDA driver API (``cuda-bindings``).

This file imports only numpy (and ``cuda.bindings`` when a ``Gpu`` is opened), so
``benchmarks/gpu_check.py`` can load it by path on a GPU machine without pyvta's other
dependencies. A *plan* is the JSON-able launch description the compiler writes::

    {"buffers": [{"name", "shape", "dtype"}...],   # parameters first, then workspace
     "n_params": P,
     "kernels": [{"name", "grid": [x, y, z], "block": [x, y, z], "args": [buffer index...]}]}
"""

from __future__ import annotations

import numpy as np


class GpuUnavailable(RuntimeError):
    """No usable GPU here: cuda-bindings missing, or ``cuInit`` failed (no driver / device)."""


class GpuError(RuntimeError):
    """A CUDA driver call failed."""


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise GpuUnavailable("cuda-bindings is not installed (pip install cuda-bindings)") from None
    return driver


class Gpu:
    """The primary context of device ``ordinal``; ``GpuUnavailable`` if there is none."""

    def __init__(self, ordinal: int = 0):
        self.cu = cu = _driver()
        try:
            (err,) = cu.cuInit(0)
        except Exception as e:  # cuda-bindings raises when libcuda.so itself is missing
            raise GpuUnavailable(f"cuInit failed: {e} (no NVIDIA driver)") from None
        if err != cu.CUresult.CUDA_SUCCESS:
            raise GpuUnavailable(f"cuInit failed: {self._name(err)} (no NVIDIA driver or GPU)")
        self.device = self.call("cuDeviceGet", ordinal)
        self.context = self.call("cuDevicePrimaryCtxRetain", self.device)
        self.call("cuCtxSetCurrent", self.context)
        raw = self.call("cuDeviceGetName", 128, self.device)
        self.name = raw.split(b"\0", 1)[0].decode()

    def _name(self, err) -> str:
        got = self.cu.cuGetErrorName(err)
        return got[1].decode() if got[0] == self.cu.CUresult.CUDA_SUCCESS else str(err)

    def call(self, fn: str, *args):
        """``cuda.bindings.driver.<fn>(*args)``; its result, or ``GpuError`` on failure."""
        err, *rest = getattr(self.cu, fn)(*args)
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise GpuError(f"{fn} failed: {self._name(err)}")
        return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)

    def load(self, ptx: str, plan: dict) -> LoadedPlan:
        return LoadedPlan(self, ptx, plan)


def _nbytes(b: dict) -> int:
    return int(np.prod(b["shape"])) * np.dtype(b["dtype"]).itemsize


class LoadedPlan:
    """``ptx`` loaded as a module, with device buffers for every buffer of ``plan``."""

    def __init__(self, gpu: Gpu, ptx: str, plan: dict):
        self.gpu, self.plan = gpu, plan
        self._image = np.frombuffer(ptx.encode() + b"\0", np.uint8)
        self.module = gpu.call("cuModuleLoadData", self._image.ctypes.data)
        self.functions = [
            gpu.call("cuModuleGetFunction", self.module, k["name"].encode())
            for k in plan["kernels"]
        ]
        self.dptrs = [gpu.call("cuMemAlloc", max(_nbytes(b), 1)) for b in plan["buffers"]]
        self._holders = [np.array([int(p)], np.uint64) for p in self.dptrs]
        self._args = [
            np.array([self._holders[i].ctypes.data for i in k["args"]], np.uint64)
            for k in plan["kernels"]
        ]

    def upload(self, arrays) -> None:
        for a, p in zip(arrays, self.dptrs, strict=False):
            a = np.ascontiguousarray(a)
            self.gpu.call("cuMemcpyHtoD", p, a.ctypes.data, a.nbytes)

    def download(self, arrays) -> None:
        for a, p in zip(arrays, self.dptrs, strict=False):
            self.gpu.call("cuMemcpyDtoH", a.ctypes.data, p, a.nbytes)

    def launch(self) -> None:
        """Every kernel of the plan, in order, on the default stream."""
        for k, f, args in zip(self.plan["kernels"], self.functions, self._args, strict=True):
            gx, gy, gz = k["grid"]
            bx, by, bz = k["block"]
            self.gpu.call("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, 0, 0, args.ctypes.data, 0)

    def run(self, arrays) -> None:
        """Upload the parameter ``arrays``, launch, synchronise, download them in place."""
        self.upload(arrays)
        self.launch()
        self.gpu.call("cuCtxSynchronize")
        self.download(arrays)

    def time_ms(self, number: int = 10, repeat: int = 3) -> float:
        """Best-of-``repeat`` mean milliseconds of one launch of the plan (CUDA events)."""
        start, end = self.gpu.call("cuEventCreate", 0), self.gpu.call("cuEventCreate", 0)
        self.launch()
        self.gpu.call("cuCtxSynchronize")
        best = float("inf")
        for _ in range(repeat):
            self.gpu.call("cuEventRecord", start, 0)
            for _ in range(number):
                self.launch()
            self.gpu.call("cuEventRecord", end, 0)
            self.gpu.call("cuEventSynchronize", end)
            best = min(best, self.gpu.call("cuEventElapsedTime", start, end) / number)
        return best

    def close(self) -> None:
        for p in self.dptrs:
            self.gpu.call("cuMemFree", p)
        self.gpu.call("cuModuleUnload", self.module)
        self.dptrs = []
