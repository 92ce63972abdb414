"""Graph level: ONNX import, graph IR, passes, int8 quantization, VTA partitioning, executor.

>>> from pyvta.compiler.graph import compile_model, run_model
>>> cm = compile_model("resnet18.onnx", "vta"); outputs, table = run_model(cm, x)

The names below are imported when first used (PEP 562), so running a compiled artifact (the
executor, the artifact loader) imports neither onnx nor the compiler's passes.
"""

import importlib

_HOMES = {
    "CompiledModel": "compiled_model",
    "compile_model": "compiled_model",
    "run_model": "compiled_model",
    "Executor": "executor",
    "TimingTable": "executor",
    "Graph": "ir",
    "GraphError": "ir",
    "Node": "ir",
    "Value": "ir",
    "check_graph": "ir",
    "format_graph": "ir",
    "OnnxImportError": "onnx_import",
    "import_onnx": "onnx_import",
    "PIPELINE": "pipeline",
    "PipelineOptions": "pipeline",
    "options_for": "pipeline",
    "run_pipeline": "pipeline",
    "FusedParams": "vta_ops",
    "GoldenVta": "vta_ops",
    "VtaBackend": "vta_ops",
    "WeightScales": "passes.quantize_int8",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
