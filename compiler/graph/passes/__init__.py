"""Graph passes. Each is ``pass_name(graph, options) -> graph`` and leaves its input untouched.

The order they run in is :data:`compiler.graph.pipeline.PIPELINE`.
"""

from pyvta.compiler.graph.passes.eliminate_identities import eliminate_identities
from pyvta.compiler.graph.passes.fold_batch_norm import fold_batch_norm
from pyvta.compiler.graph.passes.fold_constants import fold_constants
from pyvta.compiler.graph.passes.fuse_operators import fuse_operators
from pyvta.compiler.graph.passes.quantize_int8 import quantize_int8
from pyvta.compiler.graph.passes.remove_dead_code import remove_dead_code
from pyvta.compiler.targets.cpu.alter_cpu_layout import alter_cpu_layout
from pyvta.compiler.targets.cpu_int8.fuse_borders import fuse_int8_borders
from pyvta.compiler.targets.gpu.place import place_gpu
from pyvta.compiler.targets.vta.pack_layouts import pack_layouts
from pyvta.compiler.targets.vta.partition_targets import partition_targets

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
