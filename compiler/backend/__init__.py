"""Code generation backends, found by name: ``compiler.build(..., target=NAME)``.

``TARGETS`` maps each target name to the module that serves it; that module exports
``BACKEND``, an object with ``name``, ``passes`` (its ordered pass list, run on the lowered
function before code generation) and ``build(func, **options) -> module``. ``vta`` (instruction
streams for the accelerator) is driven by its own graph backend, not by ``compiler.build``.
"""

from __future__ import annotations

import importlib

from pyvta.isa.errors import PyvtaError

TARGETS = {
    "llvm": "pyvta.compiler.backend.llvm.entry",
    "cuda": "pyvta.compiler.backend.cuda",
    "cuda-emulated": "pyvta.compiler.backend.cuda_emulated",
}


class UnknownTarget(PyvtaError, ValueError):
    pass


def get_backend(target: str):
    """The ``BACKEND`` of ``target`` (imported on first use)."""
    if target not in TARGETS:
        raise UnknownTarget(
            f"target {target!r} is not supported (allowed: {', '.join(sorted(TARGETS))})"
        )
    return importlib.import_module(TARGETS[target]).BACKEND
