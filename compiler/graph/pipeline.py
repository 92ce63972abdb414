"""The graph compilation pipeline: one explicit, ordered list of named passes.

``run_pipeline`` runs :data:`PIPELINE` in order and checks the graph after every pass. Which
passes change anything depends on :class:`PipelineOptions` (built by :func:`options_for`):

- ``"cpu"``: float graph, everything on the CPU (quantize/partition/pack are no-ops); the
  layers run compiled kernels in the blocked NCHW{c}c layout (``alter_cpu_layout``),
- ``"cpu-int8"``: int8 quantized, everything on the CPU; the quantized conv2d/dense run
  compiled int8 kernels (``compiler.targets.cpu_int8.kernels``, the arithmetic of VTA), the
  float layers (the first conv, pools between dequantize and quantize, the classifier) the
  float kernels of ``alter_cpu_layout``, (de)quantize compiled (``fuse_int8_borders`` folds
  the float layers' layout transforms into them),
- ``"vta"``: int8 quantized, conv2d/dense/pools on VTA in the packed layout (every layer the
  accelerator can lower; ``vta_partition="legacy"``: the float first conv, pools and last
  dense on the CPU), the rest on the CPU,
- ``"gpu"``: float graph, every node on the GPU (``place_gpu``; kernels in
  ``compiler.targets.gpu.kernels``, compiled to PTX by ``compile_model``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.graph.passes import (
    alter_cpu_layout,
    eliminate_identities,
    fold_batch_norm,
    fold_constants,
    fuse_int8_borders,
    fuse_operators,
    pack_layouts,
    partition_targets,
    place_gpu,
    quantize_int8,
    remove_dead_code,
)
from pyvta.compiler.graph.passes.quantize_int8 import KeepFloat, QuantConfig, WeightScales
from pyvta.runtime import layout
from pyvta.runtime.ir import Graph, check_graph


@dataclass
class PipelineOptions:
    """``quant`` None keeps float; ``use_vta`` places conv2d/dense on VTA; ``block`` in elems.

    ``cpu_kernels``: plan the NCHW{c}c layout and compile the float CPU layers (each value's
    channel block: ``alter_cpu_layout.channel_block``); ``cpu_schedules`` maps conv workload keys to tuned
    schedule choices (``compiler.targets.cpu.kernels``); ``cpu_build`` builds their kernels
    at the end (False: plan only, e.g. to list the layers a tuner should tune); ``gpu``: every
    node on the GPU with its default schedule; ``int8_kernels``: build the compiled int8
    kernels of the quantized CPU nodes at the end."""

    quant: QuantConfig | None = None
    use_vta: bool = False
    block: int = layout.BLOCK_ELEMS
    cpu_kernels: bool = False
    cpu_schedules: dict | None = None
    cpu_build: bool = True
    gpu: bool = False
    int8_kernels: bool = False
    # what the accelerator takes (``partition_targets.VTA_PARTITIONS``): "whole" every layer
    # it can lower (stem, pools, classifier too), "legacy" the conv/dense layers between a
    # float first conv and a float last dense (today's partition, for comparison)
    vta_partition: str = "whole"
    # the x86 feature level the host CPU's kernels are generated for (the compile target's
    # ``features``; None: ``$PYVTA_CPU_FEATURES``, else the host's own)
    cpu_features: str | None = None


PassFn = Callable[[Graph, PipelineOptions], Graph]


def build_cpu_kernels(graph: Graph, options: PipelineOptions) -> Graph:
    """Compile every kernel of the graph's compiled CPU ops now (they land in the disk cache,
    keyed by their loop IR), so running the compiled model does not generate code; the graph
    is returned unchanged."""
    if options.cpu_kernels and options.cpu_build:
        from pyvta.compiler.targets.cpu.kernels import CpuKernels

        CpuKernels(graph, features=options.cpu_features)
    if options.int8_kernels and options.cpu_build:
        from pyvta.compiler.targets.cpu_int8.kernels import CpuInt8Kernels

        CpuInt8Kernels(graph, features=options.cpu_features)
    return graph


PIPELINE: list[tuple[str, PassFn]] = [
    ("fold_constants", fold_constants),
    ("eliminate_identities", eliminate_identities),
    ("fold_batch_norm", fold_batch_norm),
    ("fuse_operators", fuse_operators),
    ("remove_dead_code", remove_dead_code),
    ("quantize_int8", quantize_int8),
    ("partition_targets", partition_targets),
    ("place_gpu", place_gpu),
    ("pack_layouts", pack_layouts),
    ("alter_cpu_layout", alter_cpu_layout),
    ("fuse_int8_borders", fuse_int8_borders),
    ("remove_dead_code", remove_dead_code),
    ("build_cpu_kernels", build_cpu_kernels),
]


# One weight scale per layer unless asked: both int8 targets quantize alike (cpu-int8 and vta
# compute the same bits from the same calibration), and on vta a channel shift is one more ALU
# pass a tile with the bias moved from a GEMM pass to the ALU (ResNet-18 224: 6.90 -> 7.43 M
# cycles, +7.7%; the shipped tuning logs are for per-layer epilogues). AUTO: per channel where
# it brings a layer closer to float (benchmarks/int8_fidelity.py).
DEFAULT_WEIGHT_SCALES = WeightScales.TENSOR


def options_for(
    target,
    samples: list[dict[str, np.ndarray]] | None = None,
    keep_float: tuple[str, ...] | KeepFloat | None = None,
    cpu_schedules: dict | None = None,
    block: int = layout.BLOCK_ELEMS,
    vta_partition: str = "whole",
    weight_scales: WeightScales | None = None,
) -> PipelineOptions:
    """Options for a compile target (a ``compiler.targets`` name or Target); int8 targets
    need ``samples``; ``cpu_schedules`` (tuned conv schedules by workload key) apply to
    ``"cpu"``; ``block``: the accelerator's block (``HwConfig.block_in``) that ``vta`` nodes are
    packed to; ``vta_partition`` ("whole" or "legacy", ``partition_targets``): for ``"vta"``,
    "whole" quantizes every conv/dense (``keep_float`` default: none) and the pools;
    ``weight_scales``: an int8 target's weight scales, per layer or per output channel (default
    ``DEFAULT_WEIGHT_SCALES``; a float target has none)."""
    from pyvta.compiler.targets import get_target

    options = get_target(target).pipeline_options(
        samples, keep_float, cpu_schedules, block, vta_partition=vta_partition
    )
    if options.quant is not None:
        scales = weight_scales or DEFAULT_WEIGHT_SCALES
        options.quant = dataclasses.replace(options.quant, weight_scales=scales)
    return options


def run_pipeline(
    graph: Graph,
    options: PipelineOptions,
    trace: Callable[[str, Graph], None] | None = None,
) -> Graph:
    """Run every pass of :data:`PIPELINE` in order, checking the graph after each one.

    ``trace(pass_name, graph)`` is called after each pass (e.g. to print the IR)."""
    check_graph(graph)
    for name, fn in PIPELINE:
        graph = fn(graph, options)
        try:
            check_graph(graph)
        except ValueError as e:
            raise type(e)(f"after pass {name}: {e}") from e
        if trace is not None:
            trace(name, graph)
    return graph
