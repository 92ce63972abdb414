"""The ``cpu`` target: a float graph, every layer on the host CPU; conv2d/dense/pooling run
compiled kernels in the blocked NCHW{c}c layout (``compiler.targets.cpu.kernels``), the rest the
numpy layers of ``runtime.cpu_ops``.

The CPU is data: ``features`` names the x86 feature level its kernels are generated for (an
``X86_LEVELS`` name of ``pyvta.host_cpu``; None: the host's own, or ``$PYVTA_CPU_FEATURES``), so a
second feature set (or another CPU) is one more folder with ``TARGET = CpuTarget(name,
features=...)``, not a branch.
"""

from __future__ import annotations

from pyvta.compiler.targets.base import Target
from pyvta.runtime.ir import HOST


class CpuTarget(Target):
    placement = HOST
    tuner_backend = "llvm"

    def __init__(self, name: str = "cpu", features: str | None = None, summary: str = "") -> None:
        self.name = name
        self.features = features
        self.summary = summary or "float32, every layer compiled for the host CPU"
        self.compile_options = frozenset({"tuning_log", "other_cpu_records"})

    def machine(self, num_threads: int | None = None):
        """The CPU the kernels are generated for (``compiler.backend.llvm.CpuTarget``)."""
        from pyvta.compiler.backend.llvm import CpuTarget as Machine

        return Machine.host(num_threads, self.features)

    def pipeline_options(
        self, samples=None, keep_float=None, cpu_schedules=None, block=None, vta_partition="whole"
    ):
        from pyvta.compiler.graph.pipeline import PipelineOptions

        return PipelineOptions(
            cpu_kernels=True, cpu_schedules=cpu_schedules, cpu_features=self.features
        )

    def node_backend(self, graph, vta=None):
        """The graph's host layers, kernels generated for ``features``
        (``compiler.targets.jit.host_backend``)."""
        from pyvta.compiler.targets.jit import host_backend

        return host_backend(graph, self)


TARGET = CpuTarget()
