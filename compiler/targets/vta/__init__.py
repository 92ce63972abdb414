"""The ``vta`` target: quantized to int8 (calibrated on samples); conv2d (group 1, unit
dilation) and dense run on the accelerator in the packed layout, each lowered into a relocatable
kernel (``driver.Kernel``) for an ``isa.HwConfig`` (``compiler.backend.vta.graph_backend``); the
other layers stay on the host CPU (placement ``cpu``). It runs on any ``driver.open`` device:
``sim`` (default), ``rtl``, ``pynq``, ``tcp://HOST:PORT``."""

from __future__ import annotations

from pyvta.compiler.targets.base import Target, TargetError
from pyvta.runtime.ir import ACCELERATOR


class VtaTarget(Target):
    name = "vta"
    summary = "int8 (calibrated); conv2d/dense as accelerator kernels, the rest on the host CPU"
    placement = ACCELERATOR
    quantized = True
    accelerator = True
    devices = ("sim", "rtl", "pynq", "tcp://HOST:PORT")
    compile_options = frozenset({"config", "search", "tuning_log", "calibration", "partition"})
    tuner_backend = "vta-sim"

    def pipeline_options(
        self, samples=None, keep_float=None, cpu_schedules=None, block=None, vta_partition="whole"
    ):
        from pyvta.compiler.targets.vta.partition_targets import VTA_PARTITIONS

        if vta_partition not in VTA_PARTITIONS:
            raise TargetError(
                f"vta_partition {vta_partition!r} (allowed: {', '.join(VTA_PARTITIONS)})"
            )
        whole = vta_partition == "whole"
        if whole and keep_float is None:
            keep_float = ()
        return self._quantized_options(
            samples,
            keep_float,
            block,
            int8_pools=whole,
            use_vta=True,
            int8_kernels=True,
            vta_partition=vta_partition,
        )

    def supports(self, node, graph=None, partition="whole") -> str | None:
        """None when ``node`` runs on the accelerator under ``partition`` ("whole" or "legacy"),
        else the one-line reason (``partition_targets.vta_reason``; pools need their ``graph``)."""
        from pyvta.compiler.targets.vta.partition_targets import vta_reason

        return vta_reason(graph, node, partition)

    def compile(self, cm, hw=None, lower: bool = True, gpu_arch: str = "sm_90") -> None:
        cm.hw = hw
        if lower:
            self.lower_kernels(cm, hw)

    def lower_kernels(self, cm, hw, configs=None, measure=None, search=0, progress=None) -> None:
        from pyvta.compiler.backend.vta.graph_backend import compile_kernels
        from pyvta.isa import HwConfig

        cm.hw = hw or cm.hw or HwConfig()
        cm.kernels = compile_kernels(cm.graph, cm.hw, configs, measure, search, progress)

    def device_backend(self, cm, device):
        """The executor's accelerator backend with ``cm``'s kernels loaded onto ``device`` (a
        ``driver.Device``), refused when they were lowered for another HwConfig
        (``runtime.compiled_model.CompiledModel.accelerator``)."""
        return cm.accelerator(device)

    def open_backend(self, cm, device: str, **device_kwargs):
        """Open the ``driver.open`` device ``device`` for ``cm``'s HwConfig and load its
        kernels: the executor's accelerator backend."""
        from pyvta import driver

        return self.device_backend(cm, driver.open(device, config=cm.hw, **device_kwargs))

    def check_device(self, name: str) -> str:
        from pyvta.driver.registry import device_kinds, parse_name

        if parse_name(name)[0] not in device_kinds():
            raise TargetError(
                f"device {name!r} does not run the {self.name} target (allowed: driver.open"
                f" names: {', '.join(device_kinds())}, e.g. sim, rtl, pynq, tcp://HOST:PORT)"
            )
        return name


TARGET = VtaTarget()
