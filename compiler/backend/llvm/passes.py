"""The CPU backend's pass list: runs on the lowered function before LLVM code generation.
``verify`` runs after every pass (``compiler.passes.run_passes``)."""

from __future__ import annotations

from pyvta.compiler.passes.lift_workspace import lift_workspace
from pyvta.compiler.passes.lower_vthread import lower_vthread
from pyvta.compiler.passes.partition_loops import partition_loops
from pyvta.compiler.passes.simplify_stmt import simplify_stmt
from pyvta.compiler.passes.unroll_loops import unroll_loops

LLVM_PASSES = [
    ("lift_workspace", lift_workspace),
    ("lower_vthread", lower_vthread),
    ("partition_loops", partition_loops),
    ("unroll_loops", unroll_loops),
    ("simplify_stmt", simplify_stmt),
]
