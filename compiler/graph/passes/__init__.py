"""Graph passes. Each is ``pass_name(graph, options) -> graph`` and leaves its input untouched.

The order they run in is :data:`compiler.graph.pipeline.PIPELINE`. The targets' own passes
(``compiler/targets/*/``) are imported when first asked for (PEP 562): they import this package's
helpers (``rewrite``), so importing one of them first would otherwise meet this package half
initialised (a fresh process running a cpu-int8 artifact without code did).
"""

import importlib

from pyvta.compiler.graph.passes.eliminate_identities import eliminate_identities
from pyvta.compiler.graph.passes.fold_batch_norm import fold_batch_norm
from pyvta.compiler.graph.passes.fold_constants import fold_constants
from pyvta.compiler.graph.passes.fuse_operators import fuse_operators
from pyvta.compiler.graph.passes.quantize_int8 import quantize_int8
from pyvta.compiler.graph.passes.remove_dead_code import remove_dead_code

_TARGET_PASSES = {
    "alter_cpu_layout": "pyvta.compiler.targets.cpu.alter_cpu_layout",
    "fuse_int8_borders": "pyvta.compiler.targets.cpu_int8.fuse_borders",
    "place_gpu": "pyvta.compiler.targets.gpu.place",
    "pack_layouts": "pyvta.compiler.targets.vta.pack_layouts",
    "partition_targets": "pyvta.compiler.targets.vta.partition_targets",
}


def __getattr__(name: str):
    if name in _TARGET_PASSES:
        return getattr(importlib.import_module(_TARGET_PASSES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "alter_cpu_layout",
    "eliminate_identities",
    "fold_batch_norm",
    "fold_constants",
    "fuse_int8_borders",
    "fuse_operators",
    "pack_layouts",
    "partition_targets",
    "place_gpu",
    "quantize_int8",
    "remove_dead_code",
]
