"""Graph level: ONNX import, passes, int8 quantization, VTA partitioning (the graph IR, the
executor and the numpy layers a board runs are ``pyvta.runtime``'s).

>>> from pyvta.compiler.graph import compile_model; from pyvta.runtime.compiled_model import run_model
>>> cm = compile_model("resnet18.onnx", "vta"); outputs, table = run_model(cm, x)

The names below are imported when first used (PEP 562), so running a compiled artifact (the
executor, the artifact loader) imports neither onnx nor the compiler's passes.
"""

import importlib

_HOMES = {
    "compile_model": "compile",
    "OnnxImportError": "onnx_import",
    "import_onnx": "onnx_import",
    "PIPELINE": "pipeline",
    "PipelineOptions": "pipeline",
    "options_for": "pipeline",
    "run_pipeline": "pipeline",
    "WeightScales": "passes.quantize_int8",
    "KeepFloat": "passes.quantize_int8",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
