"""Compile an ONNX file for a target: import, the pipeline, calibration, kernels; the result is
a ``runtime.compiled_model.CompiledModel`` (save it, load it and run it with ``pyvta.runtime``).

>>> cm = compile_model("resnet18.onnx", "vta"); cm.save("resnet18.vta.npz")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pyvta.isa import DEFAULT_CONFIG, HwConfig
from pyvta.runtime.compiled_model import ArtifactError, CompiledModel, check_path
from pyvta.runtime.ir import Graph

if TYPE_CHECKING:
    from pyvta.compiler.graph.passes.quantize_int8 import KeepFloat, WeightScales


def default_calibration(graph: Graph, count: int = 8, seed: int = 0) -> list[dict]:
    """Seeded standard-normal samples for every graph input (what the zoo models expect)."""
    rng = np.random.default_rng(seed)
    return [
        {n: rng.standard_normal(graph.values[n].shape).astype(np.float32) for n in graph.inputs}
        for _ in range(count)
    ]


def compile_model(
    path: str | Path,
    target: str = "vta",
    calibration_inputs: list[dict[str, np.ndarray]] | str | Path | None = None,
    keep_float: tuple[str, ...] | KeepFloat | None = None,
    lower: bool = True,
    hw: HwConfig | None = None,
    cpu_schedules: dict | None = None,
    input_shapes: dict | None = None,
    gpu_arch: str = "sm_90",
    vta_partition: str = "whole",
    weight_scales: WeightScales | None = None,
) -> CompiledModel:
    """Import an ONNX file and run the pipeline for ``target`` (``cpu``, ``cpu-int8``, ``vta``,
    ``gpu``: every node's PTX for ``gpu_arch`` compiled here).

    ``cpu_schedules``: tuned conv schedules for ``cpu`` (``tuner.cpu_network.cpu_schedules``).

    Int8 targets calibrate on ``calibration_inputs``: samples (dicts by input name), or a path
    to a folder of ``.npy`` / an ``.npz`` (``calibrate.load_calibration``); default: 8 seeded
    standard-normal samples, see :func:`default_calibration`. For ``vta``, ``lower`` also lowers every
    accelerator node's kernel for ``hw`` with default schedules (``lower_kernels`` gives the
    choice of configs); ``hw`` (default ``isa.DEFAULT_CONFIG``) also sets the block the graph's
    accelerator nodes are packed to. (The importer and the pipeline are imported here, so loading
    and running an artifact needs neither onnx nor the compiler's passes.) ``vta_partition``:
    "whole" (every layer the accelerator lowers) or "legacy" (today's partition: float first
    conv, pools and last dense on the CPU), see ``compiler.targets.vta.partition_targets``.
    ``weight_scales`` (int8 targets, ``WeightScales``): one per layer, per output channel, or per
    channel where that brings a layer's output closer to float; default
    ``pipeline.DEFAULT_WEIGHT_SCALES`` (one per layer). ``keep_float`` (int8 targets): the
    conv2d/dense names left in float, or a ``KeepFloat`` choice (None: the target's default;
    ``KeepFloat.NONE``: all int8, the same bits on every CPU)."""
    from pyvta.compiler.graph.onnx_import import import_onnx
    from pyvta.compiler.graph.pipeline import options_for, run_pipeline
    from pyvta.compiler.targets import TargetError, get_target

    check_path(path, "path")
    try:
        spec = get_target(target)
    except TargetError as e:
        raise ArtifactError(str(e)) from None
    if hw is not None and not isinstance(hw, HwConfig):
        raise ArtifactError(f"hw must be an isa.HwConfig or None, got {type(hw).__name__}")
    graph = import_onnx(path, input_shapes)  # input_shapes: fixed dims for symbolic ones
    samples = calibration_inputs
    if isinstance(samples, str | Path):
        from pyvta.compiler.graph.calibrate import load_calibration

        samples = load_calibration(samples, graph)
    if spec.quantized and samples is None:
        samples = default_calibration(graph)
    block = (hw or DEFAULT_CONFIG).block_in
    options = options_for(
        spec,
        samples,
        keep_float,
        cpu_schedules,
        block=block,
        vta_partition=vta_partition,
        weight_scales=weight_scales,
    )
    cm = CompiledModel(run_pipeline(graph, options), spec.name)
    spec.compile(cm, hw=hw, lower=lower, gpu_arch=gpu_arch)
    return cm


def lower_kernels(
    cm: CompiledModel,
    hw: HwConfig | None = None,
    configs: dict | None = None,
    measure=None,
    search: int = 0,
    progress=None,
) -> CompiledModel:
    """Lower every accelerator node of ``cm`` into its kernel for ``hw`` (default: the model's
    ``hw``, else the default config); see ``compiler.backend.vta.graph_backend.compile_kernels``.
    Returns ``cm``."""
    from pyvta.compiler.targets import get_target

    get_target(cm.target).lower_kernels(cm, hw, configs, measure, search, progress)
    return cm
