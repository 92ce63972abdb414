"""Graph level: ONNX import, graph IR, passes, int8 quantization, VTA partitioning, executor.

>>> from pyvta.compiler.graph import compile_model, run_model
>>> cm = compile_model("resnet18.onnx", "vta"); outputs, table = run_model(cm, x)

Nothing is imported eagerly beyond this package's own modules (no side effects at import).
"""

from pyvta.compiler.graph.compiled_model import CompiledModel, compile_model, run_model
from pyvta.compiler.graph.executor import Executor, TimingTable
from pyvta.compiler.graph.ir import Graph, GraphError, Node, Value, check_graph, format_graph
from pyvta.compiler.graph.onnx_import import OnnxImportError, import_onnx
from pyvta.compiler.graph.pipeline import PIPELINE, PipelineOptions, options_for, run_pipeline
from pyvta.compiler.graph.vta_ops import FusedParams, GoldenVta, VtaBackend

__all__ = [
    "PIPELINE",
    "CompiledModel",
    "Executor",
    "FusedParams",
    "GoldenVta",
    "Graph",
    "GraphError",
    "Node",
    "OnnxImportError",
    "PipelineOptions",
    "TimingTable",
    "Value",
    "VtaBackend",
    "check_graph",
    "compile_model",
    "format_graph",
    "import_onnx",
    "options_for",
    "run_model",
    "run_pipeline",
]
