"""The lowering pipelines: explicit, ordered lists of named passes.

``PASSES`` is target independent and runs inside ``compiler.lower``; ``LLVM_PASSES`` runs before
CPU code generation. ``verify`` runs after every pass.
"""

from __future__ import annotations

from pyvta.compiler.ir.stmt import PrimFunc
from pyvta.compiler.ir.verify import verify
from pyvta.compiler.passes.lift_workspace import lift_workspace
from pyvta.compiler.passes.lower_vthread import lower_vthread
from pyvta.compiler.passes.partition_loops import partition_loops
from pyvta.compiler.passes.simplify_stmt import simplify_stmt
from pyvta.compiler.passes.unroll_loops import unroll_loops

PASSES = [
    ("simplify_stmt", simplify_stmt),
]

LLVM_PASSES = [
    ("lift_workspace", lift_workspace),
    ("lower_vthread", lower_vthread),
    ("partition_loops", partition_loops),
    ("unroll_loops", unroll_loops),
    ("simplify_stmt", simplify_stmt),
]


def run_passes(func: PrimFunc, passes, check: bool = True) -> PrimFunc:
    """Apply ``passes`` (``[(name, fn)]``) in order, verifying after each."""
    for name, fn in passes:
        try:
            func = fn(func)
            if check:
                verify(func)
        except Exception as e:
            e.add_note(f"in pass {name}")
            raise
    return func
