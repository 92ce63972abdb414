"""The lowering pipelines: explicit, ordered lists of named passes.

``PASSES`` is target independent and runs inside ``compiler.lower``; each backend owns the list
it runs before code generation (``backend.llvm.passes.LLVM_PASSES``, ``backend.cuda.passes``).
``verify`` runs after every pass.
"""

from __future__ import annotations

from pyvta.compiler.ir.stmt import PrimFunc
from pyvta.compiler.ir.verify import verify
from pyvta.compiler.passes.simplify_stmt import simplify_stmt

PASSES = [
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
