"""The ``cpu-int8`` target: quantized to int8 (calibrated on samples), every layer on the host
CPU; the quantized conv2d/dense run compiled int8 kernels with the accelerator's arithmetic
(``compiler.targets.cpu_int8.kernels``), its float layers the ``cpu`` target's compiled
float kernels, (de)quantize compiled kernels that read / write the float layers' blocked layout
(``fuse_borders``). Its nodes are placed ``cpu``: the
executor runs them through the ``cpu`` target's node backend."""

from __future__ import annotations

from pyvta.compiler.targets.base import Target
from pyvta.runtime.ir import HOST


class CpuInt8Target(Target):
    summary = "int8 (calibrated), every layer on the host CPU with the accelerator's arithmetic"
    placement = HOST
    quantized = True
    compile_options = frozenset({"calibration"})

    def __init__(self, name: str = "cpu-int8", features: str | None = None) -> None:
        self.name = name
        self.features = features  # the x86 feature level of its kernels (None: the host's)

    def pipeline_options(
        self, samples=None, keep_float=None, cpu_schedules=None, block=None, vta_partition="whole"
    ):
        # its float layers (the first conv, pools, concat, classifier): compiled float kernels
        return self._quantized_options(
            samples, keep_float, block, int8_kernels=True, cpu_kernels=True
        )


TARGET = CpuInt8Target()
