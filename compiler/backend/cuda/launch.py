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


def time_launches_ms(gpu: Gpu, launch, number: int, repeat: int) -> float:
    """Best-of-``repeat`` mean milliseconds of ``launch()`` (after one warm-up), timed with
    CUDA events around ``number`` back-to-back calls."""
    start, end = gpu.call("cuEventCreate", 0), gpu.call("cuEventCreate", 0)
    launch()
    gpu.call("cuCtxSynchronize")
    best = float("inf")
    for _ in range(repeat):
        gpu.call("cuEventRecord", start, 0)
        for _ in range(number):
            launch()
        gpu.call("cuEventRecord", end, 0)
        gpu.call("cuEventSynchronize", end)
        best = min(best, gpu.call("cuEventElapsedTime", start, end) / number)
    return best


class LoadedPlan:
    """``ptx`` loaded as a module, with device buffers for every buffer of ``plan``;
    ``bound``: device pointers of its first parameters, owned by the caller (not allocated
    here, not freed by ``close``)."""

    def __init__(self, gpu: Gpu, ptx: str, plan: dict, bound=()):
        self.gpu, self.plan = gpu, plan
        self._image = np.frombuffer(ptx.encode() + b"\0", np.uint8)
        self.module = gpu.call("cuModuleLoadData", self._image.ctypes.data)
        self.functions = [
            gpu.call("cuModuleGetFunction", self.module, k["name"].encode())
            for k in plan["kernels"]
        ]
        self._owned = [
            gpu.call("cuMemAlloc", max(_nbytes(b), 1)) for b in plan["buffers"][len(bound) :]
        ]
        self.dptrs = [*bound, *self._owned]
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
        return time_launches_ms(self.gpu, self.launch, number, repeat)

    def close(self) -> None:
        for p in self._owned:
            self.gpu.call("cuMemFree", p)
        self.gpu.call("cuModuleUnload", self.module)
        self.dptrs, self._owned = [], []


class LoadedNetwork:
    """A network plan on the GPU: one device buffer per value (a view shares its source's),
    the ``constants`` (name -> array) uploaded once, every node's PTX (``ptx``: node name ->
    text) loaded with its parameters bound to the values' buffers. ``run`` uploads the inputs,
    launches every node in order and downloads the outputs; nothing else crosses the bus."""

    def __init__(self, gpu: Gpu, net: dict, ptx: dict, constants: dict):
        self.gpu, self.net = gpu, net
        self.values = {v["name"]: v for v in net["values"]}
        aliases = net.get("aliases", {})
        self.dptrs, self._owned = {}, []
        for name, v in self.values.items():
            if name not in aliases:
                self.dptrs[name] = gpu.call("cuMemAlloc", max(_nbytes(v), 1))
                self._owned.append(self.dptrs[name])
        for name in aliases:
            root = name
            while root in aliases:
                root = aliases[root]
            self.dptrs[name] = self.dptrs[root]
        for name in net["constants"]:
            self.upload(name, constants[name])
        self.nodes = [
            LoadedPlan(gpu, ptx[n["name"]], n["plan"], [self.dptrs[v] for v in n["values"]])
            for n in net["nodes"]
        ]
        self.index = {n["name"]: i for i, n in enumerate(net["nodes"])}

    def upload(self, name: str, array) -> None:
        v = self.values[name]
        a = np.ascontiguousarray(array, v["dtype"]).reshape(v["shape"])
        self.gpu.call("cuMemcpyHtoD", self.dptrs[name], a.ctypes.data, a.nbytes)

    def download(self, name: str) -> np.ndarray:
        v = self.values[name]
        a = np.empty(v["shape"], v["dtype"])
        self.gpu.call("cuMemcpyDtoH", a.ctypes.data, self.dptrs[name], a.nbytes)
        return a

    def launch(self) -> None:
        """Every node's kernels, in graph order, on the default stream."""
        for node in self.nodes:
            node.launch()

    def run(self, inputs: dict) -> dict:
        """Upload ``inputs`` (name -> array), launch, synchronise; the outputs by name."""
        for name in self.net["inputs"]:
            self.upload(name, inputs[name])
        self.launch()
        self.gpu.call("cuCtxSynchronize")
        return {name: self.download(name) for name in self.net["outputs"]}

    def time_ms(self, number: int = 10, repeat: int = 3) -> float:
        """Best-of-``repeat`` mean milliseconds of one inference's launches (CUDA events)."""
        return time_launches_ms(self.gpu, self.launch, number, repeat)

    def close(self) -> None:
        for node in self.nodes:
            node.close()
        for p in self._owned:
            self.gpu.call("cuMemFree", p)
        self.nodes, self._owned = [], []
