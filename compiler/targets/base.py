"""What every compile target answers: :class:`Target`.

A compiled graph's nodes each carry a *placement* (``Node.target``: ``cpu``, ``vta`` or ``gpu``,
``runtime.ir.TARGETS``): where the node runs. A compile *target* (``cpu``, ``cpu-int8``,
``gpu``, ``vta``) chooses the passes, places the nodes and builds what the artifact records; the
nodes it places on the host keep the placement ``cpu``. The executor finds a placement's node
backend through the target of that name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyvta.isa.errors import PyvtaError
from pyvta.runtime.ir import HOST

if TYPE_CHECKING:
    import numpy as np

    from pyvta.compiler.graph.pipeline import PipelineOptions
    from pyvta.runtime.ir import Graph, Node


class TargetError(PyvtaError, ValueError):
    """A target name that is not one, or a request a target cannot serve."""


class Target:
    """One compile target. Subclasses (one per ``compiler/targets/<name>/``) override what differs.

    Data: ``name``; ``summary`` (one line for help texts); ``placement``: the node placement of
    the layers it compiles (its host layers stay ``cpu``); ``quantized``: int8, calibrated on
    samples; ``accelerator``: its layers are relocatable accelerator kernels (``driver.Kernel``)
    lowered for an ``isa.HwConfig``; ``devices``: the device names ``--device`` may give it
    (``driver.open`` names, or the GPU's), the first the default; ``compile_options``: the
    compile options of a command line that apply to it (``config``, ``search``, ``tuning_log``,
    ``calibration``); ``tuner_backend``: the tuner's backend (a template's ``target``) of its
    operators (None: the device's, or none); ``features``: the x86 feature level
    (``pyvta.host_cpu.X86_LEVELS``) its host CPU kernels are generated for (None: the host's own,
    or ``$PYVTA_CPU_FEATURES``)."""

    name: str = ""
    summary: str = ""
    placement: str = HOST
    quantized: bool = False
    accelerator: bool = False
    devices: tuple[str, ...] = ()
    compile_options: frozenset[str] = frozenset()
    tuner_backend: str | None = None
    features: str | None = None  # the x86 feature level of its host kernels (None: the host's)

    @property
    def default_device(self) -> str | None:
        return self.devices[0] if self.devices else None

    def pipeline_options(
        self,
        samples: list[dict[str, np.ndarray]] | None = None,
        keep_float: tuple[str, ...] | None = None,
        cpu_schedules: dict | None = None,
        block: int | None = None,
        vta_partition: str = "whole",
    ) -> PipelineOptions:
        """The pipeline's options for this target (``compiler.graph.pipeline.options_for``)."""
        raise NotImplementedError

    def _quantized_options(
        self, samples, keep_float, block, int8_pools=False, **flags
    ) -> PipelineOptions:
        from pyvta.compiler.graph.passes.quantize_int8 import QuantConfig
        from pyvta.compiler.graph.pipeline import PipelineOptions
        from pyvta.runtime import layout

        if not samples:
            raise TargetError(
                f"target {self.name!r} quantizes to int8 and needs calibration samples"
            )
        block = layout.BLOCK_ELEMS if block is None else block
        return PipelineOptions(
            QuantConfig(list(samples), keep_float, int8_pools=int8_pools),
            block=block,
            cpu_features=self.features,
            **flags,
        )

    def supports(self, node: Node) -> str | None:
        """None when this target runs ``node`` on its own placement, else the reason it stays
        on the host (what the partitioner asks)."""
        return None

    def compile(self, cm, hw=None, lower: bool = True, gpu_arch: str = "sm_90") -> None:
        """After the pipeline: build what the artifact ``cm`` (a ``CompiledModel``) records for
        this target's layers (accelerator kernels, PTX). Default: nothing."""

    def lower_kernels(self, cm, hw, configs=None, measure=None, search=0, progress=None) -> None:
        """Lower ``cm``'s accelerator nodes into kernels; only an accelerator target has any."""
        from pyvta.runtime.compiled_model import ArtifactError

        raise ArtifactError(f"a {self.name!r} model has no accelerator kernels to lower")

    def node_backend(self, graph: Graph, vta=None):
        """The host's JIT backend for the nodes placed ``self.placement`` (``compiler.targets.jit``;
        the runtime's own defaults: ``runtime.executor.default_backend``)."""
        from pyvta.runtime.ir import GraphError

        raise GraphError(f"target {self.name!r} has no default node backend")

    def check_device(self, name: str) -> str:
        """``name`` when this target's layers run on the device ``name``, else ``TargetError``."""
        raise TargetError(
            f"the {self.name} target runs on the host CPU; a device ({name!r}) applies to"
            " targets with devices (gpu: cuda, cuda-emulated; vta: driver.open names)"
        )

    def probe(self, device: str) -> None:
        """Fail now, before anything is compiled, when the device ``device`` (one of
        ``devices``) cannot be used on this machine. Default: nothing to check (a device of
        ``driver.open`` says so when it is opened)."""

    def device_backend(self, cm, device):
        """The executor's backend for this target's placement running ``cm`` on ``device``."""
        raise TargetError(f"the {self.name} target has no device backend")

    def open_backend(self, cm, device: str, **device_kwargs):
        """The executor's backend for this target's placement running ``cm`` on the device
        called ``device`` (opened here)."""
        raise TargetError(f"the {self.name} target runs on the host CPU; it opens no device")

    def placed(self, graph: Graph) -> list[Node]:
        """The nodes of ``graph`` placed on this target's placement."""
        return [n for n in graph.nodes if n.target == self.placement]

    def __repr__(self) -> str:
        return f"<target {self.name}>"
