"""The ``gpu`` target: a float graph, every node on the GPU (the ``place_gpu`` pass, each node's
default schedule), compiled to PTX at compile time (``compiler.targets.gpu.kernels``); it runs on
the device ``cuda`` (an NVIDIA GPU) or ``cuda-emulated`` (the same lowered kernels as CPU
code)."""

from __future__ import annotations

from pyvta.compiler.targets.base import Target, TargetError
from pyvta.compiler.targets.gpu.devices import NAMES, GpuDeviceError, gpu_device
from pyvta.runtime.ir import GPU


class GpuTarget(Target):
    name = "gpu"
    summary = "float32, every layer compiled to PTX for an NVIDIA GPU (or emulated on the CPU)"
    placement = GPU
    devices = NAMES  # compiler.targets.gpu.devices

    def pipeline_options(
        self, samples=None, keep_float=None, cpu_schedules=None, block=None, vta_partition="whole"
    ):
        from pyvta.compiler.graph.pipeline import PipelineOptions

        return PipelineOptions(gpu=True)

    def compile(self, cm, hw=None, lower: bool = True, gpu_arch: str = "sm_90") -> None:
        from pyvta.compiler.targets.gpu.kernels import compile_gpu_kernels

        cm.gpu_kernels = compile_gpu_kernels(cm.graph, gpu_arch)

    def node_backend(self, graph, vta=None):
        from pyvta.compiler.targets.gpu.kernels import gpu_backend

        return gpu_backend(graph, self.default_device)

    def open_backend(self, cm, device: str, **device_kwargs):
        """The executor's backend running ``cm``'s GPU nodes on ``device`` (``cuda``,
        ``cuda-emulated``)."""
        return cm.gpu_backend(self.check_device(device), **device_kwargs)

    def check_device(self, name: str) -> str:
        try:
            return gpu_device(name).name
        except GpuDeviceError:
            raise TargetError(
                f"device {name!r} does not run the {self.name} target"
                f" (allowed: {', '.join(self.devices)})"
            ) from None

    def probe(self, device: str) -> None:
        """An NVIDIA GPU is opened now (``GpuUnavailableError`` naming why there is none); the
        emulation needs nothing."""
        if gpu_device(self.check_device(device)).on_gpu:
            from pyvta.compiler.targets.gpu.kernels import open_gpu

            open_gpu()


TARGET = GpuTarget()
